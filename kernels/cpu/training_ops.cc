#include "kernels/cpu/training_ops.h"

#include <algorithm>
#include <bit>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/eigen_support.h"
#include "kernels/cpu/f16c_inline.h"
#include "kernels/cpu/half_blocks.h"
#include "kernels/cpu/hash_index.h"
#include "kernels/cpu/isa_variants.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/scatter.h"
#include "kernels/cpu/thread_scratch.h"

namespace varstate::kernels::cpu {
namespace {

// Runs fn(begin, end) over [0, n) items of `bytes_per_item` each, on the
// pool when the work is large enough. Items are independent, so the split
// does not change any result.
template <typename Fn>
void for_range(int64_t n, double bytes_per_item, double cycles_per_item, Fn&& fn) {
  if (n <= 0) return;
  if (static_cast<double>(n) * bytes_per_item < kParallelBytesThreshold) {
    fn(int64_t{0}, n);
    return;
  }
  eigen_device().parallelFor(
      n, Eigen::TensorOpCost(bytes_per_item, bytes_per_item, cycles_per_item),
      [&fn](Eigen::Index begin, Eigen::Index end) { fn(int64_t{begin}, int64_t{end}); });
}

// Runs fn(begin, end) over [0, count) distinct rows of a sparse update,
// `bytes_per_row` each: on the calling thread below
// ParallelThresholds::sparse_training_bytes, else in ranges over the
// calling thread and the pool (for_ranges: the caller and one thread
// fewer of the pool). On Eigen's parallelFor (for_range), which cuts the rows
// into blocks sized by its cost model, each its own pool task, over the
// caller and every pool thread, sparse Adagrad and lazy Adam ran up to
// 3.3x slower on the 2-vCPU VM (docs/performance.md).
template <typename Fn>
void for_distinct_rows(int64_t count, double bytes_per_row, const Fn& fn) {
  if (count <= 0) return;
  const auto work = static_cast<int64_t>(static_cast<double>(count) * bytes_per_row);
  for_ranges(count, 1, work, parallel_thresholds().sparse_training_bytes, fn);
}

// The distinct rows of a sparse update's indices, numbered in the order
// the indices first name them, and each one's gradient: its gradient rows
// summed from zero in their original order, rounding to T after each
// addition (TensorFlow's _deduplicate_indexed_slices; a single row plus
// zero: -0 becomes +0). A row named once or twice has its gradient rows
// read where they lie (the first ones come in order, a second one is a
// random read); the gradient rows of a row named three times or more are
// summed beforehand, in one sequential pass over the gradient, into a row
// of `sums` (random reads of every duplicate cost more than the pass).
template <typename C>
struct SparseRows {
  int64_t count = 0;                // distinct rows
  const int64_t* row = nullptr;     // [count]: each one's row of the variable
  const int64_t* first = nullptr;   // [count]: the position first naming it
  const int64_t* second = nullptr;  // [count]: a row named twice: its other position; else -1
  const int64_t* sum = nullptr;     // [count]: its row of sums, or -1
  const C* sums = nullptr;
  int64_t width = 0;
  // The first gradient rows come one after another (every position is
  // the call's), not those of one part's rows split by owner.
  bool firsts_in_order = true;
};

// Positions ahead whose row's entry the numbering pass prefetches (the
// entries of a large table are cache misses at random), and the summing
// pass its rows. A batch of kRepeatsCheckedFrom ids or more whose ids
// repeat rows numbers them further ahead: most of its entries are hits, so
// the loop runs faster and 16 positions are too short a time for the
// misses left; with spread ids every entry misses, and more in flight only
// queue (32 ahead measured 0.95-0.99x there). Measured call by call against
// 16 always on the 2-vCPU VM (docs/performance.md): Zipf ids 1.02-1.18x in
// float32 (one case of eight 0.96x), 1.01-1.08x in bfloat16. Smaller
// batches do not sample their ids for it (a few microseconds).
constexpr int64_t kPrefetchPositions = 16;
constexpr int64_t kPrefetchPositionsRepeating = 32;
constexpr int64_t kRepeatsCheckedFrom = int64_t{1} << 15;

// The stamp of this thread's next numbering pass over its per-row scratch
// entries (`entries`, the whole buffer's `size`; one counter for every
// instantiation, as they share the scratch): never 0, the stamp of a new
// entry; when the counter wraps, the entries are cleared once.
uint32_t next_stamp(uint64_t* entries, int64_t size) {
  thread_local uint32_t last = 0;
  if (++last == 0) {
    std::fill(entries, entries + size, uint64_t{0});
    last = 1;
  }
  return last;
}

// Tags of the per-thread scratch arrays a sparse update holds at once.
struct PositionsTag;  // each position's distinct row
struct TableRowsTag;  // each table row's distinct row (Adam: its number)
struct DistinctTag;   // each distinct row's row of the table
struct FirstTag;
struct SecondTag;
struct SumTag;
struct SumsTag;
struct SumPositionsTag;  // the positions the summing pass adds, and their rows of sums
struct SumRowsTag;
struct SortKeysTag;  // a sort's keys, and the buffer a pass writes
struct SortSpareTag;
struct SortCountsTag;

// How a batch's rows are numbered by sorting: keys row << pos_bits |
// position, sorted (least significant digit first, each pass stable) on
// their row bits in `passes` passes of `digit_bits`. passes == 0: not
// sorted (the rows are looked up one by one, below).
struct RowSort {
  int pos_bits = 0;
  int passes = 0;
  int digit_bits = 0;
};

// The widest digit of a sort pass: its counts, 2^11 of them, stay in the
// first-level cache.
constexpr int kMaxDigitBits = 11;

// Ids from which a batch that does not repeat rows, and names at least
// half as many ids as the table has rows, numbers its rows by sorting
// them. Its updates then walk the table forwards, and a lookup per id is a
// miss at random. Measured against lookups on the 2-vCPU VM, calls
// alternating in one process (bench_sparse_limit --numbering both;
// docs/performance.md): sparse Adagrad and lazy Adam, uniform ids into
// [1M, 16] and [1M, 64], 1.20-1.43x at 1M ids and 1.05-1.16x at 524,288;
// but 0.95-1.09x at 262,144, 0.85-1.00x at 65,536 and 0.98-1.03x on 1M
// Zipf ids (fewer distinct rows, and the sorted update reads the gradient
// rows out of order).
constexpr int64_t kSortIds = int64_t{1} << 19;

// How the rows of a batch's ids into a table of `rows` rows are numbered:
// sorted (the keys, row << pos_bits | position, fitting 64 bits, and at
// most 3 passes: a table of up to 2^33 rows) or looked up (passes == 0).
template <typename Index>
RowSort row_sort(const RepeatsRows<Index>& repeats, int64_t rows) {
  const int64_t n = repeats.ids();
  const RowNumbering how = sparse_row_numbering();
  if (how == RowNumbering::kLookUp || rows < 2 || n < 1) return {};
  if (how == RowNumbering::kAuto && (n < kSortIds || 2 * n < rows || repeats())) return {};
  const int row_bits = std::bit_width(static_cast<uint64_t>(rows - 1));
  const int pos_bits = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(n - 1))));
  const int passes = (row_bits + kMaxDigitBits - 1) / kMaxDigitBits;
  if (row_bits + pos_bits > 64 || passes > 3) return {};
  return {pos_bits, passes, (row_bits + passes - 1) / passes};
}

