#include "kernels/cpu/gather.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/common.h"
#include "kernels/cpu/eigen_support.h"
#include "kernels/cpu/part_lookup.h"

namespace varstate::kernels::cpu {
namespace {

// Rows ahead whose first cache line is prefetched, for rows of `Bytes`
// (a constant, or int64_t for other sizes): random rows are latency-bound,
// and a copy loop alone keeps too few misses in flight. Rows of one line
// look further ahead, as the scatters' (scatter_internal.h): measured in
// one process, alternating with 16 (bench_sparse_limit, gather from
// [1M,16]), 32 ran 1M Zipf ids 1.19x faster and the rest 1.0-1.06x; rows
// of 256 bytes lost 17-31 % at 32 and ran no faster at 8 or 12.
template <typename Bytes>
constexpr int64_t prefetch_rows() {
  if constexpr (std::is_integral_v<Bytes>) {
    return 16;
  } else {
    return Bytes::value <= 64 ? 32 : 16;
  }
}

// copy(first, last) over [0, n), on several threads above the gather
// threshold (bytes read + written).
template <typename Copy>
void for_rows(int64_t n, int64_t row_bytes, const Copy& copy) {
  for_ranges(n, 1, 2 * n * row_bytes, parallel_thresholds().gather_bytes, copy);
}

// Copies rows first..last-1 of the output from source(i) (the address of
// output row i's source row), each source computed once and prefetched
// prefetch_rows<Bytes>() rows before its copy.
template <typename Source, typename Bytes>
void copy_rows(const Source& source, Bytes row_bytes, int64_t first, int64_t last, char* dst) {
  constexpr int64_t kPrefetchRows = prefetch_rows<Bytes>();
  const char* ahead[kPrefetchRows];  // ring: the sources of rows i..i+kPrefetchRows-1
  const int64_t primed = std::min(kPrefetchRows, last - first);
  for (int64_t k = 0; k < primed; ++k) {
    ahead[k] = source(first + k);
    __builtin_prefetch(ahead[k]);
  }
  for (int64_t i = first; i < last; ++i) {
    const int64_t slot = (i - first) % kPrefetchRows;
    const char* src = ahead[slot];
    if (i + kPrefetchRows < last) {
      ahead[slot] = source(i + kPrefetchRows);
      __builtin_prefetch(ahead[slot]);
    }
    std::memcpy(dst + i * row_bytes, src, row_bytes);
  }
}

}  // namespace

template <typename Index>
void gather_rows(const void* table, int64_t row_bytes, const Index* indices, int64_t n, void* out) {
  if (n == 0 || row_bytes == 0) return;
  const char* base = static_cast<const char*>(table);
  auto source = [&](int64_t i) { return base + static_cast<int64_t>(indices[i]) * row_bytes; };
  with_constant<32, 64, 128, 256>(row_bytes, [&](auto bytes) {
    // A row's copy with a constant size (8 to 64 floats) is a few vector
    // moves, not a call to memcpy, which at 64 bytes costs as much as the
    // row's cache miss.
    for_rows(n, row_bytes, [&](int64_t first, int64_t last) {
      copy_rows(source, bytes, first, last, static_cast<char*>(out));
    });
  });
}

template <typename Index>
void gather_rows_parts(const void* const* parts, const int64_t* part_begin, int num_parts,
                       int64_t row_bytes, const Index* indices, int64_t n, void* out) {
  if (n == 0 || row_bytes == 0) return;
  const int64_t* bounds = part_begin + 1;
  auto source = [&](int64_t i) {
    const int64_t r = static_cast<int64_t>(indices[i]);
    const int64_t k = starts_at_or_before(bounds, num_parts - 1, r);
    return static_cast<const char*>(parts[k]) + (r - part_begin[k]) * row_bytes;
  };
  with_constant<32, 64, 128, 256>(row_bytes, [&](auto bytes) {
    // A row's copy with a constant size (8 to 64 floats) is a few vector
    // moves, not a call to memcpy, which at 64 bytes costs as much as the
    // row's cache miss.
    for_rows(n, row_bytes, [&](int64_t first, int64_t last) {
      copy_rows(source, bytes, first, last, static_cast<char*>(out));
    });
  });
}

template void gather_rows<int32_t>(const void*, int64_t, const int32_t*, int64_t, void*);
template void gather_rows<int64_t>(const void*, int64_t, const int64_t*, int64_t, void*);
template void gather_rows_parts<int64_t>(const void* const*, const int64_t*, int, int64_t,
                                         const int64_t*, int64_t, void*);

}  // namespace varstate::kernels::cpu
