// MatmulRows for the x86-64 baseline: complex64 and complex128.
#define VARSTATE_MATMUL_NS matmul_baseline
#include "kernels/cpu/matmul_rows_impl.h"

#include <complex>

namespace varstate::kernels::cpu::matmul_baseline {
VARSTATE_MATMUL_ROWS(std::complex<float>)
VARSTATE_MATMUL_ROWS(std::complex<double>)
}  // namespace varstate::kernels::cpu::matmul_baseline
