// CUDA scatter instantiated for the complex types.
#include "kernels/cuda/scatter_internal.cuh"

namespace varstate::kernels::cuda {

VARSTATE_INSTANTIATE_CUDA_SCATTER(kComplex64, ::varstate::complex64)
VARSTATE_INSTANTIATE_CUDA_SCATTER(kComplex128, ::varstate::complex128)

}  // namespace varstate::kernels::cuda
