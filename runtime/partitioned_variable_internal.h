// Runtime-internal: routing a row of a partitioned variable to the part
// that holds it, for every path that splits indices by part (the scatter
// ops of PartitionedVariable, gather). The parts may have any sizes (the
// constructor and import_meta_graph accept any), so the owner is found
// from the real offsets, never from TensorFlow's even split.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "varstate/tensor.h"

namespace varstate::internal {

struct PartRow {
  size_t part;    // the part holding the row
  int64_t local;  // the row's index within that part
};

// Up to this many parts, a row's part is counted (below); above, searched.
inline constexpr size_t kCountedParts = 8;

// The part holding `row` of the whole variable and its row there. `offsets`
// as PartitionedVariable::offsets(): the first row of each part, ascending
// from 0, then the total; `row` in [0, offsets.back()). Empty parts are
// skipped. The part is the number of later parts starting at or before
// `row`: counted without branches for a few parts, else found by a binary
// search whose steps are conditional moves (a branching search mispredicts
// half its steps on random rows: 37 ns a row for 16 parts).
inline PartRow locate_row(std::span<const int64_t> offsets, int64_t row) {
  const size_t last = offsets.size() - 1;  // the part count
  size_t part = 0;
  if (last <= kCountedParts) {
    for (size_t k = 1; k < last; ++k) part += static_cast<size_t>(offsets[k] <= row);
  } else {
    // The number of starts offsets[1..last) at or before `row`.
    const int64_t* const starts = offsets.data() + 1;
    const int64_t* base = starts;
    size_t n = last - 1;
    while (n > 1) {
      const size_t half = n / 2;
      base = base[half] <= row ? base + half : base;
      n -= half;
    }
    part = static_cast<size_t>(base - starts) + static_cast<size_t>(*base <= row);
  }
  return {part, row - offsets[part]};
}

// Indices split by the part holding their rows: for each part k, the
// positions in `idx` of its rows (ascending) and those rows re-based to the
// part (an int64 tensor on the host, of the same length). `idx` holds rows
// of the whole variable, checked. Counted first, so that each list is
// allocated once and filled without branching on the part.
struct PartRoutes {
  std::vector<std::vector<int64_t>> positions;
  std::vector<Tensor> local;
};
PartRoutes route_rows(std::span<const int64_t> offsets, std::span<const int64_t> idx);

}  // namespace varstate::internal
