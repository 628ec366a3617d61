#include "kernels/cpu/index_check.h"

#include <algorithm>
#include <limits>
#include <type_traits>

#include "kernels/cpu/cpu_isa.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VARSTATE_INDEX_CHECK_AVX2 1
#include <immintrin.h>
#endif

namespace varstate::kernels::cpu {
namespace {

constexpr int64_t kBlock = 256;

// Index i is bad when, as an unsigned number of its own width, it is at
// least `limit`: negative indices become huge. For int32 indices a table
// of 2^31 rows or more has limit 2^31, so that only negatives are bad.
template <typename Index>
using Unsigned = std::conditional_t<sizeof(Index) == 4, uint32_t, uint64_t>;

template <typename Index>
Unsigned<Index> limit_of(int64_t rows) {
  using U = Unsigned<Index>;
  const auto most = static_cast<uint64_t>(std::numeric_limits<Index>::max()) + 1;
  return static_cast<U>(std::min<uint64_t>(static_cast<uint64_t>(rows), most));
}

template <typename Index>
bool bad(Index index, Unsigned<Index> limit) {
  return static_cast<Unsigned<Index>>(index) >= limit;
}

// The first bad position in [begin, end), or -1.
template <typename Index>
int64_t scan(const Index* indices, int64_t begin, int64_t end, Unsigned<Index> limit) {
  for (int64_t i = begin; i < end; ++i) {
    if (bad(indices[i], limit)) return i;
  }
  return -1;
}

template <typename Index>
int64_t first_bad_portable(const Index* indices, int64_t n, int64_t rows) {
  if (n <= 0) return -1;
  if (rows <= 0) return 0;
  const auto limit = limit_of<Index>(rows);
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    uint64_t any = 0;  // an integer, not a bool: the loop then has no branch
    for (int64_t i = b; i < e; ++i) any |= static_cast<uint64_t>(bad(indices[i], limit));
    if (any != 0) return scan(indices, b, e, limit);
  }
  return -1;
}

#if VARSTATE_INDEX_CHECK_AVX2

// Unsigned x >= limit as a signed compare: x ^ sign > (limit - 1) ^ sign
// (limit >= 1 here; a table of no rows takes the portable path), 32 bytes
// of indices a compare.
template <typename Index>
__attribute__((target("avx2"))) int64_t first_bad_avx2(const Index* indices, int64_t n,
                                                       int64_t rows) {
  constexpr bool kWide = sizeof(Index) == 8;
  constexpr int64_t kLanes = 32 / sizeof(Index);
  const auto limit = limit_of<Index>(rows);
  const auto last_value = static_cast<Index>(limit - 1);
  constexpr Index kSign = std::numeric_limits<Index>::min();
  __m256i sign, last;
  if constexpr (kWide) {
    sign = _mm256_set1_epi64x(kSign);
    last = _mm256_xor_si256(_mm256_set1_epi64x(last_value), sign);
  } else {
    sign = _mm256_set1_epi32(kSign);
    last = _mm256_xor_si256(_mm256_set1_epi32(last_value), sign);
  }
  int64_t b = 0;
  for (; b + kBlock <= n; b += kBlock) {
    __m256i any = _mm256_setzero_si256();
    for (int64_t i = b; i < b + kBlock; i += kLanes) {
      const __m256i v =
          _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(indices + i)), sign);
      if constexpr (kWide) {
        any = _mm256_or_si256(any, _mm256_cmpgt_epi64(v, last));
      } else {
        any = _mm256_or_si256(any, _mm256_cmpgt_epi32(v, last));
      }
    }
    if (!_mm256_testz_si256(any, any)) return scan(indices, b, b + kBlock, limit);
  }
  return scan(indices, b, n, limit);
}

#endif  // VARSTATE_INDEX_CHECK_AVX2

template <typename Index>
int64_t first_bad(const Index* indices, int64_t n, int64_t rows) {
  if (n <= 0) return -1;
  if (rows <= 0) return 0;
#if VARSTATE_INDEX_CHECK_AVX2
  if (cpu_isa() >= Isa::kAvx2) return first_bad_avx2(indices, n, rows);
#endif
  return first_bad_portable(indices, n, rows);
}

}  // namespace

int64_t first_bad_index(const int32_t* indices, int64_t n, int64_t rows) {
  return first_bad(indices, n, rows);
}

int64_t first_bad_index(const int64_t* indices, int64_t n, int64_t rows) {
  return first_bad(indices, n, rows);
}

int64_t first_bad_index_portable(const int32_t* indices, int64_t n, int64_t rows) {
  return first_bad_portable(indices, n, rows);
}

int64_t first_bad_index_portable(const int64_t* indices, int64_t n, int64_t rows) {
  return first_bad_portable(indices, n, rows);
}

}  // namespace varstate::kernels::cpu