// Which positions a DistinctRows numbers: every one (parts == 1), or, when
// the rows are split over the pool, those whose row part `part` of `parts`
// owns (owner_of, blocks of 2^kPartShift rows); and how: sorted (`sort`),
// or looked up in the table-row entries the calling thread stamped for the
// call (RowEntries), shared by every part (each part writes only its own
// rows' entries; a block's 64 entries span 8 cache lines, so two parts
// seldom write one line), or else in a hash index of the part's own.
struct RowPart {
  int64_t part = 0;
  int64_t parts = 1;
  uint64_t* of_row = nullptr;  // null: the part numbers its rows in a hash index
  uint64_t stamp = 0;
  RowSort sort;                               // passes > 0: the part sorts its rows instead
  int64_t number_ahead = kPrefetchPositions;  // looked up: positions prefetched ahead

  // Whether row r is this part's (always, for a single part).
  bool owns(int64_t r) const;
};
constexpr int kPartShift = 6;
inline bool RowPart::owns(int64_t r) const {
  return parts == 1 || owner_of(r, kPartShift, parts) == part;
}

// The calling thread's per-row entries for one sparse update of n indices
// into a table of `rows` rows, stamped for the call: an entry is this
// call's when its high word is the call's stamp, so nothing needs clearing
// first (a new entry is zero, which no call uses; when the stamps wrap, the
// entries are cleared once). None for a table much larger than the batch:
// its rows are numbered in a hash index of the batch's rows instead.
class RowEntries {
 public:
  // `sort`: how the parts sort their rows (none are kept then); else
  // `number_ahead`: the positions ahead whose entries they prefetch.
  // `always`: kept for any table (compat.v1 Adam reads every row's entry).
  RowEntries(int64_t rows, int64_t n, const RowSort& sort,
             int64_t number_ahead = kPrefetchPositions, bool always = false)
      : sort_(sort), number_ahead_(number_ahead) {
    if (sort.passes > 0) return;
    if (!always && rows > std::max<int64_t>(int64_t{1} << 22, 8 * n)) return;
    scratch_.emplace(static_cast<size_t>(rows));
    of_row_ = scratch_->data();
    stamp_ = uint64_t{next_stamp(of_row_, static_cast<int64_t>(scratch_->size()))} << 32;
  }
  RowPart part(int64_t part, int64_t parts) const {
    return {part, parts, of_row_, stamp_, sort_, number_ahead_};
  }
  // An entry: the call's stamp in the high word, the row's number in the
  // low one.
  static constexpr uint64_t kStampBits = ~uint64_t{0xffffffff};
  static int64_t number_in(uint64_t e) { return static_cast<int64_t>(e & ~kStampBits); }
  // Table row r's distinct row, once a part numbered the call's rows in
  // entries `of_row` stamped `stamp`, or -1.
  static int64_t distinct_in(const uint64_t* of_row, uint64_t stamp, int64_t r) {
    const uint64_t e = of_row[r];
    return (e & kStampBits) == stamp ? number_in(e) : -1;
  }
  const uint64_t* of_row() const { return of_row_; }
  uint64_t stamp() const { return stamp_; }

 private:
  std::optional<ThreadScratch<uint64_t, TableRowsTag>> scratch_;
  uint64_t* of_row_ = nullptr;
  uint64_t stamp_ = 0;
  RowSort sort_;
  int64_t number_ahead_;
};

struct MineTag;  // a part's positions

// Ids from which a batch that does not repeat rows splits its rows by owner.
constexpr int64_t kRowPartsIds = int64_t{1} << 20;
// Variable rows of up to this many bytes split by owner at any batch size
// that pays: their numbering (a cost per id) outweighs their update (a
// cost per byte).
constexpr int64_t kRowPartsNarrowBytes = 64;

// Whether a sparse update of the batch's ids (`repeats`: their count, and
// whether they repeat rows), `bytes_per_row` each (its variable rows
// `row_bytes`), splits its rows by owner over the pool (RowPart), each
// part numbering and summing its own rows, instead of numbering and
// summing them all on the calling thread before a split update. Measured on
// the 2-vCPU VM (docs/performance.md): 1.07-1.37x faster when ids repeat
// rows (Zipf) and 1.13-1.33x at 1M spread ids. At 65,536 spread ids, rows
// of 16 floats 1.04-1.37x, but rows of 64 floats 0.84-1.15x: their
// numbering is short next to their row updates.
template <typename Index>
bool split_rows_by_owner(const RepeatsRows<Index>& repeats, double bytes_per_row,
                         int64_t row_bytes) {
  const int64_t n = repeats.ids();
  const auto work = static_cast<int64_t>(static_cast<double>(n) * bytes_per_row);
  return worth_splitting(work, parallel_thresholds().sparse_row_parts_bytes) &&
         (n >= kRowPartsIds || row_bytes <= kRowPartsNarrowBytes || repeats());
}

// Fills the scratches behind a SparseRows, in one of two ways:
// - Sorted (RowPart::sort): the positions' keys (row, position) radix
//   sorted by row, each pass stable, so that a row's positions come
//   together and in order; one scan then numbers the rows in the order of
//   the table (their updates then walk the table forwards) and lists the
//   positions of the rows named three times or more. For large batches:
//   its cost per id is a few sequential passes, where a lookup is a cache
//   miss at random.
// - Looked up: one pass numbers the rows as they first appear (in the
//   part's RowEntries, or a hash index), counts their positions and keeps
//   each one's last; a second lists the positions of the rows named three
//   times or more.
// Either way, the gradient rows of those rows are then summed in one pass
// over the listed positions, in order, into rows of sums (summing_pass).
// A part of several takes only its own positions (in order), so that each
// row is still summed over all its positions in their order.
template <typename T, typename C, typename Index>
class DistinctRows {
 public:
  DistinctRows(const Index* indices, int64_t n, const T* grad, int64_t w, const RowPart& part)
      : row_(static_cast<size_t>(n)),
        first_(static_cast<size_t>(n)),
        second_(static_cast<size_t>(n)),
        sum_(static_cast<size_t>(n)),
        sum_positions_(static_cast<size_t>(n)),
        sum_rows_(static_cast<size_t>(n)) {
    if (part.sort.passes > 0) {
      sort_and_sum(indices, n, grad, w, part);
      return;
    }
    if (part.parts == 1) {
      number_and_sum(
          indices, grad, w, n, [](int64_t k) { return k; }, part);
      return;
    }
    mine_.emplace(static_cast<size_t>(n));
    int64_t* const mine = mine_->data();
    int64_t m = 0;
    for (int64_t j = 0; j < n; ++j) {  // branch-free: a position is always written
      mine[m] = j;
      m += part.owns(static_cast<int64_t>(indices[j]));
    }
    number_and_sum(
        indices, grad, w, m, [mine](int64_t k) { return mine[k]; }, part);
  }

  const SparseRows<C>& rows() const { return rows_; }

