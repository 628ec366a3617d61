// MatmulRows built with -mavx2 -mfma (kernels/sources.cmake): float and
// double. Called only where the CPU has both (matmul.cc).
#define VARSTATE_MATMUL_NS matmul_avx2
#define VARSTATE_MATMUL_EIGEN varstate_eigen_avx2
#include "kernels/cpu/matmul_rows_impl.h"

namespace varstate::kernels::cpu::matmul_avx2 {
VARSTATE_MATMUL_ROWS(float)
VARSTATE_MATMUL_ROWS(double)
}  // namespace varstate::kernels::cpu::matmul_avx2
