// Mapping from varstate storage types to CUDA arithmetic types, and the
// launch-geometry helpers every CUDA kernel file uses.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cuda/std/complex>

#include "base/cuda_check.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/launch.cuh"
#include "varstate/dtype.h"

namespace varstate::kernels::cuda {

template <typename T>
struct CudaTypeOf {
  using type = T;
};
template <>
struct CudaTypeOf<half> {
  using type = __half;
};
template <>
struct CudaTypeOf<bfloat16> {
  using type = __nv_bfloat16;
};
template <>
struct CudaTypeOf<complex64> {
  using type = ::cuda::std::complex<float>;
};
template <>
struct CudaTypeOf<complex128> {
  using type = ::cuda::std::complex<double>;
};
template <typename T>
using cuda_t = typename CudaTypeOf<T>::type;

static_assert(sizeof(__half) == sizeof(half));
static_assert(sizeof(__nv_bfloat16) == sizeof(bfloat16));
static_assert(sizeof(::cuda::std::complex<float>) == sizeof(complex64));

// Blocks for a grid-stride loop over `work` items: enough to fill the GPU
// (a few waves of the current device's SMs, cached per device), never more
// than the work needs.
inline unsigned grid_for(int64_t work, int threads_per_block) {
  const int64_t max_blocks = int64_t{current_device_info().multiprocessors} * 32;
  const int64_t blocks = (work + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, std::max<int64_t>(1, max_blocks)));
}

}  // namespace varstate::kernels::cuda
