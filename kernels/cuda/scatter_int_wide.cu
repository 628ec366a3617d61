// CUDA scatter instantiated for the 32- and 64-bit integer types.
#include "kernels/cuda/scatter_internal.cuh"

namespace varstate::kernels::cuda {

VARSTATE_INSTANTIATE_CUDA_SCATTER(kInt32, int32_t)
VARSTATE_INSTANTIATE_CUDA_SCATTER(kInt64, int64_t)
VARSTATE_INSTANTIATE_CUDA_SCATTER(kUInt32, uint32_t)
VARSTATE_INSTANTIATE_CUDA_SCATTER(kUInt64, uint64_t)

}  // namespace varstate::kernels::cuda
