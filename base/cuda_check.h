// CUDA error checking. Every CUDA runtime call in varstate goes through
// VARSTATE_CUDA_CHECK, which throws InternalError (ResourceExhaustedError for
// out-of-memory) naming the failing call, file:line and the current device.
// VARSTATE_CUDA_CHECK_LAUNCH() follows every kernel launch; with the build
// option VARSTATE_CUDA_SYNC_DEBUG it also synchronizes so that asynchronous
// faults are reported at the launch that caused them.
// Internal: only files compiled with CUDA include it.
#pragma once

#include <cuda_runtime_api.h>

namespace varstate::detail {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);

// Makes `index` the calling thread's current CUDA device; returns the
// previous one. Throws InternalError if the driver refuses.
int cuda_exchange_device(int index);

// The CUDA device guard: makes `index` the calling thread's current device
// for the guard's lifetime and restores the previous one afterwards. Kernel
// launches, allocations and library handles bind to the current device.
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int index) : previous_(cuda_exchange_device(index)) {}
  ~CudaDeviceGuard() { cudaSetDevice(previous_); }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_;
};

}  // namespace varstate::detail

#define VARSTATE_CUDA_CHECK(call)                                                          \
  do {                                                                                     \
    cudaError_t varstate_cuda_err_ = (call);                                               \
    if (varstate_cuda_err_ != cudaSuccess)                                                 \
      ::varstate::detail::throw_cuda_error(varstate_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)

#ifdef VARSTATE_CUDA_SYNC_DEBUG
#define VARSTATE_CUDA_CHECK_LAUNCH()              \
  do {                                            \
    VARSTATE_CUDA_CHECK(cudaGetLastError());      \
    VARSTATE_CUDA_CHECK(cudaDeviceSynchronize()); \
  } while (0)
#else
#define VARSTATE_CUDA_CHECK_LAUNCH() VARSTATE_CUDA_CHECK(cudaGetLastError())
#endif
