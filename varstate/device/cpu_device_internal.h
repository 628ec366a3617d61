// Factories and helpers shared inside device/. Not installed.
#pragma once

#include <cstddef>
#include <memory>

#include "varstate/device/device.h"

namespace varstate::detail {

std::unique_ptr<Device> make_cpu_device();

// Parallel host memcpy (several threads above a few MiB).
void host_memcpy(void* dst, const void* src, size_t bytes);

#ifdef VARSTATE_HAVE_CUDA
// Number of CUDA GPUs; 0 when there is no driver or no GPU (never throws).
int cuda_device_count() noexcept;
std::unique_ptr<Device> make_cuda_device(int index);
// Enables peer access between every pair that supports it; returns the
// matrix can[dst][src].
std::vector<std::vector<bool>> cuda_enable_peer_access(int count);
// copy_bytes() when at least one side is a GPU.
void cuda_copy(Device& dst_device, void* dst, Device& src_device, const void* src, size_t bytes);
// Sets the calling thread's current CUDA device; returns the previous one
// (defined with CudaDeviceGuard in base/cuda_check.cc).
int cuda_exchange_device(int index);
// Page-locked host memory, or nullptr if it cannot be had.
void* cuda_host_alloc(size_t bytes) noexcept;
void cuda_host_free(void* ptr) noexcept;
#endif

}  // namespace varstate::detail
