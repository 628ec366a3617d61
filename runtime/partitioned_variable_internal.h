// Runtime-internal: routing a row of a partitioned variable to the part
// that holds it, for every path that splits indices by part (the scatter
// ops of PartitionedVariable, gather). The parts may have any sizes (the
// constructor and import_meta_graph accept any), so the owner is found
// from the real offsets, never from TensorFlow's even split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/part_lookup.h"
#include "kernels/cpu/thread_scratch.h"
#include "varstate/tensor.h"

namespace varstate::internal {

struct PartRow {
  size_t part;    // the part holding the row
  int64_t local;  // the row's index within that part
};

// The part holding `row` of the whole variable and its row there. `offsets`
// as PartitionedVariable::offsets(): the first row of each part, ascending
// from 0, then the total; `row` in [0, offsets.back()). Empty parts are
// skipped (kernels/cpu/part_lookup.h: counted for a few parts, else a
// branch-free search).
inline PartRow locate_row(std::span<const int64_t> offsets, int64_t row) {
  const auto part = static_cast<size_t>(kernels::cpu::starts_at_or_before(
      offsets.data() + 1, static_cast<int64_t>(offsets.size()) - 2, row));
  return {part, row - offsets[part]};
}

// Indices split by the part holding their rows: for each part k, the
// positions in `idx` of its rows (ascending) and those rows re-based to the
// part (an int64 tensor on the host, of the same length). `idx` holds rows
// of the whole variable, checked. Counted first, so that each list is
// allocated once and filled without branching on the part. The positions
// live in this thread's scratch (kernels/cpu/thread_scratch.h), kept from
// one call to the next, so routes are built in place and never copied.
class PartRoutes {
 public:
  PartRoutes(std::span<const int64_t> offsets, std::span<const int64_t> idx);
  PartRoutes(const PartRoutes&) = delete;
  PartRoutes& operator=(const PartRoutes&) = delete;
  size_t num_parts() const { return local_.size(); }
  std::span<const int64_t> positions(size_t k) const {
    return {positions_.data() + begin_[k], static_cast<size_t>(begin_[k + 1] - begin_[k])};
  }
  const std::vector<Tensor>& local() const { return local_; }

 private:
  struct PositionsTag;
  kernels::cpu::ThreadScratch<int64_t, PositionsTag> positions_;
  std::vector<int64_t> begin_;  // part k's positions: [begin_[k], begin_[k + 1])
  std::vector<Tensor> local_;
};

}  // namespace varstate::internal