 private:
  // Sorts the part's positions of the n by row, numbers their rows in the
  // table's order and sums the rows named three times or more.
  void sort_and_sum(const Index* indices, int64_t n, const T* grad, int64_t w,
                    const RowPart& part) {
    const RowSort& sort = part.sort;
    const int pos_bits = sort.pos_bits;
    const int64_t buckets = int64_t{1} << sort.digit_bits;
    const uint64_t digit_mask = static_cast<uint64_t>(buckets - 1);
    ThreadScratch<uint64_t, SortKeysTag> keys_scratch(static_cast<size_t>(n));
    ThreadScratch<uint64_t, SortSpareTag> spare_scratch(static_cast<size_t>(n));
    ThreadScratch<int64_t, SortCountsTag> counts_scratch(
        static_cast<size_t>(sort.passes * buckets));
    uint64_t* keys = keys_scratch.data();
    uint64_t* spare = spare_scratch.data();
    int64_t* const counts = counts_scratch.data();  // [passes][buckets]
    std::fill(counts, counts + sort.passes * buckets, int64_t{0});
    // The part's keys, and every pass's digit counts, in one pass over the
    // indices (branch-free: a key is always written, and kept or not).
    int64_t m = 0;
    auto take = [&](auto mine) {
      for (int64_t j = 0; j < n; ++j) {
        const auto r = static_cast<uint64_t>(indices[j]);
        const int64_t keep = mine(r);
        keys[m] = r << pos_bits | static_cast<uint64_t>(j);
        m += keep;
        for (int p = 0; p < sort.passes; ++p)
          counts[p * buckets + static_cast<int64_t>((r >> (p * sort.digit_bits)) & digit_mask)] +=
              keep;
      }
    };
    if (part.parts == 1) {
      take([](uint64_t) { return int64_t{1}; });
    } else {
      take([&part](uint64_t r) { return int64_t{part.owns(static_cast<int64_t>(r))}; });
    }
    for (int p = 0; p < sort.passes; ++p) {
      int64_t* const at = counts + p * buckets;
      const int shift = pos_bits + p * sort.digit_bits;
      // A pass whose digit every key shares moves nothing.
      if (m == 0 || at[static_cast<int64_t>((keys[0] >> shift) & digit_mask)] == m) continue;
      int64_t next = 0;
      for (int64_t d = 0; d < buckets; ++d) next += std::exchange(at[d], next);
      for (int64_t i = 0; i < m; ++i) {
        const uint64_t key = keys[i];
        spare[at[static_cast<int64_t>((key >> shift) & digit_mask)]++] = key;
      }
      std::swap(keys, spare);
    }
    // The runs of equal rows, in the table's order.
    int64_t* const row = row_.data();
    int64_t* const first = first_.data();
    int64_t* const second = second_.data();
    int64_t* const sum = sum_.data();
    int64_t* const sum_position = sum_positions_.data();
    int64_t* const sum_row = sum_rows_.data();
    const uint64_t pos_mask = (uint64_t{1} << pos_bits) - 1;
    int64_t count = 0;
    int64_t repeated = 0;
    int64_t listed = 0;
    for (int64_t i = 0; i < m;) {
      const uint64_t r = keys[i] >> pos_bits;
      int64_t end = i + 1;
      while (end < m && keys[end] >> pos_bits == r) ++end;
      row[count] = static_cast<int64_t>(r);
      first[count] = static_cast<int64_t>(keys[i] & pos_mask);
      second[count] = end - i == 2 ? static_cast<int64_t>(keys[i + 1] & pos_mask) : -1;
      sum[count] = -1;
      if (end - i > 2) {
        sum[count] = repeated;
        for (int64_t k = i; k < end; ++k, ++listed) {
          sum_position[listed] = static_cast<int64_t>(keys[k] & pos_mask);
          sum_row[listed] = repeated;
        }
        ++repeated;
      }
      ++count;
      i = end;
    }
    summing_pass(grad, w, repeated, listed, /*grad_in_order=*/false);
    rows_ = {count, row, first, second, sum, sums_->data(), w, /*firsts_in_order=*/false};
  }

  // Numbers and sums the m positions pos(0), pos(1), ... (increasing).
  template <typename Pos>
  void number_and_sum(const Index* indices, const T* grad, int64_t w, int64_t m, const Pos& pos,
                      const RowPart& part) {
    const int64_t n = m;
    ThreadScratch<int32_t, PositionsTag> positions(static_cast<size_t>(n));
    int32_t* const of_position = positions.data();  // by k, the position's number
    int64_t* const row = row_.data();
    int64_t* const first = first_.data();
    int64_t* const second = second_.data();  // first the last position naming the row
    int64_t* const named = sum_.data();      // first the count of each row's positions
    int64_t count = 0;
    // distinct_of(r, next): row r's number, `next` if it has none;
    // prefetch(r): the entry it will look at.
    const int64_t ahead = part.number_ahead;
    auto number = [&](auto&& distinct_of, auto&& prefetch) {
      for (int64_t k = 0; k < n; ++k) {
        if (k + ahead < n) prefetch(static_cast<int64_t>(indices[pos(k + ahead)]));
        const int64_t j = pos(k);
        const int64_t r = static_cast<int64_t>(indices[j]);
        const int64_t d = distinct_of(r, count);
        if (d == count) {
          row[count] = r;
          first[count] = j;
          named[count++] = 0;
        }
        of_position[k] = static_cast<int32_t>(d);
        second[d] = j;
        ++named[d];
      }
    };
    if (uint64_t* const of_row = part.of_row; of_row != nullptr) {
      const uint64_t stamp = part.stamp;
      number(
          [&](int64_t r, int64_t next) {
            uint64_t& e = of_row[r];
            if ((e & RowEntries::kStampBits) != stamp) e = stamp | static_cast<uint64_t>(next);
            return RowEntries::number_in(e);
          },
          [&](int64_t r) { prefetch_line<PrefetchFor::kWrite>(of_row + r); });
    } else {
      HashIndex index(n);
      number([&](int64_t r, int64_t next) { return index.insert(r, next); },
             [&](int64_t r) { index.prefetch(r); });
    }
    int64_t repeated = 0;
    for (int64_t d = 0; d < count; ++d) {
      if (named[d] != 2) second[d] = -1;
      named[d] = named[d] > 2 ? repeated++ : -1;
    }
    // The positions to sum, listed without a branch: under Zipf, summed
    // and unsummed positions interleave at random, and a branch per
    // position in the summing loop would mispredict.
    int64_t* const sum_position = sum_positions_.data();
    int64_t* const sum_row = sum_rows_.data();
    int64_t listed = 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t s = named[of_position[k]];
      sum_position[listed] = pos(k);
      sum_row[listed] = s;
      listed += s >= 0;
    }
    summing_pass(grad, w, repeated, listed, /*grad_in_order=*/part.parts == 1);
    rows_ = {count, row, first, second, named, sums_->data(), w, part.parts == 1};
  }

  // Sums `repeated` rows of sums, each from zero, over the `listed`
  // positions of sum_positions_ (into the rows of sum_rows_), in order.
  // grad_in_order: the positions come in the gradient's order, one row
  // after another but for gaps (the hardware streams them; else they are
  // prefetched). One thread sums a part's rows: split further (by columns,
  // or by rows) the pass measured no faster. Built per instruction set
  // (isa_variants.h) for the 16-bit types, whose rounding costs
  // arithmetic; float32's pass is bound by memory (built per instruction
  // set too, it measured 1.00-1.06x).
  void summing_pass(const T* grad, int64_t w, int64_t repeated, int64_t listed,
                    bool grad_in_order) {
    sums_.emplace(static_cast<size_t>(repeated * w));
    C* const sums = sums_->data();
    std::fill(sums, sums + repeated * w, C(0));
    if (listed == 0) return;
    if constexpr (kIsHalfLike<T>) {
      for_cpu_isa([&] { sum_listed(grad, w, listed, grad_in_order); });
    } else {
      sum_listed(grad, w, listed, grad_in_order);
    }
  }

  void sum_listed(const T* grad, int64_t w, int64_t listed, bool grad_in_order) {
    const int64_t* const sum_position = sum_positions_.data();
    const int64_t* const sum_row = sum_rows_.data();
    C* const sums = sums_->data();
    const int64_t ahead_bytes = std::min<int64_t>(w * static_cast<int64_t>(sizeof(C)), 256);
    for (int64_t i = 0; i < listed; ++i) {
      if (i + kPrefetchPositions < listed) {
        prefetch_bytes<PrefetchFor::kWrite>(sums + sum_row[i + kPrefetchPositions] * w,
                                            ahead_bytes);
        if (!grad_in_order)
          prefetch_bytes(grad + sum_position[i + kPrefetchPositions] * w, ahead_bytes);
      }
      C* __restrict dst = sums + sum_row[i] * w;
      const T* __restrict src = grad + sum_position[i] * w;
      for (int64_t c = 0; c < w; ++c) dst[c] = round_through<T>(dst[c] + load_as<C>(src[c]));
    }
  }

  ThreadScratch<int64_t, DistinctTag> row_;
  ThreadScratch<int64_t, FirstTag> first_;
  ThreadScratch<int64_t, SecondTag> second_;
  ThreadScratch<int64_t, SumTag> sum_;
  ThreadScratch<int64_t, SumPositionsTag> sum_positions_;
  ThreadScratch<int64_t, SumRowsTag> sum_rows_;
  std::optional<ThreadScratch<int64_t, MineTag>> mine_;
  std::optional<ThreadScratch<C, SumsTag>> sums_;
  SparseRows<C> rows_;
};

