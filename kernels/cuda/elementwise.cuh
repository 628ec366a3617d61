// Kernels, launchers and dtype dispatch behind kernels/cuda/elementwise.h.
// Included by the elementwise_*.cu files, each of which instantiates the
// entry points for a few dtypes so that the instantiations build in
// parallel.
#pragma once

#include <string>
#include <type_traits>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/elementwise_functors.h"
#include "varstate/error.h"

namespace varstate::kernels::cuda {
namespace elementwise_detail {

struct ElementwiseConfig {
  static constexpr int kThreads = 256;
  static constexpr int kVectorBytes = 16;
};

// Elements of C per 16-byte packet.
template <typename C>
constexpr int lanes() {
  return ElementwiseConfig::kVectorBytes / sizeof(C) > 0
             ? static_cast<int>(ElementwiseConfig::kVectorBytes / sizeof(C))
             : 1;
}

template <typename C, int N>
struct alignas(sizeof(C) * N) Vec {
  C v[N];
};

// 16-bit floats compute in float, as on the CPU.
template <typename C>
__device__ __forceinline__ auto load(const C& v) {
  if constexpr (std::is_same_v<C, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<C, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return v;
  }
}

template <typename C, typename V>
__device__ __forceinline__ C store(const V& v) {
  if constexpr (std::is_same_v<C, __half>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<C, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return static_cast<C>(v);
  }
}

inline bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % ElementwiseConfig::kVectorBytes == 0;
}

// Same-shape and scalar operands. With `vectorize`, whole packets move as
// 16-byte loads/stores and a scalar loop finishes the tail; without it
// (unaligned pointers) the tail loop does everything. A scalar b comes
// from b[0], or from `b_value` when `b` is null (a host scalar).
template <typename C, typename O, typename F>
__global__ void __launch_bounds__(ElementwiseConfig::kThreads)
    binary_vector_kernel(const C* __restrict__ a, const C* __restrict__ b, C b_value,
                         O* __restrict__ out, int64_t n, bool a_scalar, bool b_scalar,
                         bool vectorize, F f, int* err) {
  constexpr int N = lanes<C>();
  using VC = Vec<C, N>;
  using VO = Vec<O, N>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t packets = vectorize ? n / N : 0;
  const C a0 = a_scalar ? a[0] : C{};
  const C b0 = !b_scalar ? C{} : b == nullptr ? b_value : b[0];
  for (int64_t p = tid; p < packets; p += stride) {
    VC va, vb;
    if (!a_scalar) va = reinterpret_cast<const VC*>(a)[p];
    if (!b_scalar) vb = reinterpret_cast<const VC*>(b)[p];
    VO vo;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      vo.v[k] = store<O>(f(load(a_scalar ? a0 : va.v[k]), load(b_scalar ? b0 : vb.v[k]), err));
    }
    reinterpret_cast<VO*>(out)[p] = vo;
  }
  for (int64_t i = packets * N + tid; i < n; i += stride) {
    out[i] = store<O>(f(load(a_scalar ? a0 : a[i]), load(b_scalar ? b0 : b[i]), err));
  }
}

// General broadcast: each output index is decomposed over the output dims
// into the two operands' offsets (stride 0 along broadcast dims).
template <typename C, typename O, typename F>
__global__ void __launch_bounds__(ElementwiseConfig::kThreads)
    binary_broadcast_kernel(const C* __restrict__ a, const C* __restrict__ b, O* __restrict__ out,
                            BinaryGeometry g, F f, int* err) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < g.n;
       i += stride) {
    int64_t rem = i, oa = 0, ob = 0;
#pragma unroll
    for (int k = 0; k < BinaryGeometry::kMaxDims; ++k) {
      const int d = g.rank - 1 - k;
      if (d < 0) break;
      const int64_t q = rem / g.dims[d];
      const int64_t idx = rem - q * g.dims[d];
      rem = q;
      oa += idx * g.a_strides[d];
      ob += idx * g.b_strides[d];
    }
    out[i] = store<O>(f(load(a[oa]), load(b[ob]), err));
  }
}

template <typename C, typename O, typename F>
__global__ void __launch_bounds__(ElementwiseConfig::kThreads)
    unary_kernel(const C* __restrict__ in, O* __restrict__ out, int64_t n, bool vectorize, F f) {
  constexpr int N = lanes<C>();
  using VC = Vec<C, N>;
  using VO = Vec<O, N>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t packets = vectorize ? n / N : 0;
  for (int64_t p = tid; p < packets; p += stride) {
    VC v = reinterpret_cast<const VC*>(in)[p];
    VO vo;
#pragma unroll
    for (int k = 0; k < N; ++k) vo.v[k] = store<O>(f(load(v.v[k])));
    reinterpret_cast<VO*>(out)[p] = vo;
  }
  for (int64_t i = packets * N + tid; i < n; i += stride) out[i] = store<O>(f(load(in[i])));
}

