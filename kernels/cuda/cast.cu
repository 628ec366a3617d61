#include "kernels/cuda/cast.h"

#include <string>
#include <type_traits>

#include "kernels/cast_value.h"
#include "kernels/cuda/cuda_types.cuh"
#include "varstate/error.h"

namespace varstate::kernels::cuda {
namespace {

struct CastConfig {
  static constexpr int kThreads = 256;
};

template <typename T, typename W>
__device__ __forceinline__ void put(void* out, int64_t i, const W& v) {
  static_cast<cuda_t<T>*>(out)[i] = convert_widened<cuda_t<T>>(v);
}

template <typename C>
__global__ void __launch_bounds__(CastConfig::kThreads)
    cast_kernel(const C* __restrict__ in, DType to, void* __restrict__ out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const auto v = widen(in[i]);
    switch (to) {  // uniform across the grid
#define VARSTATE_CAST_CASE(E, T) \
  case DType::E:                 \
    put<T>(out, i, v);           \
    break;
      VARSTATE_FOR_EACH_NUMERIC_DTYPE(VARSTATE_CAST_CASE)
#undef VARSTATE_CAST_CASE
      case DType::kBool:
        put<bool>(out, i, v);
        break;
      default:
        break;
    }
  }
}

}  // namespace

template <typename From>
void cast(const From* in, DType to, void* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (to != DType::kBool && !dtype_is_numeric(to)) {
    throw InternalError("CUDA cast kernel called for dtype " + std::string(dtype_name(to)));
  }
  constexpr int kThreads = CastConfig::kThreads;
  launch_kernel(cast_kernel<cuda_t<From>>, grid_for(n, kThreads), kThreads, 0, stream,
                reinterpret_cast<const cuda_t<From>*>(in), to, out, n);
}

#define VARSTATE_INSTANTIATE(E, T) \
  template void cast<T>(const T*, DType, void*, int64_t, cudaStream_t);
VARSTATE_FOR_EACH_NUMERIC_STORAGE_TYPE(VARSTATE_INSTANTIATE)
VARSTATE_INSTANTIATE(kBool, bool)
#undef VARSTATE_INSTANTIATE

}  // namespace varstate::kernels::cuda