// What the element loops below compute on each element: a formula F on
// the element's values in the compute type, the variable's and those of
// F::kSlots slots, with the element's gradient when F::kGradient.
//  - Update<Op, Sparse>: the training op's update (apply_element).
//  - AdamDecay: compat.v1 Adam's decay of a row the batch does not name
//    (adam_decay_value), which has no gradient.
// F::apply<S> runs the formula on values widened from storage type S (whose
// rounding the formula's intermediate steps follow), F::element on element
// i of arrays of T, widened, computed and rounded back one at a time.
template <TrainingOp Op, bool Sparse>
struct Update {
  static constexpr int kSlots = training_slot_count(Op);
  static constexpr bool kGradient = true;
  template <typename S, typename C>
  static void apply(const TrainingParams<C>& p, C g, C& var, C& s0, C& s1, C& s2) {
    apply_element<Op, Sparse, S>(p, g, var, s0, s1, s2);
  }
  template <typename T, typename C, typename G>
  static void element(const TrainingParams<C>& p, const TrainingSlots<T>& slots, const G* grad,
                      int64_t i) {
    update_element<Op, Sparse>(p, slots, i, load_as<C>(grad[i]));
  }
};
struct AdamDecay {
  static constexpr int kSlots = 2;  // m and v
  static constexpr bool kGradient = false;
  template <typename S, typename C>
  static void apply(const TrainingParams<C>& p, C /*g*/, C& var, C& m, C& v, C& /*s2*/) {
    adam_decay_value(p, var, m, v);
  }
  template <typename T, typename C, typename G>
  static void element(const TrainingParams<C>& p, const TrainingSlots<T>& slots, const G* /*grad*/,
                      int64_t i) {
    adam_decay_element(p, slots, i);
  }
};

// The element loops: F's arithmetic on pointers that alias nothing (the
// slots do not overlap: training_ops.h), so that the compiler vectorizes
// them without run-time overlap checks. Each is built once per instruction
// set below and per value of the flags the formulas branch on (`A`:
// Momentum's and Adam's use_nesterov, Ftrl's square-root power, the
// proximal ops' l1 > 0; `B`: Ftrl's shrinkage, proximal gradient descent's
// divisor of exactly 1), each a constant in its loop. The file is built
// with -ffp-contract=off, so no multiply-add is ever fused, and lane width
// changes no result: IEEE addition, multiplication, division and square
// root round each element alike. The gradient of a formula without one is
// never read (it may be null).
template <typename F, typename T, typename C, typename G>
inline void element_loop(const TrainingParams<C>& p, T* __restrict var, T* __restrict s0,
                         T* __restrict s1, T* __restrict s2, const G* __restrict grad,
                         int64_t begin, int64_t end) {
  const TrainingSlots<T> slots{var, s0, s1, s2};
  for (int64_t i = begin; i < end; ++i) F::template element<T>(p, slots, grad, i);
}

// p with the flags A and B set as constants.
template <TrainingOp Op, bool A, bool B, typename C>
TrainingParams<C> with_flags(const TrainingParams<C>& p) {
  TrainingParams<C> q = p;
  if constexpr (Op == TrainingOp::kFtrl) {
    q.sqrt_power = A;
    q.shrinkage = B;
  } else if constexpr (kProximal<Op>) {
    q.l1_positive = A;
    if constexpr (Op == TrainingOp::kProximalGradientDescent) q.unit_divisor = B;
  } else {
    q.use_nesterov = A;
  }
  return q;
}

// The slots of row `row` (w elements a row); the ones Op does not use stay
// null.
template <TrainingOp Op, typename T>
TrainingSlots<T> row_slots(const TrainingSlots<T>& s, int64_t row, int64_t w) {
  constexpr int kSlots = training_slot_count(Op);
  const int64_t at = row * w;
  return {s.var + at, kSlots > 0 ? s.s0 + at : nullptr, kSlots > 1 ? s.s1 + at : nullptr,
          kSlots > 2 ? s.s2 + at : nullptr};
}

// bfloat16 elements two at a time, as the 32-bit word that holds a pair:
// the low element widens by a shift, the high one by a mask, and the two
// rounded results merge back into one word, so the vectorized loop is
// lane-wise throughout. Widening 16-bit lanes into 32-bit ones and
// narrowing them back (vpmovzxwd, vpermt2w) took as much of the bfloat16
// loops' time as their arithmetic. Each element gets the same widening,
// formula and rounding (rng::bfloat16_bits: to nearest even, a NaN
// quieted) as in element_loop, so the results are bitwise the same.
// The words are read through a type that may alias the elements.
using Bf16Word = uint32_t __attribute__((may_alias));
static_assert(std::endian::native == std::endian::little,
              "the pair loop takes an array's even elements from the words' low halves");
