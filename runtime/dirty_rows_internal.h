// Dirty-row tracking for incremental checkpoints (checkpoint/delta_save.cc).
// Internal.
//
// Each variable keeps one DirtyRows: a byte per row along axis 0 of its
// buffer, set by the update paths that know which rows they touch (the
// CPU scatter kernel marks each row just before it writes it, after every
// index is checked, so a bad index marks nothing; the other paths mark in
// the pass that checks the indices), and an
// "all dirty" flag set by everything else (dense updates, assign, restore,
// initializers, a buffer of a new shape, a scatter whose indices are checked
// on the device). Marking more rows than were written is always safe: a
// delta then holds a row that did not change. A save takes the marks (and
// clears them) before it reads the variable, so an update that lands after
// the take is marked for the next delta.
//
// A scatter marks its rows before it writes them, so it holds a Writing
// guard from before its marks until its write is enqueued: a take that
// overlaps one leaves the rows it returns marked, for the next delta too.
// On a GPU, a scatter whose indices are checked on the device marks the rows
// in its index-check kernel, in a byte map on the device that take() copies
// to the host and clears, in the device's stream order.
//
// Tracking starts at the first take (the base of a chain, which reports
// every row dirty): until then marks() returns null and nothing marks, so
// a program that never saves incrementally pays nothing for it. A write
// whose marks were null and that is still in flight at that first take
// makes the next take report every row too.
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

#include "varstate/device.h"
#include "varstate/variable.h"

namespace varstate::internal {

class DirtyRows {
 public:
  using Marks = std::shared_ptr<std::atomic<uint8_t>[]>;

  DirtyRows() = default;
  ~DirtyRows();
  DirtyRows(const DirtyRows&) = delete;
  DirtyRows& operator=(const DirtyRows&) = delete;

  // Held by a scatter from its marks to its write (see above).
  class Writing {
   public:
    explicit Writing(DirtyRows& rows) : rows_(rows) { rows_.writing_.fetch_add(1); }
    ~Writing() { rows_.writing_.fetch_sub(1); }
    Writing(const Writing&) = delete;
    Writing& operator=(const Writing&) = delete;

   private:
    DirtyRows& rows_;
  };

  // The marks of a buffer of `rows` rows, or null before the first take
  // (nothing to mark: that take reports every row); a different row count
  // than the last call's allocates fresh marks and marks everything dirty.
  // The returned array stays valid while held. Thread-safe.
  Marks marks(int64_t rows);
  // The device-side marks of a buffer of `rows` rows on `device` (a GPU):
  // one byte per row, zero when allocated, set by the scatter's index-check
  // kernel. Valid until the row count or device changes. Thread-safe.
  uint8_t* device_marks(Device& device, int64_t rows);
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
  // (Re)sizes the host marks for `rows` rows; a new size is all dirty.
  void resize(int64_t rows);
  // Moves the device marks into the host marks and clears them.
  void collect_device_marks();

  std::mutex mu_;
  int64_t rows_ = -1;
  Marks bits_;
  bool all_ = true;
  bool tracking_ = false;  // set by the first take
  uint64_t generation_ = 1;
  std::atomic<int> writing_{0};
  Device* device_ = nullptr;
  void* device_bits_ = nullptr;
};

// The variable's dirty rows (one per variable, for its whole life).
DirtyRows& dirty_rows(const Variable& variable);
// Marks an in-place update whose rows were marked already (bumps the
// version, leaves the dirty rows alone); mark_updated marks all rows.
void mark_rows_updated(Variable& variable);

}  // namespace varstate::internal
