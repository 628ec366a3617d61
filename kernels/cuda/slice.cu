#include "kernels/cuda/slice.h"

#include "kernels/cuda/cuda_types.cuh"

namespace varstate::kernels::cuda {
namespace {

struct SliceConfig {
  static constexpr int kThreads = 256;
};

// One thread per element, grid-stride; consecutive threads walk the
// innermost dim, so contiguous runs of the views coalesce.
template <typename T>
__global__ void __launch_bounds__(SliceConfig::kThreads)
    strided_copy_kernel(const T* __restrict__ src, T* __restrict__ dst, StridedCopy c) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < c.n;
       i += stride) {
    int64_t rem = i, so = c.src.offset, dof = c.dst.offset;
#pragma unroll
    for (int k = 0; k < StridedCopy::kMaxDims; ++k) {
      const int d = c.rank - 1 - k;
      if (d < 0) break;
      const int64_t q = rem / c.dims[d];
      const int64_t idx = rem - q * c.dims[d];
      rem = q;
      so += idx * c.src.strides[d];
      dof += idx * c.dst.strides[d];
    }
    dst[dof] = src[so];
  }
}

}  // namespace

template <typename T>
void strided_copy(const T* src, T* dst, const StridedCopy& c, cudaStream_t stream) {
  if (c.n == 0) return;
  constexpr int kThreads = SliceConfig::kThreads;
  launch_kernel(strided_copy_kernel<T>, grid_for(c.n, kThreads), kThreads, 0, stream, src, dst, c);
}

template void strided_copy<Opaque<1>>(const Opaque<1>*, Opaque<1>*, const StridedCopy&,
                                      cudaStream_t);
template void strided_copy<Opaque<2>>(const Opaque<2>*, Opaque<2>*, const StridedCopy&,
                                      cudaStream_t);
template void strided_copy<Opaque<4>>(const Opaque<4>*, Opaque<4>*, const StridedCopy&,
                                      cudaStream_t);
template void strided_copy<Opaque<8>>(const Opaque<8>*, Opaque<8>*, const StridedCopy&,
                                      cudaStream_t);
template void strided_copy<Opaque<16>>(const Opaque<16>*, Opaque<16>*, const StridedCopy&,
                                       cudaStream_t);

}  // namespace varstate::kernels::cuda