inline float bf16_low(uint32_t w) { return std::bit_cast<float>(w << 16); }
inline float bf16_high(uint32_t w) { return std::bit_cast<float>(w & 0xffff0000u); }
// x rounded to bfloat16 in the high half of the word: rng::bfloat16_bits
// kept in 32 bits. Built on that function's 16-bit result instead, the
// loop selected and merged in 16-bit lanes again (vpermt2w), and the Adam
// loop's compute floor rose from 31 to 36-41 ms.
inline uint32_t bf16_rounded(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  return nan ? (u | 0x00400000u) : u + 0x7fffu + ((u >> 16) & 1u);
}
inline uint32_t bf16_pair(float low, float high) {
  return (bf16_rounded(low) >> 16) | (bf16_rounded(high) & 0xffff0000u);
}

// Words [begin, end) of the variable and slots; the gradient as words of
// bfloat16 pairs (G = Bf16Word: the dense ops) or as floats, two a word
// (G = float: a sparse row's sums).
template <typename F, typename G>
inline void bf16_pair_loop(const TrainingParams<float>& p, Bf16Word* __restrict var,
                           Bf16Word* __restrict s0, Bf16Word* __restrict s1,
                           Bf16Word* __restrict s2, const G* __restrict grad, int64_t begin,
                           int64_t end) {
  constexpr int kSlots = F::kSlots;
  for (int64_t i = begin; i < end; ++i) {
    float g_lo = 0, g_hi = 0;
    if constexpr (!F::kGradient) {
    } else if constexpr (std::is_same_v<G, float>) {
      g_lo = grad[2 * i];
      g_hi = grad[2 * i + 1];
    } else {
      g_lo = bf16_low(grad[i]);
      g_hi = bf16_high(grad[i]);
    }
    const uint32_t wv = var[i];
    const uint32_t w0 = kSlots > 0 ? s0[i] : 0, w1 = kSlots > 1 ? s1[i] : 0,
                   w2 = kSlots > 2 ? s2[i] : 0;
    float v_lo = bf16_low(wv), a_lo = bf16_low(w0), b_lo = bf16_low(w1), c_lo = bf16_low(w2);
    float v_hi = bf16_high(wv), a_hi = bf16_high(w0), b_hi = bf16_high(w1), c_hi = bf16_high(w2);
    F::template apply<bfloat16>(p, g_lo, v_lo, a_lo, b_lo, c_lo);
    F::template apply<bfloat16>(p, g_hi, v_hi, a_hi, b_hi, c_hi);
    var[i] = bf16_pair(v_lo, v_hi);
    if constexpr (kSlots > 0) s0[i] = bf16_pair(a_lo, a_hi);
    if constexpr (kSlots > 1) s1[i] = bf16_pair(b_lo, b_hi);
    if constexpr (kSlots > 2) s2[i] = bf16_pair(c_lo, c_hi);
  }
}

// float16 elements in blocks converted by F16C (kernels/cpu/half_blocks.h,
// 8 values an instruction): a block of the variable, the slots and a
// float16 gradient widened to floats, the formula run over the floats in
// a plain float loop (vectorized as float32's is), the results rounded
// back with every NaN made the portable one. The widening is exact and the
// rounding to nearest even, as host16.h's conversions, whose dozen integer
// operations a value each way made the element loop's float16 ops
// compute-bound; so the bits are element_loop's. Dense float16 ops ran
// 1.1-1.8x faster so on the 2-vCPU Intel VM, calls alternating in one
// process (docs/performance.md). Sparse rows take the same loop with the
// conversions inline (SparseUpdate); other ranges shorter than a block
// keep the element loop.
constexpr int64_t kHalfBlock = 256;

template <typename F>
inline void half_block_formula(const TrainingParams<float>& p, float* __restrict var,
                               float* __restrict s0, float* __restrict s1, float* __restrict s2,
                               const float* __restrict grad, int64_t n) {
  constexpr int kSlots = F::kSlots;
  for (int64_t i = 0; i < n; ++i) {
    float none0 = 0, none1 = 0, none2 = 0;  // the slots F has not: never read
    F::template apply<half>(p, F::kGradient ? grad[i] : 0.0f, var[i], kSlots > 0 ? s0[i] : none0,
                            kSlots > 1 ? s1[i] : none1, kSlots > 2 ? s2[i] : none2);
  }
}

// The conversions of half_block_loop: calls to half_blocks.h (F16C where
// the CPU has it), or, in a loop built for F16C (for_f16c_isa), F16C
// inline (f16c_inline.h), whose calls per block a sparse row of 16
// elements would not amortize.
struct HalfBlockCalls {
  static void widen(const half* in, float* out, int64_t n) { widen_halves(in, out, n); }
  static void round(const float* in, half* out, int64_t n) {
    round_to_halves_portable_nans(in, out, n);
  }
};
#ifdef VARSTATE_F16C_INLINE
struct HalfBlockF16cInline {
  static void widen(const half* in, float* out, int64_t n) { f16c_widen(in, out, n); }
  static void round(const float* in, half* out, int64_t n) { f16c_round<true>(in, out, n); }
};
#endif

template <typename F, typename Convert = HalfBlockCalls, typename G>
inline void half_block_loop(const TrainingParams<float>& p, const TrainingSlots<half>& slots,
                            const G* grad, int64_t begin, int64_t end) {
  constexpr int kSlots = F::kSlots;
  alignas(64) float var[kHalfBlock], s0[kHalfBlock], s1[kHalfBlock], s2[kHalfBlock], g[kHalfBlock];
  for (int64_t at = begin; at < end; at += kHalfBlock) {
    const int64_t n = std::min(kHalfBlock, end - at);
    const float* gradient = g;
    if constexpr (!F::kGradient) {
    } else if constexpr (std::is_same_v<G, float>) {
      gradient = grad + at;
    } else {
      Convert::widen(grad + at, g, n);
    }
    Convert::widen(slots.var + at, var, n);
    if constexpr (kSlots > 0) Convert::widen(slots.s0 + at, s0, n);
    if constexpr (kSlots > 1) Convert::widen(slots.s1 + at, s1, n);
    if constexpr (kSlots > 2) Convert::widen(slots.s2 + at, s2, n);
    half_block_formula<F>(p, var, s0, s1, s2, gradient, n);
    Convert::round(var, slots.var + at, n);
    if constexpr (kSlots > 0) Convert::round(s0, slots.s0 + at, n);
    if constexpr (kSlots > 1) Convert::round(s1, slots.s1 + at, n);
    if constexpr (kSlots > 2) Convert::round(s2, slots.s2 + at, n);
  }
}

