// The CUDA device's factory and the CUDA operations that device.cc and
// device_manager.cc call for GPUs (defined in cuda_device.cc, built only with
// VARSTATE_HAVE_CUDA). Private to device/. The current-device exchange is
// declared once, in base/cuda_check.h.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "varstate/device.h"

namespace varstate::detail {

// Number of CUDA GPUs; 0 when there is no driver or no GPU (never throws).
int cuda_device_count() noexcept;
std::unique_ptr<Device> make_cuda_device(int index);
// Enables peer access between every pair that supports it; returns the
// matrix can[dst][src].
std::vector<std::vector<bool>> cuda_enable_peer_access(int count);
// copy_bytes() when at least one side is a GPU.
void cuda_copy(Device& dst_device, void* dst, Device& src_device, const void* src, size_t bytes);
// Page-locked host memory, or nullptr if it cannot be had.
void* cuda_host_alloc(size_t bytes) noexcept;
void cuda_host_free(void* ptr) noexcept;

}  // namespace varstate::detail
