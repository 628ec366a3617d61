// Arithmetic kernels for the floating-point dtypes.
#include "kernels/cuda/elementwise.cuh"

namespace varstate::kernels::cuda {
VARSTATE_CUDA_ARITHMETIC_INSTANTIATE(kFloat, float)
VARSTATE_CUDA_ARITHMETIC_INSTANTIATE(kDouble, double)
VARSTATE_CUDA_ARITHMETIC_INSTANTIATE(kHalf, ::varstate::half)
VARSTATE_CUDA_ARITHMETIC_INSTANTIATE(kBFloat16, ::varstate::bfloat16)
}  // namespace varstate::kernels::cuda
