// The CPU device's factory and the host copy it uses. Private to device/.
#pragma once

#include <cstddef>
#include <memory>

#include "varstate/device.h"

namespace varstate::detail {

std::unique_ptr<Device> make_cpu_device();

// Parallel host memcpy (several threads above a few MiB).
void host_memcpy(void* dst, const void* src, size_t bytes);

}  // namespace varstate::detail
