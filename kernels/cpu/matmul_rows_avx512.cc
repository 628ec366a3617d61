// MatmulRows built with -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma
// (kernels/sources.cmake): float and double. Called only where the CPU has
// all of them (matmul.cc).
#define VARSTATE_MATMUL_NS matmul_avx512
#define VARSTATE_MATMUL_EIGEN varstate_eigen_avx512
#include "kernels/cpu/matmul_rows_impl.h"

namespace varstate::kernels::cpu::matmul_avx512 {
VARSTATE_MATMUL_ROWS(float)
VARSTATE_MATMUL_ROWS(double)
}  // namespace varstate::kernels::cpu::matmul_avx512
