// CUDA scatter instantiated for the 16-bit floating-point types.
#include "kernels/cuda/scatter_internal.cuh"

namespace varstate::kernels::cuda {

VARSTATE_INSTANTIATE_CUDA_SCATTER(kHalf, ::varstate::half)
VARSTATE_INSTANTIATE_CUDA_SCATTER(kBFloat16, ::varstate::bfloat16)

}  // namespace varstate::kernels::cuda
