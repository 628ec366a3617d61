// The one place a CUDA kernel is launched from. Every launch site calls
// launch_kernel() instead of writing `kernel<<<grid, block, shared, stream>>>`,
// so that the same kernel sources build two ways:
//  - with nvcc, launch_kernel is the triple-chevron launch;
//  - in the emulated build (VARSTATE_CUDA=EMULATE, cuda_emulation/), the .cu
//    files are compiled by the host compiler and launch_kernel enqueues the
//    kernel on the emulated stream, where it runs block by block, thread by
//    thread (cuda_emulation/kernel_launch.h).
// Either way the launch is checked (VARSTATE_CUDA_CHECK_LAUNCH): a bad
// configuration throws here, a fault inside the kernel surfaces at the next
// synchronizing call, as on a GPU.
#pragma once

#include <cstddef>
#include <utility>

#include "base/cuda_check.h"

#ifdef VARSTATE_CUDA_EMULATED
#include "cuda_emulation/kernel_launch.h"
#endif

namespace varstate::kernels::cuda {

template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                   cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel argument count");
#ifdef VARSTATE_CUDA_EMULATED
  ::varstate::cuda_emulation::launch(kernel, grid, block, shared_bytes, stream,
                                     std::forward<Args>(args)...);
#else
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
#endif
  VARSTATE_CUDA_CHECK_LAUNCH();
}

// The block's dynamic shared memory (the launch's `shared_bytes`), as T.
template <typename T>
__device__ __forceinline__ T* dynamic_shared_memory() {
#ifdef VARSTATE_CUDA_EMULATED
  return static_cast<T*>(::varstate::cuda_emulation::dynamic_shared_memory());
#else
  extern __shared__ unsigned char varstate_dynamic_shared[];
  return reinterpret_cast<T*>(varstate_dynamic_shared);
#endif
}

}  // namespace varstate::kernels::cuda
