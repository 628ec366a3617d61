// CUDA scatter instantiated for float and double.
#include "kernels/cuda/scatter_internal.cuh"

namespace varstate::kernels::cuda {

VARSTATE_INSTANTIATE_CUDA_SCATTER(kFloat, float)
VARSTATE_INSTANTIATE_CUDA_SCATTER(kDouble, double)

}  // namespace varstate::kernels::cuda
