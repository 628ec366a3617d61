#include "kernels/cuda/dense_update.h"

#include "kernels/cuda/cuda_types.cuh"

namespace varstate::kernels::cuda {
namespace {

struct DenseUpdateConfig {
  static constexpr int kThreads = 256;
  static constexpr int kVectorBytes = 16;
};

template <typename C>
__device__ __forceinline__ C apply(DenseUpdateOp op, C a, C b) {
  switch (op) {
    case DenseUpdateOp::kAdd:
      return C(a + b);
    case DenseUpdateOp::kSub:
      return C(a - b);
    default:
      return b;
  }
}

template <typename C, int N>
struct alignas(DenseUpdateConfig::kVectorBytes) Vec {
  C v[N];
};

// Vector body: each thread handles whole 16-byte packets; a scalar tail loop
// finishes the last n % N elements. `src_is_scalar` broadcasts src[0].
template <typename C, DenseUpdateOp Op, bool Scalar>
__global__ void dense_update_kernel(C* __restrict__ dst, const C* __restrict__ src, int64_t n) {
  constexpr int N = DenseUpdateConfig::kVectorBytes / sizeof(C) > 0
                        ? DenseUpdateConfig::kVectorBytes / sizeof(C)
                        : 1;
  using V = Vec<C, N>;
  const int64_t packets = n / N;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  C s{};
  if constexpr (Scalar) s = src[0];
  V* dv = reinterpret_cast<V*>(dst);
  const V* sv = reinterpret_cast<const V*>(src);
  for (int64_t p = tid; p < packets; p += stride) {
    V a;
    if constexpr (Op != DenseUpdateOp::kAssign) a = dv[p];
    V b;
    if constexpr (!Scalar) b = sv[p];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      a.v[k] = apply<C>(Op, a.v[k], Scalar ? s : b.v[k]);
    }
    dv[p] = a;
  }
  for (int64_t i = packets * N + tid; i < n; i += stride) {
    dst[i] = apply<C>(Op, dst[i], Scalar ? s : src[i]);
  }
}

// Unaligned fallback: plain element-wise grid-stride loop.
template <typename C, DenseUpdateOp Op, bool Scalar>
__global__ void dense_update_scalar_kernel(C* dst, const C* src, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  C s{};
  if constexpr (Scalar) s = src[0];
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    dst[i] = apply<C>(Op, dst[i], Scalar ? s : src[i]);
  }
}

template <typename C, DenseUpdateOp Op, bool Scalar>
void launch(C* dst, const C* src, int64_t n, cudaStream_t stream) {
  constexpr int kThreads = DenseUpdateConfig::kThreads;
  constexpr int N = DenseUpdateConfig::kVectorBytes / sizeof(C) > 0
                        ? DenseUpdateConfig::kVectorBytes / sizeof(C)
                        : 1;
  auto aligned = [](const void* p) {
    return reinterpret_cast<uintptr_t>(p) % DenseUpdateConfig::kVectorBytes == 0;
  };
  if (aligned(dst) && (Scalar || aligned(src))) {
    launch_kernel(dense_update_kernel<C, Op, Scalar>, grid_for((n + N - 1) / N, kThreads), kThreads,
                  0, stream, dst, src, n);
  } else {
    launch_kernel(dense_update_scalar_kernel<C, Op, Scalar>, grid_for(n, kThreads), kThreads, 0,
                  stream, dst, src, n);
  }
}

template <typename C, DenseUpdateOp Op>
void launch_op(C* dst, const C* src, int64_t n, bool scalar, cudaStream_t stream) {
  if (scalar) {
    launch<C, Op, true>(dst, src, n, stream);
  } else {
    launch<C, Op, false>(dst, src, n, stream);
  }
}

}  // namespace

template <typename T>
void dense_update(DenseUpdateOp op, T* dst, const T* src, int64_t n, bool src_is_scalar,
                  cudaStream_t stream) {
  if (n == 0) return;
  using C = cuda_t<T>;
  auto* d = reinterpret_cast<C*>(dst);
  auto* s = reinterpret_cast<const C*>(src);
  switch (op) {
    case DenseUpdateOp::kAssign:
      if (!src_is_scalar) {
        if (dst != src) {
          VARSTATE_CUDA_CHECK(
              cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyDeviceToDevice, stream));
        }
        return;
      }
      launch_op<C, DenseUpdateOp::kAssign>(d, s, n, true, stream);
      return;
    case DenseUpdateOp::kAdd:
      launch_op<C, DenseUpdateOp::kAdd>(d, s, n, src_is_scalar, stream);
      return;
    case DenseUpdateOp::kSub:
      launch_op<C, DenseUpdateOp::kSub>(d, s, n, src_is_scalar, stream);
      return;
  }
}

#define VARSTATE_INSTANTIATE(E, T) \
  template void dense_update<T>(DenseUpdateOp, T*, const T*, int64_t, bool, cudaStream_t);
VARSTATE_FOR_EACH_NUMERIC_STORAGE_TYPE(VARSTATE_INSTANTIATE)
#undef VARSTATE_INSTANTIATE

}  // namespace varstate::kernels::cuda
