// Comparison and logical kernels (bool results) for every dtype.
#include "kernels/cuda/elementwise.cuh"

namespace varstate::kernels::cuda {
VARSTATE_FOR_EACH_NUMERIC_STORAGE_TYPE(VARSTATE_CUDA_PREDICATE_INSTANTIATE)
VARSTATE_CUDA_PREDICATE_INSTANTIATE(kBool, bool)
}  // namespace varstate::kernels::cuda
