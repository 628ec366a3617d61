// Dirty-row tracking for incremental checkpoints (checkpoint/delta_save.cc).
// Internal.
//
// Each variable keeps one DirtyRows: the rows along axis 0 of its buffer
// that changed since the last take, and an "all dirty" flag set by
// everything that does not know its rows (dense updates, assign, restore,
// initializers, a buffer of a new shape). Marking more rows than were
// written is always safe: a delta then holds a row that did not change. A
// save takes the rows (and clears them) before it reads the variable.
//
// Rows are recorded one of three ways:
//  - Logged after the write (record): a variable's CPU scatter and a sparse
//    training op on the host (for the variable and each slot), whose write
//    is complete when the kernel returns, append their indices to a log
//    (uint32 row ids, int64 for 2^32 rows or more) under the mutex; a bad
//    index throws before, so it logs nothing. A take that overlaps the write
//    cannot lose the rows: the append and the take are ordered by the
//    mutex, so either the take sees the entry (and the write happened
//    before it, so the save reads the written value) or the entry lands
//    after the take, in the next delta. No Writing guard is needed, and the
//    first take needs none either: an append that finds tracking off was
//    complete before that take, which reports every row. When an append
//    would overflow the log (log_capacity: about a byte per row), the full
//    log goes to a pool thread, which folds it into the bitmap
//    (kernels::cpu::SideTask) while a spare log takes its place: the
//    appending thread pays one hand-off per log instead of the fold. Until
//    that fold is over the bitmap and the spare log are the fold's; all
//    that touches them first waits for it, or runs it if no pool thread has
//    started it (settle). Without a second pool thread (background_fold),
//    for a log shorter than kMinBackgroundFold entries, or for a call
//    larger than the whole log, the log is folded in place, under the lock,
//    and from then until the next take a CPU scatter of rows narrower than
//    kLoggedRowBytes marks before its write instead (marks_if_overflowed,
//    below); the take switches it back to logging: a fold on the scatter's
//    thread costs more per row than the kernel's mark. An append in either
//    mode is still ordered with the take by the mutex, and a kernel marking
//    across a take holds a Writing guard, so a switch loses no row.
//  - Set directly under the mutex (mark_range, mark_all).
//  - Logged in a group (link_group): a CPU scatter into a partitioned
//    variable writes all its parts in one kernel call, and logs the rows it
//    wrote (rows of the whole variable, as the caller's indices name them)
//    after its write in one DirtyRows of the whole variable, the parts'
//    group. A part's take reads and clears its own range of the group, under
//    the part's mutex and then the group's (never the other way round). The
//    group's log folds, overflows and switches to marks as a variable's
//    does; its marks cover the whole variable, and the kernel marks each
//    part's rows in its range of them. A group tracks from its creation,
//    which comes after the first write that found a part tracking.
//  - Marked before the write, in a byte per row (marks, device_marks): a
//    partitioned scatter whose group's log has overflowed marks in its CPU
//    kernel, a sparse training op on a GPU and a GPU scatter whose indices
//    are on the host mark as the indices are checked, and a GPU scatter
//    whose indices are checked on the device marks in its index-check
//    kernel, in a byte map on the device that take() copies to the host and
//    clears, in the device's stream order. These writers hold a Writing
//    guard from before their marks until their write is enqueued: a take
//    that overlaps one (it looks for one before it reads any mark) leaves
//    the rows it returns marked, for the next delta too, and reads the
//    marks again then.
// take() folds the log, the host bytes and the device bytes into a bitmap
// (a bit per row, owned by the mutex) and reads and clears it.
//
// Tracking starts at the first take (the base of a chain, which reports
// every row dirty): until then marks() returns null and record() logs
// nothing, so a program that never saves incrementally pays nothing but one
// uncontended lock per scatter (a partitioned scatter: one per part, and one
// more). A marks-before-write writer whose marks were null and that is
// still in flight at that first take makes the next take report every row
// too.
//
// A Saver that saves incrementally remembers the generation a take returned;
// when the next take sees another generation (another saver took the marks
// in between), it reports everything dirty.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "varstate/device.h"
#include "varstate/tensor.h"
#include "varstate/variable.h"

namespace varstate::internal {

class DirtyRows {
 public:
  using Marks = std::shared_ptr<std::atomic<uint8_t>[]>;

  // Row ids below `narrow_rows` are logged as uint32 when the buffer has
  // fewer rows than that (tests lower it to reach the int64 log).
  explicit DirtyRows(int64_t narrow_rows = int64_t{1} << 32) : narrow_rows_(narrow_rows) {}
  ~DirtyRows();
  DirtyRows(const DirtyRows&) = delete;
  DirtyRows& operator=(const DirtyRows&) = delete;

