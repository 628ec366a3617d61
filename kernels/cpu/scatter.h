// CPU sparse row updates (scatter_update / add / sub / mul / div / min / max)
// with their bounds check, and the bounds check alone.
//
// Below the scatter threshold (eigen_support.h) a call runs on the calling
// thread: one pass checks the indices, a second applies them. Above it, the
// rows are owned by shards (blocks of rows spread by a hash, times column
// ranges for very wide rows), one per pool thread; each shard reads all
// indices once, checking each and listing the positions of its own rows, and
// then applies those in their original order. Nothing is shared between
// shards, so there are no races and no lost duplicates, and every element
// sees its updates in the same order as a serial loop: results are bitwise
// those of the loop, run to run, whatever the thread count (for
// scatter_update, the last of several updates of a row wins).
#pragma once

#include <atomic>
#include <cstdint>

#include "kernels/common.h"

namespace varstate::kernels::cpu {

// For i in [0, num_indices), in order:
//   table[indices[i], c] = op(table[indices[i], c], u(i, c)),  c in [0, row_width)
// where u(i, c) = updates[i * row_width + c], or updates[0] for every i and c
// when updates_scalar. `table` is rows x row_width, row-major.
//
// Every index is checked against [0, rows) first: when one is outside,
// returns the position of the first such index and writes nothing; else
// applies all updates and returns -1.
//
// Preconditions (runtime/ checks them; the kernel does not): updates do not
// overlap the table; for kDiv on an integer type no update is 0. Throws
// InvalidArgumentError for kMin/kMax on complex T. Signed integer +, -, *
// wrap around; INT_MIN / -1 gives INT_MIN.
//
// Results never depend on thread scheduling, so `deterministic` changes
// nothing on the CPU; it is taken so that runtime/ calls both backends alike.
// Defined for every numeric storage type T and Index in {int32_t, int64_t}.
// Thread-safe for distinct tables; the caller serializes calls on one table.
//
// A scatter_update whose rows are written around the caches
// (scatter_streams_updates) leaves them out of the caches: the table is
// larger than the last-level cache, so they were not there.
//
// With `marks` (one byte per table row: a variable's dirty rows for
// incremental checkpoints), sets marks[indices[i]] for every index, each
// just before its row is written (in the pass that applies the updates,
// where the row's own cache miss is waited for); a bad index marks nothing.
// (A variable's scatter passes them only while its row log is overflowing:
// runtime/dirty_rows.h.)
template <typename T, typename Index>
int64_t scatter(ScatterOp op, T* table, int64_t rows, int64_t row_width, const Index* indices,
                int64_t num_indices, const T* updates, bool updates_scalar, bool deterministic,
                std::atomic<uint8_t>* marks = nullptr);

// scatter(kSub) of each update times `scale`, in one pass:
//   table[indices[i], c] -= round(updates[i * row_width + c] * scale)
// in order, one duplicate at a time, each product rounded to T before its
// subtraction: bitwise a multiply of the updates (kernels/cpu/elementwise.h)
// followed by scatter_sub, without the scaled copy. TensorFlow's sparse
// gradient descent (scatter_sub(var, ids, grad * lr)). Checks, marks,
// threading and results as scatter. Defined for T in {float, double} and
// Index in {int32_t, int64_t}: for 16-bit floats a pass that rounds twice
// per element ran slower than the two ops, or no faster (docs/performance.md).
template <typename T, typename Index>
int64_t scatter_sub_scaled(T* table, int64_t rows, int64_t row_width, const Index* indices,
                           int64_t num_indices, const T* updates, T scale,
                           std::atomic<uint8_t>* marks = nullptr);

// scatter on a table split by rows into parts (a partitioned variable):
// part k, at parts[k], holds rows [part_begin[k], part_begin[k + 1]) of the
// table (part_begin[0] == 0; part_begin[num_parts] is the table's row
// count). One call over all parts, as over one table: every index is a row
// of the whole table and each update row is read once, in place. With
// `marks` (marks[k]: one byte per row of part k), marks the rows as scatter
// does, each in its own part's array. Otherwise as scatter. Index is int64_t.
template <typename T, typename Index>
int64_t scatter_parts(ScatterOp op, T* const* parts, const int64_t* part_begin, int num_parts,
                      int64_t row_width, const Index* indices, int64_t num_indices,
                      const T* updates, bool updates_scalar,
                      std::atomic<uint8_t>* const* marks = nullptr);

// Whether a call stores its update rows around the caches (non-temporal
// stores, kernels/cpu/stream_store.h): a scatter_update (not of a scalar)
// of `n` rows of `row_bytes` bytes, whole 64-byte lines, at line-aligned
// bases (`bases_aligned`: the table's, or every part's), at least
// kStreamMinBytes in all, into a table of `rows` rows larger than the
// last-level cache (half of it for rows of 256 bytes and more). A row not
// in the caches is otherwise read before it is overwritten. Measured with
// a 32 MiB L3, the kernel alone, cached -> streamed:
//   [1M,16] (64 MiB), 65,536 / 1M uniform updates: 0.34 -> 0.27 ms,
//     12.2 -> 7.2 ms; 65,536 Zipf ids (hot rows cached): 0.29 -> 0.30 ms;
//   [1M,64] (256 MiB): 1.96 -> 1.09 ms, 39 -> 22 ms;
//   [100k,64] (25.6 MiB): 1.3-1.4 -> 0.9-1.0 ms, 9.5 -> 7.7 ms, Zipf the
//     same or faster;
//   [400k,16] (25.6 MiB), 65,536 Zipf ids: 0.27 -> 0.36 ms (not streamed);
//   [100k,16] (6.4 MiB), 1M updates: 4.2 -> 5.3 ms (not streamed).
// The call's ids must also not repeat rows often (ids_repeat): a
// skewed batch's hot rows stay cached between their writes, and streamed
// each write would go to memory (bench_scatter's Zipf(1.05) ids, 65,536
// into [1M,16] / [100k,64]: 0.45 -> 0.58 ms and 1.0 -> 1.37 ms streamed).
inline constexpr int64_t kStreamMinBytes = int64_t{1} << 20;
bool scatter_streams_updates(ScatterOp op, bool updates_scalar, int64_t rows, int64_t row_bytes,
                             int64_t n, bool bases_aligned);
// Whether ids[0, n) repeat rows often: of kRepeatSample ids taken at even
// strides across them (all of them when fewer), more than 1 in 32 name a
// row an earlier sampled id named. Uniform ids over 100,000 rows repeat 1
// in 200 of such a sample; Zipf(1.05) ids most of them.
inline constexpr int64_t kRepeatSample = 1024;
template <typename Index>
bool ids_repeat(const Index* ids, int64_t n);

// Whether a call's ids repeat rows (ids_repeat), sampled at most once a
// call however many of its decisions ask: the scatter's streaming, split
// and split trial, the sparse training ops' split by owner, numbering and
// prefetch distance.
template <typename Index>
class RepeatsRows {
 public:
  RepeatsRows(const Index* ids, int64_t n) : ids_(ids), n_(n) {}
  bool operator()() const {
    if (!known_) {
      repeats_ = ids_repeat(ids_, n_);
      known_ = true;
    }
    return repeats_;
  }
  int64_t ids() const { return n_; }

