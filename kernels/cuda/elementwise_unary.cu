// Unary kernels (negative, abs, invert) for every dtype.
#include "kernels/cuda/elementwise.cuh"

namespace varstate::kernels::cuda {
VARSTATE_FOR_EACH_NUMERIC_STORAGE_TYPE(VARSTATE_CUDA_UNARY_INSTANTIATE)
VARSTATE_CUDA_UNARY_INSTANTIATE(kBool, bool)
}  // namespace varstate::kernels::cuda
