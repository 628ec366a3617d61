// The part of a table split by rows (a partitioned variable's parts along
// axis 0) that holds a row, for the CPU kernels and runtime/ alike.
#pragma once

#include <cstdint>

namespace varstate::kernels::cpu {

// Up to this many part starts, a row's part is counted; above, searched.
inline constexpr int64_t kCountedPartStarts = 7;

// The number of part starts at or before row r: `starts` holds the first
// rows of parts 1 .. m (ascending; equal starts for empty parts), so the
// result is the part holding r, empty parts skipped. Counted without
// branches for a few parts; else a binary search whose steps are
// conditional moves: rows come at random, and a branching search
// mispredicts half its steps (31-37 ns a row for 16 parts, against 11-12).
// `counted` raises the count's limit for a caller whose loop hides it.
inline int64_t starts_at_or_before(const int64_t* starts, int64_t m, int64_t r,
                                   int64_t counted = kCountedPartStarts) {
  if (m <= counted) {
    int64_t k = 0;
    for (int64_t j = 0; j < m; ++j) k += static_cast<int64_t>(starts[j] <= r);
    return k;
  }
  const int64_t* base = starts;
  int64_t n = m;
  while (n > 1) {
    const int64_t half = n / 2;
    base = base[half] <= r ? base + half : base;
    n -= half;
  }
  return (base - starts) + static_cast<int64_t>(*base <= r);
}

}  // namespace varstate::kernels::cpu
