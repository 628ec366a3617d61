// CUDA scatter instantiated for the 8- and 16-bit integer types.
#include "kernels/cuda/scatter_internal.cuh"

namespace varstate::kernels::cuda {

VARSTATE_INSTANTIATE_CUDA_SCATTER(kInt8, int8_t)
VARSTATE_INSTANTIATE_CUDA_SCATTER(kInt16, int16_t)
VARSTATE_INSTANTIATE_CUDA_SCATTER(kUInt8, uint8_t)
VARSTATE_INSTANTIATE_CUDA_SCATTER(kUInt16, uint16_t)

}  // namespace varstate::kernels::cuda
