// The distinct rows a batch of indices touches: what a sparse op on a
// variable held by another task moves, and how each index maps onto them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace varstate::internal {

// A batch's distinct rows (ascending), each index's position among them
// (`local`), and the first index of each (`first`).
struct DistinctRows {
  std::vector<int64_t> unique;
  std::vector<int64_t> local;
  std::vector<int64_t> first;
};

// One sort of (row, position) pairs. `positions` false: `local` and `first`
// only when `rows` holds duplicates (else empty: each index is its own row).
DistinctRows distinct_rows(std::span<const int64_t> rows, bool positions);

}  // namespace varstate::internal