// F (above) on elements [begin, end) of the variable and the slots (base
// pointers): element_loop, float16 runs of a block or more through float
// blocks (half_block_loop), and for bfloat16 arrays that are 4-byte aligned
// the pair loop over the words between an odd first and last element.
template <typename F, typename T, typename C, typename G>
inline void elements(const TrainingParams<C>& p, const TrainingSlots<T>& slots,
                     const G* __restrict grad, int64_t begin, int64_t end) {
  if constexpr (std::is_same_v<T, half> && std::is_same_v<C, float>) {
    if (end - begin >= kHalfBlock && halves_convert_in_hardware()) {
      half_block_loop<F>(p, slots, grad, begin, end);
      return;
    }
  }
  if constexpr (std::is_same_v<T, bfloat16> && std::is_same_v<C, float>) {
    constexpr int kSlots = F::kSlots;
    const auto words = [](const void* at) { return reinterpret_cast<uintptr_t>(at) % 4 == 0; };
    if (words(slots.var) && (!F::kGradient || words(grad)) && (kSlots < 1 || words(slots.s0)) &&
        (kSlots < 2 || words(slots.s1)) && (kSlots < 3 || words(slots.s2))) {
      const int64_t first = std::min(end, begin + (begin & 1));
      const int64_t last = std::max(first, end - (end & 1));
      element_loop<F, T, C>(p, slots.var, slots.s0, slots.s1, slots.s2, grad, begin, first);
      const auto w = [](T* at) { return reinterpret_cast<Bf16Word*>(at); };
      if constexpr (std::is_same_v<G, float>) {
        bf16_pair_loop<F>(p, w(slots.var), w(slots.s0), w(slots.s1), w(slots.s2), grad, first / 2,
                          last / 2);
      } else {
        bf16_pair_loop<F>(p, w(slots.var), w(slots.s0), w(slots.s1), w(slots.s2),
                          reinterpret_cast<const Bf16Word*>(grad), first / 2, last / 2);
      }
      element_loop<F, T, C>(p, slots.var, slots.s0, slots.s1, slots.s2, grad, last, end);
      return;
    }
  }
  element_loop<F, T, C>(p, slots.var, slots.s0, slots.s1, slots.s2, grad, begin, end);
}

// The dense update of elements [begin, end).
template <TrainingOp Op, bool A, bool B, typename T, typename C>
struct DenseElements {
  static void run(const TrainingParams<C>& p, const TrainingSlots<T>& slots, const T* grad,
                  int64_t begin, int64_t end) {
    elements<Update<Op, false>, T, C>(with_flags<Op, A, B>(p), slots, grad, begin, end);
  }
};

// Distinct row s's gradient: its row of sums, or its only gradient row
// plus zero, in buf.
template <typename T, typename C>
inline const C* gradient_of(const SparseRows<C>& r, const T* grad, int64_t s, C* __restrict buf) {
  if (r.sum[s] >= 0) return r.sums + r.sum[s] * r.width;
  const T* __restrict src = grad + r.first[s] * r.width;
  if constexpr (kIsHalfLike<T> && std::is_same_v<C, float>) {
    // 0 + a 16-bit value is a value of T (-0 becomes +0; a NaN is quieted
    // by the addition), so the rounding back to T that the other types
    // need changes nothing here: skipped.
    for (int64_t c = 0; c < r.width; ++c) buf[c] = C(0) + load_as<C>(src[c]);
  } else {
    for (int64_t c = 0; c < r.width; ++c) buf[c] = round_through<T>(C(0) + load_as<C>(src[c]));
  }
  if (r.second[s] >= 0) {
    const T* __restrict next = grad + r.second[s] * r.width;
    for (int64_t c = 0; c < r.width; ++c) buf[c] = round_through<T>(buf[c] + load_as<C>(next[c]));
  }
  return buf;
}

#ifdef VARSTATE_F16C_INLINE
// gradient_of for float16 in a loop built for F16C: the gradient rows
// widened by F16C inline, the same values.
inline const float* f16c_gradient_of(const SparseRows<float>& r, const half* grad, int64_t s,
                                     float* __restrict buf) {
  if (r.sum[s] >= 0) return r.sums + r.sum[s] * r.width;
  f16c_widen(grad + r.first[s] * r.width, buf, r.width);
  for (int64_t c = 0; c < r.width; ++c) buf[c] = 0.0f + buf[c];  // -0 becomes +0
  if (r.second[s] >= 0) {
    const half* __restrict next = grad + r.second[s] * r.width;
    for (int64_t at = 0; at < r.width; at += kHalfBlock) {
      const int64_t n = std::min(kHalfBlock, r.width - at);
      alignas(64) float widened[kHalfBlock];
      f16c_widen(next + at, widened, n);
      for (int64_t c = 0; c < n; ++c) buf[at + c] = round_through<half>(buf[at + c] + widened[c]);
    }
  }
  return buf;
}
#endif

// Distinct rows ahead of the one being updated whose rows (of the variable
// and the slots, and a second gradient row) are prefetched: they lie at
// random, and the update of one row is too short to hide a miss.
constexpr int64_t kPrefetchRows = 16;

// Prefetches the first `bytes` of distinct row s's gradient rows that are
// not summed ahead: its second one, and with `firsts` its first.
template <typename T, typename C>
inline void prefetch_gradient_rows(const T* grad, const SparseRows<C>& r, int64_t s, int64_t bytes,
                                   bool firsts) {
  if (r.sum[s] >= 0) return;
  if (firsts) prefetch_bytes(grad + r.first[s] * r.width, bytes);
  if (r.second[s] >= 0) prefetch_bytes(grad + r.second[s] * r.width, bytes);
}

// Prefetches distinct row s's rows (the first 256 bytes of each; row-wise
// Adagrad's accumulator is one element a row) and its gradient rows.
template <TrainingOp Op, typename T, typename C>
inline void prefetch_rows(const TrainingSlots<T>& slots, const T* grad, const SparseRows<C>& r,
                          int64_t s) {
  constexpr auto kWrite = PrefetchFor::kWrite;
  const int64_t bytes = std::min<int64_t>(r.width * static_cast<int64_t>(sizeof(T)), 256);
  if constexpr (Op == TrainingOp::kRowwiseAdagrad) {
    prefetch_bytes<kWrite>(slots.var + r.row[s] * r.width, bytes);
    prefetch_line<kWrite>(slots.s0 + r.row[s]);
  } else {
    const TrainingSlots<T> at = row_slots<Op>(slots, r.row[s], r.width);
    constexpr int kSlots = training_slot_count(Op);
    prefetch_bytes<kWrite>(at.var, bytes);
    if constexpr (kSlots > 0) prefetch_bytes<kWrite>(at.s0, bytes);
    if constexpr (kSlots > 1) prefetch_bytes<kWrite>(at.s1, bytes);
    if constexpr (kSlots > 2) prefetch_bytes<kWrite>(at.s2, bytes);
  }
  // Its gradient rows, when they are not summed ahead: a second one lies
  // anywhere, and the first ones of a part's rows (split by owner) skip the
  // other parts' rows (prefetched: lazy Adam under Zipf 1.02-1.34x). The
  // whole call's first rows come in order, the hardware streams them, and
  // prefetching them too ran 0.84-0.97x.
  prefetch_gradient_rows(grad, r, s, bytes, /*firsts=*/!r.firsts_in_order);
}