 private:
  const Index* ids_;
  int64_t n_;
  mutable bool known_ = false;
  mutable bool repeats_ = false;
};

// The work (bytes read and written) from which a scatter of `op` on
// ids[0, n) into a table of `table_bytes` splits over the pool
// (ParallelThresholds in parallel.h). A combining op (add, sub, mul, div,
// min, max) into a table of more than kSplitTableCaches times the
// last-level cache, on ids that seldom repeat a row, splits from the lower
// scatter_combining_bytes: its rows are misses from memory, and two
// threads keep twice as many in flight. Everything else splits from
// scatter_bytes. Measured on the 2-vCPU VM (docs/performance.md): 1M
// uniform updates into [1M,64] (256 MiB) 1.21-1.35x faster split; then,
// against bench_sparse_limit's limit with its prefetches, a table of more
// than one cache (was four) and 8 MiB of work (was 128): 1M updates into
// [1M,16] (64 MiB) 1.19-1.20x, into bfloat16 / float16 [1M,64] 1.11-1.24x
// / 1.76x, 65,536 into [1M,16] and [1M,64] 1.04-1.33x. Forced splits lost
// where the table is held in the cache ([100k,64], 25.6 MB: 0.68-0.81x),
// on Zipf ids into [1M,64] (0.65-0.91x) and for the streamed
// scatter_update (0.67x). On a 2-vCPU Intel Xeon VM all of those splits
// paid (1.2-1.7x): below this threshold, a call of
// ParallelThresholds::scatter_trial_bytes or more splits as its class's
// timed calls found faster (SplitTrials, scatter_internal.h's scatter_rows).
inline constexpr int64_t kSplitTableCaches = 1;
template <typename Index>
int64_t scatter_split_threshold(ScatterOp op, int64_t work_bytes, int64_t table_bytes,
                                const RepeatsRows<Index>& repeats);

// The position of the first index outside [0, rows), or -1 when all n are
// in range (for callers that do not run the CPU scatter: gather, GPU tables
// with host indices, remote variables). Parallel above the gather
// threshold's bytes of indices.
// Defined for Index in {int32_t, int64_t}.
template <typename Index>
int64_t validate_indices(const Index* indices, int64_t n, int64_t rows);

}  // namespace varstate::kernels::cpu
