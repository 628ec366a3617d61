#include "kernels/cpu/gather.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/common.h"
#include "kernels/cpu/eigen_support.h"
#include "kernels/cpu/part_lookup.h"
#include "kernels/cpu/prefetch.h"

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
// output row i's source row, a load and a multiply-add), each row's lines
// (up to 256 bytes) prefetched prefetch_rows<Bytes>() rows before its
// copy; each row's source is computed twice, for its prefetch and for its
// copy. Against a ring of the sources computed once (copy_rows_ring), in
// one process, alternating: 1.3-2.2x faster on rows in the cache (8,192
// or 65,536 random rows of 64 bytes from 10,000 or 50,000), 1.0-1.25x
// from memory (docs/performance.md).
template <typename Source, typename Bytes>
void copy_rows(const Source& source, Bytes row_bytes, int64_t first, int64_t last, char* dst) {
  constexpr int64_t kPrefetchRows = prefetch_rows<Bytes>();
  const int64_t lines = std::min<int64_t>(row_bytes, 256);
  const int64_t primed = std::min(first + kPrefetchRows, last);
  for (int64_t i = first; i < primed; ++i) prefetch_bytes(source(i), lines);
  int64_t i = first;
  for (; i + kPrefetchRows < last; ++i) {
    prefetch_bytes(source(i + kPrefetchRows), lines);
    std::memcpy(dst + i * row_bytes, source(i), row_bytes);
  }
  for (; i < last; ++i) std::memcpy(dst + i * row_bytes, source(i), row_bytes);
}

// copy_rows for sources that cost a search (the part of a partitioned
// table): each computed once, kept in a ring until its row is copied. With
// sources computed twice, 8 and 64 parts ran 1.3-2x slower.
template <typename Source, typename Bytes>
void copy_rows_ring(const Source& source, Bytes row_bytes, int64_t first, int64_t last, char* dst) {
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
  // (Captured by value, so that the copy loop keeps them in registers.)
  auto source = [=](int64_t i) { return base + static_cast<int64_t>(indices[i]) * row_bytes; };
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
      copy_rows_ring(source, bytes, first, last, static_cast<char*>(out));
    });
  });
}

template void gather_rows<int32_t>(const void*, int64_t, const int32_t*, int64_t, void*);
template void gather_rows<int64_t>(const void*, int64_t, const int64_t*, int64_t, void*);
template void gather_rows_parts<int64_t>(const void* const*, const int64_t*, int, int64_t,
                                         const int64_t*, int64_t, void*);

}  // namespace varstate::kernels::cpu
