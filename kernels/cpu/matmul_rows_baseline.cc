// MatmulRows for the x86-64 baseline: float, double and int32 (complex
// types: matmul_rows_complex.cc, built in parallel).
#define VARSTATE_MATMUL_NS matmul_baseline
#include "kernels/cpu/matmul_rows_impl.h"

namespace varstate::kernels::cpu::matmul_baseline {
VARSTATE_MATMUL_ROWS(float)
VARSTATE_MATMUL_ROWS(double)
VARSTATE_MATMUL_ROWS(int32_t)
}  // namespace varstate::kernels::cpu::matmul_baseline