  // Held by a writer that marks before it writes, from its marks to its
  // write (see above).
  class Writing {
   public:
    explicit Writing(DirtyRows& rows) : rows_(rows) { rows_.writing_.fetch_add(1); }
    ~Writing() { rows_.writing_.fetch_sub(1); }
    Writing(const Writing&) = delete;
    Writing& operator=(const Writing&) = delete;

   private:
    DirtyRows& rows_;
  };

  // Whether a take has started tracking. Thread-safe.
  bool tracking();
  // The byte marks of a buffer of `rows` rows (one per row, for a writer
  // that marks before it writes, under a Writing guard), or null before the
  // first take (nothing to mark: that take reports every row); allocated on
  // the first call. A different row count than the last call's starts
  // afresh and marks everything dirty. The returned array stays valid while
  // held. Thread-safe.
  Marks marks(int64_t rows);
  // For a CPU scatter of rows of `row_bytes` bytes into a buffer of `rows`
  // rows, called under a Writing guard: the byte marks its kernel sets
  // before it writes, while the log has overflowed since the last take and
  // the rows are narrower than kLoggedRowBytes; else null, and the scatter
  // records its rows after its write. Thread-safe.
  Marks marks_if_overflowed(int64_t rows, int64_t row_bytes);
  // Rows this wide or wider are logged even while the log overflows: their
  // write costs more than the fold (docs/incremental-checkpoints.md).
  static constexpr int64_t kLoggedRowBytes = 256;
  // The device-side marks of a buffer of `rows` rows on `device` (a GPU):
  // one byte per row, zero when allocated, set by the scatter's index-check
  // kernel; null before the first take (nothing is allocated for a
  // variable that is never saved incrementally). Valid while the caller
  // holds a Writing guard, even if the row count or device changes
  // meanwhile (the buffer is then freed after the guard is gone).
  // Thread-safe.
  uint8_t* device_marks(Device& device, int64_t rows);
  // Rows `indices` (int32 or int64 values in [0, rows), on the host) of a
  // buffer of `rows` rows were written, and the write is complete: logs
  // them (nothing before the first take). Thread-safe.
  void record(int64_t rows, const Tensor& indices);
  void record(int64_t rows, std::span<const int64_t> indices);

  // The group of the DirtyRows `parts` of a partitioned variable's parts,
  // part k holding rows [begin[k], begin[k + 1]) of the whole: the one they
  // are all linked to with that layout, or null. Thread-safe.
  static std::shared_ptr<DirtyRows> shared_group(std::span<DirtyRows* const> parts,
                                                 std::span<const int64_t> begin);
  // The same, made and linked to every part when they share none with that
  // layout (a part linked to another group first takes its rows from that
  // one into its own). Called by one writer of these parts at a time (a
  // partitioned scatter holds every part's scatter lock). Thread-safe
  // against takes.
  static std::shared_ptr<DirtyRows> link_group(std::span<DirtyRows* const> parts,
                                               std::span<const int64_t> begin);
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
  // of `rows` rows, and clears them. Thread-safe.
  Taken take(int64_t rows, uint64_t generation);

  // Called by take(), with the mutex held, right after it has read the byte
  // marks (tests: a writer that marks and finishes then).
  void set_after_collect_for_testing(std::function<void()> fn) {
    after_collect_for_testing_ = std::move(fn);
  }
  // Called by take(), with the mutex held, right after it has read the
  // device marks into host memory, before it reads anything else (tests: a
  // scatter that took its marks before the take enqueues its marking kernel
  // then).
  void set_after_device_read_for_testing(std::function<void()> fn) {
    after_device_read_for_testing_ = std::move(fn);
  }

  // The log's capacity, in entries, for a buffer of `rows` rows.
  static int64_t log_capacity(int64_t rows);
  // Whether a full log of `capacity` entries is folded on a pool thread
  // (while the spare log takes its place): the pool has a second thread and
  // the log has kMinBackgroundFold entries or more, unless a test said
  // otherwise.
  static bool background_fold(int64_t capacity);
  // Shorter logs are folded in place: waking a pool thread costs about as
  // much as folding 16,000 entries (12-16 us on the 2-vCPU VM).
  static constexpr int64_t kMinBackgroundFold = 65536;
  // Forces background folds on or off for logs of every length (nullopt:
  // the default) in all DirtyRows. Tests only, while no fold runs.
  static void set_background_folds_for_testing(std::optional<bool> on);
  // How many times the log was folded into the bitmap (by takes and by
  // appends that would have overflowed it). Thread-safe.
  uint64_t folds();