// The sparse update of distinct rows [begin, end): each row's gradient
// summed into buf (width elements), then its elements updated.
template <TrainingOp Op, bool A, bool B, typename T, typename C>
struct SparseUpdate {
  static void run(const TrainingParams<C>& p, const TrainingSlots<T>& slots, const T* grad,
                  const SparseRows<C>& r, C* buf, int64_t begin, int64_t end) {
    const TrainingParams<C> q = with_flags<Op, A, B>(p);
    for (int64_t s = begin; s < std::min(end, begin + kPrefetchRows); ++s) {
      prefetch_rows<Op>(slots, grad, r, s);
    }
#ifdef VARSTATE_F16C_INLINE
    // float16 rows in a loop built for F16C, which widens and rounds 8
    // values an instruction inline, bitwise as the element loop: 0.95-1.3x
    // (lazy Adam 1.0-1.3x) on 65,536 and 1M ids of 16 and 64 elements
    // (sparse Adagrad and lazy Adam on the 2-vCPU AMD VM,
    // docs/performance.md), where a call per row to half_blocks.h's
    // conversions cost what they saved.
    if constexpr (std::is_same_v<T, half> && std::is_same_v<C, float> &&
                  Op != TrainingOp::kRowwiseAdagrad) {
      if (halves_convert_in_hardware()) {
        for_f16c_isa([&] {
          for (int64_t s = begin; s < end; ++s) {
            if (s + kPrefetchRows < end) prefetch_rows<Op>(slots, grad, r, s + kPrefetchRows);
            half_block_loop<Update<Op, true>, HalfBlockF16cInline>(
                q, row_slots<Op>(slots, r.row[s], r.width), f16c_gradient_of(r, grad, s, buf), 0,
                r.width);
          }
        });
        return;
      }
    }
#endif
    for (int64_t s = begin; s < end; ++s) {
      if (s + kPrefetchRows < end) prefetch_rows<Op>(slots, grad, r, s + kPrefetchRows);
      const C* g = gradient_of(r, grad, s, buf);
      if constexpr (Op == TrainingOp::kRowwiseAdagrad) {
        // A sum over the row first, in column order (not vectorized).
        rowwise_adagrad_row(q, slots, r.row[s], r.width, [g](int64_t c) { return g[c]; });
      } else {
        elements<Update<Op, true>, T, C>(q, row_slots<Op>(slots, r.row[s], r.width), g, 0, r.width);
      }
    }
  }
};

// Table rows ahead of the one being updated whose batch rows' gradient
// rows compat.v1 Adam prefetches (about 4 KiB of each of the variable and
// its slots ahead): the pass walks the table in order, which the hardware
// streams, but a batch row's gradient rows lie anywhere in the gradient.
template <typename T>
constexpr int64_t adam_prefetch_rows(int64_t w) {
  return std::max<int64_t>(4, 4096 / std::max<int64_t>(1, w * static_cast<int64_t>(sizeof(T))));
}

// compat.v1 Adam's sparse update of variable rows [begin, end): the rows
// in the batch (their entries in of_row stamped `stamp`: RowEntries) with
// their gradient, each run of the others decayed in one loop over its
// elements.
template <TrainingOp Op, bool A, bool B, typename T, typename C>
struct AdamRows {
  static void run(const TrainingParams<C>& p, const TrainingSlots<T>& slots, const T* grad,
                  const SparseRows<C>& r, const uint64_t* of_row, uint64_t stamp, C* buf,
                  int64_t begin, int64_t end) {
    const TrainingParams<C> q = with_flags<Op, A, B>(p);
    const auto distinct_of = [of_row, stamp](int64_t row) {
      return RowEntries::distinct_in(of_row, stamp, row);
    };
    const int64_t w = r.width;
    const int64_t bytes = std::min<int64_t>(w * static_cast<int64_t>(sizeof(T)), 256);
    const int64_t ahead = adam_prefetch_rows<T>(w);
    int64_t fetched = begin;  // rows below it had their gradient rows prefetched
    auto prefetch_to = [&](int64_t to) {
      for (to = std::min(to, end); fetched < to; ++fetched) {
        if (const int64_t s = distinct_of(fetched); s >= 0)
          prefetch_gradient_rows(grad, r, s, bytes, /*firsts=*/true);
      }
    };
    // update_row(row, s): batch row `row`, distinct row s; decay(from, to):
    // elements [from, to) of rows the batch does not name.
    auto walk = [&](const auto& update_row, const auto& decay) {
      for (int64_t row = begin; row < end;) {
        prefetch_to(row + ahead);
        if (const int64_t s = distinct_of(row); s >= 0) {
          update_row(row, s);
          ++row;
          continue;
        }
        // A run of rows to decay, taken at most `ahead` rows at a time, so
        // that the prefetches keep ahead (and a long run is read once).
        const int64_t limit = std::min(end, row + ahead);
        int64_t stop = row + 1;
        while (stop < limit && distinct_of(stop) < 0) ++stop;
        decay(row * w, stop * w);
        row = stop;
      }
    };
#ifdef VARSTATE_F16C_INLINE
    // float16 in a loop built for F16C, converting inline as SparseUpdate
    // does: the batch's rows and the runs between them are mostly shorter
    // than a block, which the element loop would convert a value at a time
    // (65,536 ids into [1M, 16]: 1.07-1.15x uniform, 1.02-1.10x Zipf; rows
    // of 64: 0.97-1.12x; docs/performance.md).
    if constexpr (std::is_same_v<T, half> && std::is_same_v<C, float>) {
      if (halves_convert_in_hardware()) {
        for_f16c_isa([&] {
          walk(
              [&](int64_t row, int64_t s) {
                half_block_loop<Update<Op, true>, HalfBlockF16cInline>(
                    q, row_slots<Op>(slots, row, w), f16c_gradient_of(r, grad, s, buf), 0, w);
              },
              [&](int64_t from, int64_t to) {
                half_block_loop<AdamDecay, HalfBlockF16cInline>(
                    q, slots, static_cast<const half*>(nullptr), from, to);
              });
        });
        return;
      }
    }
#endif
    // The decay computes each element as adam_decay_element does, bitwise:
    // bfloat16 two elements to a word and float16 runs of a block or more
    // through float blocks (the op 1.2-2.1x faster in those types than
    // element by element, docs/performance.md).
    walk(
        [&](int64_t row, int64_t s) {
          elements<Update<Op, true>, T, C>(q, row_slots<Op>(slots, row, w),
                                           gradient_of(r, grad, s, buf), 0, w);
        },
        [&](int64_t from, int64_t to) {
          elements<AdamDecay, T, C>(q, slots, static_cast<const T*>(nullptr), from, to);
        });
  }
};

// K<Op, A, B, T, C>::run built for each instruction set (isa_variants.h):
// the variant for this CPU, as a function pointer (the sparse updates call
// it once per range of rows).
template <template <TrainingOp, bool, bool, typename, typename> class K, TrainingOp Op, bool A,
          bool B, typename T, typename C>
struct IsaVariants {
  using Fn = decltype(&K<Op, A, B, T, C>::run);
#ifdef VARSTATE_ISA_VARIANTS
  template <typename... Args>
  __attribute__((target(VARSTATE_AVX512_TARGET), flatten)) static void avx512(Args... args) {
    K<Op, A, B, T, C>::run(args...);
  }
  template <typename... Args>
  __attribute__((target("avx2"), flatten)) static void avx2(Args... args) {
    K<Op, A, B, T, C>::run(args...);
  }
  template <typename... Args>
  static Fn pick(void (*)(Args...)) {
    switch (cpu_isa()) {
      case Isa::kAvx512:
        return &avx512<Args...>;
      case Isa::kAvx2:
        return &avx2<Args...>;
      case Isa::kBaseline:
        break;
    }
    return &K<Op, A, B, T, C>::run;
  }
  static Fn for_cpu() { return pick(&K<Op, A, B, T, C>::run); }
#else
  static Fn for_cpu() { return &K<Op, A, B, T, C>::run; }
#endif
};

