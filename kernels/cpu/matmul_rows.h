// The rows of a CPU matrix product (Eigen's GEMM), built once per
// instruction set: matmul.cc splits a product's rows over the pool and
// calls the build for this CPU on each range. Internal.
//
// Eigen picks its vector width from the compiler's flags (__AVX2__,
// __AVX512F__), not from a function's target attribute, so a wider GEMM
// needs a translation unit compiled with wider flags: matmul_rows_avx2.cc
// (-mavx2 -mfma) and matmul_rows_avx512.cc (-mavx512f/vl/bw/dq -mfma).
// Each renames Eigen's namespace before including it
// (matmul_rows_impl.h), so that none of the templates it instantiates can
// take the place of the baseline build's at link time.
#pragma once

#include <cstdint>

namespace varstate::kernels::cpu {

// Rows [first, last) of c[m,n] = op(a) * op(b) (matmul.h's layout), on
// the calling thread.
template <typename T>
using MatmulRows = void (*)(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k,
                            bool transpose_a, bool transpose_b, int64_t first, int64_t last);

// x86-64 baseline (SSE2): float, double, int32, std::complex<float> and
// std::complex<double> (complex64, complex128).
namespace matmul_baseline {
template <typename T>
void rows(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
          bool transpose_b, int64_t first, int64_t last);
}  // namespace matmul_baseline

// AVX2 with FMA, and AVX-512 (F, VL, BW, DQ) with FMA: float and double.
namespace matmul_avx2 {
template <typename T>
void rows(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
          bool transpose_b, int64_t first, int64_t last);
}  // namespace matmul_avx2
namespace matmul_avx512 {
template <typename T>
void rows(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
          bool transpose_b, int64_t first, int64_t last);
}  // namespace matmul_avx512

}  // namespace varstate::kernels::cpu