template <typename C, typename O, typename F>
void launch_binary(const C* a, const C* b, O* out, const BinaryGeometry& g, F f, int* err,
                   cudaStream_t stream, const C* host_b = nullptr) {
  constexpr int kThreads = ElementwiseConfig::kThreads;
  if (g.n == 0) return;
  if (g.layout == BinaryGeometry::kBroadcast) {
    launch_kernel(binary_broadcast_kernel<C, O, F>, grid_for(g.n, kThreads), kThreads, 0, stream, a,
                  b, out, g, f, err);
  } else {
    const bool a_scalar =
        g.layout == BinaryGeometry::kScalarA || g.layout == BinaryGeometry::kScalarBoth;
    const bool b_scalar =
        g.layout == BinaryGeometry::kScalarB || g.layout == BinaryGeometry::kScalarBoth;
    if (host_b != nullptr && !b_scalar) {
      throw InternalError("CUDA binary kernel: a host operand must be a scalar");
    }
    const bool vectorize = aligned(out) && (a_scalar || aligned(a)) && (b_scalar || aligned(b));
    const int64_t work = vectorize ? (g.n + lanes<C>() - 1) / lanes<C>() : g.n;
    const C b_value = host_b != nullptr ? *host_b : C{};
    launch_kernel(binary_vector_kernel<C, O, F>, grid_for(work, kThreads), kThreads, 0, stream, a,
                  host_b != nullptr ? nullptr : b, b_value, out, g.n, a_scalar, b_scalar, vectorize,
                  f, err);
  }
}

template <typename C, typename O, typename F>
void launch_unary(const C* in, O* out, int64_t n, F f, cudaStream_t stream) {
  constexpr int kThreads = ElementwiseConfig::kThreads;
  if (n == 0) return;
  const bool vectorize = aligned(in) && aligned(out);
  const int64_t work = vectorize ? (n + lanes<C>() - 1) / lanes<C>() : n;
  launch_kernel(unary_kernel<C, O, F>, grid_for(work, kThreads), kThreads, 0, stream, in, out, n,
                vectorize, f);
}

[[noreturn]] inline void not_instantiated(const char* what) {
  throw InternalError(std::string("CUDA ") + what + " kernel called for an unsupported dtype");
}

}  // namespace elementwise_detail

template <typename T>
void arithmetic(BinaryOp op, const T* a, const T* b, T* out, const BinaryGeometry& g,
                int* error_flag, cudaStream_t stream, const T* host_b) {
  using C = cuda_t<T>;
  with_binary_functor(op, [&](auto fn, auto op_constant) {
    constexpr BinaryOp kOp = decltype(op_constant)::value;
    if constexpr (binary_op_supports<T>(kOp) && !binary_op_is_predicate(kOp)) {
      elementwise_detail::launch_binary(reinterpret_cast<const C*>(a),
                                        reinterpret_cast<const C*>(b), reinterpret_cast<C*>(out), g,
                                        fn, error_flag, stream, reinterpret_cast<const C*>(host_b));
    } else {
      elementwise_detail::not_instantiated("arithmetic");
    }
  });
}

template <typename T>
void predicate(BinaryOp op, const T* a, const T* b, bool* out, const BinaryGeometry& g,
               cudaStream_t stream) {
  using C = cuda_t<T>;
  with_binary_functor(op, [&](auto fn, auto op_constant) {
    constexpr BinaryOp kOp = decltype(op_constant)::value;
    if constexpr (binary_op_supports<T>(kOp) && binary_op_is_predicate(kOp)) {
      elementwise_detail::launch_binary(reinterpret_cast<const C*>(a),
                                        reinterpret_cast<const C*>(b), out, g, fn, nullptr, stream);
    } else {
      elementwise_detail::not_instantiated("predicate");
    }
  });
}

template <typename T>
void unary(UnaryOp op, const T* in, T* out, int64_t n, cudaStream_t stream) {
  using C = cuda_t<T>;
  const C* i = reinterpret_cast<const C*>(in);
  C* o = reinterpret_cast<C*>(out);
  switch (op) {
    case UnaryOp::kNegative:
      if constexpr (unary_op_supports<T>(UnaryOp::kNegative)) {
        return elementwise_detail::launch_unary(i, o, n, NegativeFn{}, stream);
      }
      break;
    case UnaryOp::kAbs:
      if constexpr (unary_op_supports<T>(UnaryOp::kAbs) && !kIsComplex<T>) {
        return elementwise_detail::launch_unary(i, o, n, AbsFn{}, stream);
      }
      break;
    case UnaryOp::kInvert:
      if constexpr (unary_op_supports<T>(UnaryOp::kInvert)) {
        return elementwise_detail::launch_unary(i, o, n, InvertFn{}, stream);
      }
      break;
  }
  elementwise_detail::not_instantiated("unary");
}

template <typename T, typename R>
void complex_abs(const T* in, R* out, int64_t n, cudaStream_t stream) {
  elementwise_detail::launch_unary(reinterpret_cast<const cuda_t<T>*>(in), out, n, AbsFn{}, stream);
}

}  // namespace varstate::kernels::cuda

// Explicit instantiations, used inside namespace varstate::kernels::cuda.
#define VARSTATE_CUDA_ARITHMETIC_INSTANTIATE(E, T)                                           \
  template void arithmetic<T>(BinaryOp, const T*, const T*, T*, const BinaryGeometry&, int*, \
                              cudaStream_t, const T*);
#define VARSTATE_CUDA_PREDICATE_INSTANTIATE(E, T)                                        \
  template void predicate<T>(BinaryOp, const T*, const T*, bool*, const BinaryGeometry&, \
                             cudaStream_t);
#define VARSTATE_CUDA_UNARY_INSTANTIATE(E, T) \
  template void unary<T>(UnaryOp, const T*, T*, int64_t, cudaStream_t);