// The variant of K for p's flags on this CPU.
template <template <TrainingOp, bool, bool, typename, typename> class K, TrainingOp Op, typename T,
          typename C>
auto kernel_for(const TrainingParams<C>& p) {
  if constexpr (Op == TrainingOp::kFtrl) {
    if (p.sqrt_power) {
      return p.shrinkage ? IsaVariants<K, Op, true, true, T, C>::for_cpu()
                         : IsaVariants<K, Op, true, false, T, C>::for_cpu();
    }
    return p.shrinkage ? IsaVariants<K, Op, false, true, T, C>::for_cpu()
                       : IsaVariants<K, Op, false, false, T, C>::for_cpu();
  } else if constexpr (Op == TrainingOp::kMomentum || Op == TrainingOp::kAdam) {
    return p.use_nesterov ? IsaVariants<K, Op, true, false, T, C>::for_cpu()
                          : IsaVariants<K, Op, false, false, T, C>::for_cpu();
  } else if constexpr (Op == TrainingOp::kProximalGradientDescent) {
    if (p.l1_positive) {
      return p.unit_divisor ? IsaVariants<K, Op, true, true, T, C>::for_cpu()
                            : IsaVariants<K, Op, true, false, T, C>::for_cpu();
    }
    return p.unit_divisor ? IsaVariants<K, Op, false, true, T, C>::for_cpu()
                          : IsaVariants<K, Op, false, false, T, C>::for_cpu();
  } else if constexpr (kProximal<Op>) {
    return p.l1_positive ? IsaVariants<K, Op, true, false, T, C>::for_cpu()
                         : IsaVariants<K, Op, false, false, T, C>::for_cpu();
  } else {
    return IsaVariants<K, Op, false, false, T, C>::for_cpu();
  }
}

}  // namespace

RowNumbering& sparse_row_numbering() {
  static RowNumbering how = RowNumbering::kAuto;
  return how;
}

template <typename T>
void apply_dense(TrainingOp op, const TrainingHyper& hyper, const TrainingSlots<T>& slots,
                 const T* grad, int64_t n, int64_t row_width) {
  using C = training_compute_t<T>;
  const TrainingParams<C> p = training_params<T, C>(hyper);
  dispatch_training_op(op, [&](auto tag) {
    constexpr TrainingOp kOp = decltype(tag)::value;
    const double bytes = sizeof(T) * (2.0 + training_slot_count(kOp));
    if constexpr (kOp == TrainingOp::kRowwiseAdagrad) {
      const int64_t rows = row_width > 0 ? n / row_width : 0;
      for_range(rows, bytes * static_cast<double>(row_width), 8.0 * row_width,
                [&](int64_t begin, int64_t end) {
                  for (int64_t r = begin; r < end; ++r) {
                    const T* g = grad + r * row_width;
                    rowwise_adagrad_row(p, slots, r, row_width,
                                        [g](int64_t c) { return load_as<C>(g[c]); });
                  }
                });
    } else {
      const auto elements = kernel_for<DenseElements, kOp, T, C>(p);
      for_range(n, bytes, 8.0,
                [&](int64_t begin, int64_t end) { elements(p, slots, grad, begin, end); });
    }
  });
}

template <typename T, typename Index>
void apply_sparse(TrainingOp op, const TrainingHyper& hyper, const TrainingSlots<T>& slots,
                  int64_t rows, int64_t row_width, const Index* indices, int64_t num_indices,
                  const T* grad, bool /*deterministic*/) {
  using C = training_compute_t<T>;
  const TrainingParams<C> p = training_params<T, C>(hyper);
  const int64_t w = row_width;
  dispatch_training_op(op, [&](auto tag) {
    constexpr TrainingOp kOp = decltype(tag)::value;
    const double bytes = sizeof(T) * (2.0 + training_slot_count(kOp)) * static_cast<double>(w);
    if constexpr (kOp == TrainingOp::kAdam) {
      // Every row moves: one pass over the variable, each row looking up
      // its distinct row in the entries the numbering stamped.
      const RowEntries entries(rows, num_indices, RowSort{}, kPrefetchPositions, /*always=*/true);
      const DistinctRows<T, C, Index> distinct(indices, num_indices, grad, w, entries.part(0, 1));
      const SparseRows<C>& r = distinct.rows();
      // compat.v1's sparse Adam has no Nesterov form: one flag variant.
      const auto update = IsaVariants<AdamRows, kOp, false, false, T, C>::for_cpu();
      for_range(rows, bytes, 12.0 * w, [&](int64_t begin, int64_t end) {
        std::vector<C> buf(static_cast<size_t>(w));
        update(p, slots, grad, r, entries.of_row(), entries.stamp(), buf.data(), begin, end);
      });
    } else if constexpr (kOp != TrainingOp::kGradientDescent) {
      const auto update = kernel_for<SparseUpdate, kOp, T, C>(p);
      const int64_t row_bytes = w * static_cast<int64_t>(sizeof(T));
      const RepeatsRows<Index> repeats(indices, num_indices);
      const int64_t parts = split_rows_by_owner(repeats, bytes, row_bytes) ? pool_threads() : 1;
      const RowEntries entries(rows, num_indices, row_sort(repeats, rows),
                               num_indices >= kRepeatsCheckedFrom && repeats()
                                   ? kPrefetchPositionsRepeating
                                   : kPrefetchPositions);
      if (parts <= 1) {
        const DistinctRows<T, C, Index> distinct(indices, num_indices, grad, w, entries.part(0, 1));
        const SparseRows<C>& r = distinct.rows();
        for_distinct_rows(r.count, bytes, [&](int64_t begin, int64_t end) {
          std::vector<C> buf(static_cast<size_t>(w));
          update(p, slots, grad, r, buf.data(), begin, end);
        });
        return;
      }
      // The rows split by owner (owner_of): each part numbers, sums and
      // updates its own rows, over the positions naming them, on the
      // calling thread or a pool thread (run_shards), in the calling
      // thread's entries.
      auto run_part = [&](int64_t k) {
        const DistinctRows<T, C, Index> distinct(indices, num_indices, grad, w,
                                                 entries.part(k, parts));
        std::vector<C> buf(static_cast<size_t>(w));
        update(p, slots, grad, distinct.rows(), buf.data(), 0, distinct.rows().count);
      };
      run_shards(parts, run_part);
    }
  });
}

#define VARSTATE_INSTANTIATE(E, T)                                                        \
  template void apply_dense<T>(TrainingOp, const TrainingHyper&, const TrainingSlots<T>&, \
                               const T*, int64_t, int64_t);                               \
  template void apply_sparse<T, int32_t>(TrainingOp, const TrainingHyper&,                \
                                         const TrainingSlots<T>&, int64_t, int64_t,       \
                                         const int32_t*, int64_t, const T*, bool);        \
  template void apply_sparse<T, int64_t>(TrainingOp, const TrainingHyper&,                \
                                         const TrainingSlots<T>&, int64_t, int64_t,       \
                                         const int64_t*, int64_t, const T*, bool);
VARSTATE_FOR_EACH_TRAINING_TYPE(VARSTATE_INSTANTIATE)
#undef VARSTATE_INSTANTIATE

}  // namespace varstate::kernels::cpu
