// Dirty-row tracking for incremental checkpoints (checkpoint/delta_save.cc).
// Internal.
//
// Each variable keeps one DirtyRows: a byte per row along axis 0 of its
// buffer, set by the update paths that know which rows they touch (the
// scatter ops mark rows in the pass that checks their indices), and an
// "all dirty" flag set by everything else (dense updates, assign, restore,
// initializers, a buffer of a new shape, a scatter whose indices are checked
// on the device). Marking more rows than were written is always safe: a
// delta then holds a row that did not change. A save takes the marks (and
// clears them) before it reads the variable, so an update that lands after
// the take is marked for the next delta.
//
// A Saver that saves incrementally remembers the generation a take returned;
// when the next take sees another generation (another saver took the marks
// in between), it reports everything dirty.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "varstate/variable.h"

namespace varstate::internal {

class DirtyRows {
 public:
  using Marks = std::shared_ptr<std::atomic<uint8_t>[]>;

  // The marks of a buffer of `rows` rows; a different row count than the
  // last call's allocates fresh marks and marks everything dirty. The
  // returned array stays valid while held. Thread-safe.
  Marks marks(int64_t rows);
  // Everything is dirty. Thread-safe.
  void mark_all();
  // Rows [begin, end) of a buffer of `rows` rows are dirty. Thread-safe.
  void mark_range(int64_t rows, int64_t begin, int64_t end);

  struct Taken {
    bool all = true;            // every row is dirty (rows is then empty)
    std::vector<int64_t> rows;  // else the dirty rows, ascending
    uint64_t generation = 0;    // pass to the next take
  };
  // The rows dirty since the take that returned `generation`, for a buffer
  // of `rows` rows, and clears the marks. Thread-safe.
  Taken take(int64_t rows, uint64_t generation);

 private:
  std::mutex mu_;
  int64_t rows_ = -1;
  Marks bits_;
  bool all_ = true;
  uint64_t generation_ = 1;
};

// The variable's dirty rows (one per variable, for its whole life).
DirtyRows& dirty_rows(const Variable& variable);
// Marks an in-place update whose rows were marked already (bumps the
// version, leaves the dirty rows alone); mark_updated marks all rows.
void mark_rows_updated(Variable& variable);

// Marks marks[i] for each of the n indices (all in [0, rows)).
template <typename Index>
inline void mark_rows(std::atomic<uint8_t>* marks, const Index* indices, int64_t n) {
  for (int64_t i = 0; i < n; ++i) marks[indices[i]].store(1, std::memory_order_relaxed);
}

}  // namespace varstate::internal
