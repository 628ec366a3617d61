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

// The builds' rows<T>, one namespace each (MatmulRows's signature):
#define VARSTATE_DECLARE_MATMUL_ROWS(NS)                                                     \
  namespace NS {                                                                             \
  template <typename T>                                                                      \
  void rows(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a, \
            bool transpose_b, int64_t first, int64_t last);                                  \
  }
// x86-64 baseline (SSE2): float, double, int32, std::complex<float> and
// std::complex<double> (complex64, complex128).
VARSTATE_DECLARE_MATMUL_ROWS(matmul_baseline)
// AVX2 with FMA, and AVX-512 (F, VL, BW, DQ) with FMA: float and double.
VARSTATE_DECLARE_MATMUL_ROWS(matmul_avx2)
VARSTATE_DECLARE_MATMUL_ROWS(matmul_avx512)
#undef VARSTATE_DECLARE_MATMUL_ROWS

// bfloat16 on AMX tiles (matmul_amx.cc, built with -mamx-tile
// -mamx-bf16), the elements as their 16-bit patterns. TDPBF16PS multiplies
// pairs of bfloat16 exactly and sums in float, with denormal inputs read
// as zero and denormal sums flushed to zero.
namespace matmul_amx {
// The kernel granted this process the tiles' state (asked once). Call
// only where cpu_amx_allowed() (kernels/cpu/cpu_isa.h).
bool available();
// Pairs of rows of the packed B (k padded to 32 with zeros: k_pad / 2),
// and its words: op(b) [k, n] as pairs of its rows, each word the elements
// (2p, j) (low half) and (2p + 1, j), n padded to 32 with zeros.
int64_t packed_b_pairs(int64_t k);
int64_t packed_b_words(int64_t n, int64_t k);
// Pairs [first_pair, last_pair) of the packed B.
void pack_b(const uint16_t* b, int64_t n, int64_t k, bool transpose_b, uint32_t* packed,
            int64_t first_pair, int64_t last_pair);
// Rows [first, last) of the float c[m, n] = op(a) * op(b), first a multiple
// of 32, on the calling thread.
void rows(const uint16_t* a, const uint32_t* packed_b, float* c, int64_t m, int64_t n, int64_t k,
          bool transpose_a, int64_t first, int64_t last);
}  // namespace matmul_amx

}  // namespace varstate::kernels::cpu
