// Arithmetic kernels and |z| for the complex dtypes.
#include "kernels/cuda/elementwise.cuh"

namespace varstate::kernels::cuda {
VARSTATE_CUDA_ARITHMETIC_INSTANTIATE(kComplex64, ::varstate::complex64)
VARSTATE_CUDA_ARITHMETIC_INSTANTIATE(kComplex128, ::varstate::complex128)
template void complex_abs<complex64, float>(const complex64*, float*, int64_t, cudaStream_t);
template void complex_abs<complex128, double>(const complex128*, double*, int64_t, cudaStream_t);
}  // namespace varstate::kernels::cuda