 private:
  // marks(), with mu_ held.
  Marks hand_out_marks(int64_t rows);
  // For a part linked to a group, with mu_ held: sets the bits of the rows
  // logged or marked in its range of the group, and clears them there
  // (unless a writer that marks the group is in flight: it leaves them for
  // the next take too). Nothing while the range is not this buffer's rows.
  void absorb_group();
  // For a group: calls row_fn(r) for each dirty row r in [begin, end) and
  // clears it (unless a marking writer is in flight), folding the log and
  // the byte marks first.
  template <typename RowFn>
  void take_range(int64_t begin, int64_t end, const RowFn& row_fn);
  // With mu_ held: moves the device and host marks and the log into the
  // bitmap and switches back to logging; returns whether a writer that
  // marks before it writes was in flight (read before the marks).
  bool collect_marks();
  // With mu_ held: row_fn(r) for each bit set in [begin, end), ascending,
  // cleared with `clear`.
  template <typename RowFn>
  void read_marked(int64_t begin, int64_t end, bool clear, const RowFn& row_fn);
  // record() of n ids, int32 or int64.
  template <typename Index>
  void record_ids(int64_t rows, const Index* ids, int64_t n);
  // (Re)sizes for `rows` rows; a new size is all dirty.
  void resize(int64_t rows);
  template <typename Index>
  void append(const Index* indices, int64_t n);
  // Sets the bits of the logged rows and empties the log.
  void fold();
  // Returns once a background fold of the spare log is over (running it
  // here if no pool thread has started it): the bitmap and the spare log
  // are the mutex's again. bitmap() calls it, and so does everything that
  // touches the spare log.
  void settle();
  // The background fold: the spare log into the bitmap.
  static void fold_spare(void* self);
  // The bitmap, once no background fold holds it: every use but the fold's
  // goes through here.
  std::vector<uint64_t>& bitmap() {
    settle();
    return bitmap_;
  }
  void set_bit(int64_t row) {
    bitmap()[static_cast<size_t>(row >> 6)] |= uint64_t{1} << (row & 63);
  }
  // Moves the host and device byte marks into the bitmap and clears them.
  void collect_byte_marks();
  void collect_device_marks();
  // Device marks of an earlier row count or device, freed once no writer
  // that may hold them is in flight.
  void retire_device_marks();
  void free_retired();

  const int64_t narrow_rows_;
  std::mutex mu_;
  int64_t rows_ = -1;
  std::vector<uint64_t> bitmap_;
  // A log of row ids: one of these, allocated at the first append.
  struct Log {
    std::unique_ptr<uint32_t[]> narrow;
    std::unique_ptr<int64_t[]> wide;
    // Sets the bits of its first n rows.
    void set_bits_of(uint64_t* bitmap, int64_t n) const;
  };
  Log log_;
  int64_t logged_ = 0;
  // A full log being folded in the background (folding_), or empty.
  Log spare_;
  int64_t spare_logged_ = 0;
  uint64_t folds_ = 0;
  Marks bytes_;
  bool bytes_used_ = false;  // bytes_ handed out since a take read them
  bool overflowed_ = false;  // the log overflowed since the last take
  bool all_ = true;
  bool tracking_ = false;  // set by the first take
  uint64_t generation_ = 1;
  std::atomic<int> writing_{0};
  Device* device_ = nullptr;
  void* device_bits_ = nullptr;
  struct Retired {
    Device* device;
    void* bits;
  };
  std::vector<Retired> retired_;
  // The group this buffer's rows are logged in by partitioned scatters, and
  // its range there (set by link_group, under mu_).
  std::shared_ptr<DirtyRows> group_;
  int64_t group_begin_ = 0;
  int64_t group_end_ = 0;
  std::function<void()> after_collect_for_testing_;
  std::function<void()> after_device_read_for_testing_;
  // The background fold of spare_ into bitmap_, while it may run. Last, so
  // that it is dropped or waited for before what it folds goes.
  std::optional<kernels::cpu::SideTask> folding_;
};

// The variable's dirty rows (one per variable, for its whole life).
DirtyRows& dirty_rows(const Variable& variable);
// Marks an in-place update whose rows were marked already (bumps the
// version, leaves the dirty rows alone); mark_updated marks all rows.
void mark_rows_updated(Variable& variable);

}  // namespace varstate::internal
