// The CPU matrix product: the rows of c split over the Eigen thread pool,
// each range computed by Eigen's GEMM as built for this CPU
// (matmul_rows.h); float16 and bfloat16 through float.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <type_traits>

#include "kernels/cpu/cast.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/eigen_support.h"
#include "kernels/cpu/matmul_rows.h"
#include "kernels/cpu/thread_scratch.h"

namespace varstate::kernels::cpu {
namespace {

template <typename T>
MatmulRows<T> rows_for_cpu() {
#ifdef VARSTATE_MATMUL_ISA_VARIANTS
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    switch (cpu_isa_with_fma()) {
      case Isa::kAvx512:
        return &matmul_avx512::rows<T>;
      case Isa::kAvx2:
        return &matmul_avx2::rows<T>;
      case Isa::kBaseline:
        break;
    }
  }
#endif
  return &matmul_baseline::rows<T>;
}

// Whether bfloat16 products run on AMX tiles: cpu_amx_allowed(), and the
// kernel grants the tiles.
bool use_amx() {
  static const bool amx = [] {
#ifdef VARSTATE_MATMUL_AMX
    return cpu_amx_allowed() && matmul_amx::available();
#else
    return false;
#endif
  }();
  return amx;
}

// Products of fewer multiply-adds run on the calling thread: below ~1M the
// pool's wake-up costs more than it saves.
constexpr int64_t kSplitMultiplyAdds = int64_t{1} << 20;

// The rows of a split start at multiples of this: a multiple of every
// register block of rows Eigen's GEMM uses (3 vectors of rows: 48 floats
// in AVX-512, 24 in AVX2, 12 in SSE2; half that of doubles), so that each
// row goes through the same kernel, and is summed in the same order,
// however many threads share the product.
constexpr Eigen::Index kRowAlign = 48;

// c = op(a) op(b) for the types Eigen's GEMM computes in.
template <typename T>
void gemm(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
          bool transpose_b) {
  const MatmulRows<T> rows = rows_for_cpu<T>();
  if (m * n * k < kSplitMultiplyAdds || m == 1) {
    rows(a, b, c, m, n, k, transpose_a, transpose_b, 0, m);
    return;
  }
  const double row_bytes = static_cast<double>((k + n) * sizeof(T));
  eigen_device().parallelFor(
      m,
      Eigen::TensorOpCost(row_bytes, static_cast<double>(n * sizeof(T)),
                          2.0 * static_cast<double>(n * k)),
      [](Eigen::Index size) { return (size + kRowAlign - 1) / kRowAlign * kRowAlign; },
      [&](Eigen::Index first, Eigen::Index last) {
        rows(a, b, c, m, n, k, transpose_a, transpose_b, first, last);
      });
}

// The 16-bit products' float operands and result, and the tile kernel's
// packed B: the calling thread's buffers, kept from call to call (a fresh
// block each call faulted in its pages: 5 ms of a 15 ms product of
// 1024 x 1024).
struct WideA;
struct WideB;
struct WideC;
struct PackedB;

#ifdef VARSTATE_MATMUL_AMX
// bfloat16 on AMX tiles: B packed into tiles of pairs of rows (split over
// the pool from kSplitMultiplyAdds, as the product is), blocks of 32 rows
// of c in float, then rounded to bfloat16 once.
void amx_matmul(const bfloat16* a, const bfloat16* b, bfloat16* c, int64_t m, int64_t n, int64_t k,
                bool transpose_a, bool transpose_b) {
  const auto* a16 = reinterpret_cast<const uint16_t*>(a);
  const auto* b16 = reinterpret_cast<const uint16_t*>(b);
  const int64_t pairs = matmul_amx::packed_b_pairs(k);
  ThreadScratch<uint32_t, PackedB> packed(static_cast<size_t>(matmul_amx::packed_b_words(n, k)));
  ThreadScratch<float, WideC> fc(static_cast<size_t>(m * n));
  uint32_t* const pb = packed.data();
  float* const out = fc.data();
  const int64_t blocks = (m + 31) / 32;
  if (m * n * k < kSplitMultiplyAdds || blocks == 1) {
    matmul_amx::pack_b(b16, n, k, transpose_b, pb, 0, pairs);
    matmul_amx::rows(a16, pb, out, m, n, k, transpose_a, 0, m);
  } else {
    const double pair_bytes = 8.0 * static_cast<double>(n);
    eigen_device().parallelFor(pairs, Eigen::TensorOpCost(pair_bytes, pair_bytes, 2.0 * n),
                               [&](Eigen::Index first, Eigen::Index last) {
                                 matmul_amx::pack_b(b16, n, k, transpose_b, pb, first, last);
                               });
    const double block_bytes = 64.0 * static_cast<double>(k + n);
    eigen_device().parallelFor(
        blocks, Eigen::TensorOpCost(block_bytes, 128.0 * n, 64.0 * static_cast<double>(n * k)),
        [&](Eigen::Index first, Eigen::Index last) {
          matmul_amx::rows(a16, pb, out, m, n, k, transpose_a, first * 32,
                           std::min<int64_t>(m, last * 32));
        });
  }
  cast<float, bfloat16>(out, c, m * n);
}
#endif

}  // namespace

// float16 and bfloat16: the operands widened to float (exactly), the
// products summed in float, and each result rounded once to T (to nearest
// even), as TensorFlow's CPU kernels (oneDNN) and cuBLAS with 32-bit
// compute (the CUDA path) do. Eigen's GEMM on the 16-bit type itself
// rounded every partial sum to T, and ran one scalar multiply-add at a
// time.
template <typename T>
void matmul(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
            bool transpose_b) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
#ifdef VARSTATE_MATMUL_AMX
    if constexpr (std::is_same_v<T, bfloat16>) {
      if (use_amx()) {
        amx_matmul(a, b, c, m, n, k, transpose_a, transpose_b);
        return;
      }
    }
#endif
    ThreadScratch<float, WideA> fa(static_cast<size_t>(m * k));
    ThreadScratch<float, WideB> fb(static_cast<size_t>(k * n));
    ThreadScratch<float, WideC> fc(static_cast<size_t>(m * n));
    cast<T, float>(a, fa.data(), m * k);
    cast<T, float>(b, fb.data(), k * n);
    gemm<float>(fa.data(), fb.data(), fc.data(), m, n, k, transpose_a, transpose_b);
    cast<float, T>(fc.data(), c, m * n);
  } else {
    using E = eigen_t<T>;
    gemm<E>(reinterpret_cast<const E*>(a), reinterpret_cast<const E*>(b), reinterpret_cast<E*>(c),
            m, n, k, transpose_a, transpose_b);
  }
}

template void matmul<float>(const float*, const float*, float*, int64_t, int64_t, int64_t, bool,
                            bool);
template void matmul<double>(const double*, const double*, double*, int64_t, int64_t, int64_t, bool,
                             bool);
template void matmul<int32_t>(const int32_t*, const int32_t*, int32_t*, int64_t, int64_t, int64_t,
                              bool, bool);
template void matmul<half>(const half*, const half*, half*, int64_t, int64_t, int64_t, bool, bool);
template void matmul<bfloat16>(const bfloat16*, const bfloat16*, bfloat16*, int64_t, int64_t,
                               int64_t, bool, bool);
template void matmul<complex64>(const complex64*, const complex64*, complex64*, int64_t, int64_t,
                                int64_t, bool, bool);
template void matmul<complex128>(const complex128*, const complex128*, complex128*, int64_t,
                                 int64_t, int64_t, bool, bool);

}  // namespace varstate::kernels::cpu
