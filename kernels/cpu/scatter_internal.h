// The CPU scatter template, shared by the files that instantiate it for
// groups of dtypes (floating point in scatter.cc, scatter_int.cc,
// scatter_complex.cc).
//
// One call reads the indices once per shard: that pass checks every index
// against the table's rows and lists the positions whose row the shard
// owns; only when no index is bad does the shard then apply its positions,
// in order. Every shard scans all indices, so all of them agree on whether
// the call is bad without waiting for one another, and nothing is written
// when one index is. Below the scatter threshold there is one shard, on the
// calling thread. Dirty-row marks, when kept, are set in the applying pass,
// each just before its row is written, so a bad index marks nothing.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/eigen_support.h"
#include "kernels/cpu/half_blocks.h"
#include "kernels/cpu/index_check.h"
#include "kernels/cpu/isa_variants.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/part_lookup.h"
#include "kernels/cpu/scatter.h"
#include "kernels/cpu/stream_store.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/elementwise_functors.h"
#include "kernels/philox.h"
#include "varstate/error.h"

namespace varstate::kernels::cpu::scatter_internal {

struct ScatterTuning {
  // Rows at least this wide are split by columns too (each thread a range
  // of at least this many bytes of every row), so that a few very wide
  // rows still spread over the threads.
  static constexpr int64_t kMinColumnBytes = 4096;
  // Rows are owned by shards in blocks of at least this many bytes (two
  // cache lines), so that two threads rarely write the same line.
  static constexpr int64_t kMinBlockBytes = 128;
  // Updates ahead of the current one whose rows are prefetched, for
  // `prefetch_bytes` prefetched of each row (at most 256). Most of a Zipf
  // batch's next few updates name rows already in the cache, so the reach
  // sets how many misses are in flight: 12 left about 2. Measured in one
  // process, alternating, against 12 (bench_sparse_limit): 32 ran rows of
  // 16 floats 1.3-1.5x faster under Zipf (1M ids into [1M,16]), 1.0-1.2x
  // for 65,536 ids and uniform ones. Rows of 64 floats (4 lines each) keep
  // 12: at 24 they gained 2-8 % under Zipf but a 4-part [4M,64] table lost
  // 5-10 % (bench_sharing), and at 32 a whole one lost up to 10 % uniform.
  // A streamed scatter_update reads no table rows: only the marks and the
  // update rows are prefetched, at a constant reach (a constant the
  // compiler folds: as a variable the loop ran 10 % slower).
  static constexpr int64_t kStreamDistance = 12;
  static constexpr int64_t prefetch_distance(int64_t prefetch_bytes) {
    return prefetch_bytes > 128 ? 12 : 32;
  }
};

// How the table is cut into shards, each updated by one thread: row_parts
// sets of row blocks times col_parts column ranges of col_chunk elements.
struct ShardPlan {
  int64_t row_parts = 1;
  int64_t col_parts = 1;
  int64_t col_chunk = 0;
  int block_shift = 0;  // rows are owned in blocks of 2^block_shift
};

// Shards for `work_bytes` touched in rows of `row_width` elements of
// `elem_bytes` on `threads` threads; a single shard below the threshold.
ShardPlan plan_shards(int64_t work_bytes, int64_t row_width, int64_t elem_bytes, int threads,
                      int64_t threshold);

// One byte per table row, set for each row a scatter writes (the dirty
// rows of runtime/dirty_rows.h).
using Mark = std::atomic<uint8_t>;

// The first position in [0, n) whose index is not in [0, rows), or -1
// (index_check.h).
template <typename Index>
int64_t first_bad(const Index* indices, int64_t n, int64_t rows) {
  return first_bad_index(indices, n, rows);
}

// The 16-bit floating-point types combined through their bits, as
// Eigen::bfloat16's and Eigen::half's operators combine them in this build
// (and so TensorFlow's CPU scatters): both values widened to float, the op
// in float, the result rounded to nearest even; min and max keep one of
// the two values. Unlike Eigen's conversions (a branch per NaN, and for
// half per exponent range), these compute every case and select, in plain
// integer and float operations the loop vectorizes.
//
// bfloat16 is a float's upper 16 bits. Its rounding is rng::bfloat16_bits'
// but for NaN: Eigen makes a NaN result the quiet NaN of its sign (0x7fc0 or
// 0xffc0), where varstate/dtype.h (and rng) keep the payload.
struct Bf16Bits {
  static float to_float(uint16_t b) { return rng::bfloat16_value(b); }
  static uint16_t from_float(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
    return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
};
// IEEE binary16: kernels/philox.h's conversions, which give what Eigen's
// portable path (this baseline build's: no F16C) gives, a NaN result
// 0x7e00 with its sign, and vectorize. On a CPU with F16C, add, sub, mul
// and div rows convert with its instructions instead, to the same bits
// (apply_row, half_blocks.h's combine_halves_f16c).
struct F16Bits {
  static float to_float(uint16_t h) { return rng::half_value(h); }
  static uint16_t from_float(float f) { return rng::half_bits(f); }
};
// The kernels' own op for scatter_sub_scaled: scatter_sub of each update
// times a scale (Rows::scale), not a ScatterOp of the API. with_op selects
// it only when asked to scale, never from a caller's op value.
inline constexpr ScatterOp kSubScaled = static_cast<ScatterOp>(7);
// The element types scatter_sub_scaled takes.
template <typename E>
inline constexpr bool kScalable = std::is_same_v<E, float> || std::is_same_v<E, double>;

// The op of half_blocks.h's combine_halves_f16c for a scatter op: kAdd,
// kSub, kMul and kDiv; kMaximum stands for "none" (min and max select an
// operand and keep the portable comparison).
template <ScatterOp Op>
inline constexpr HalfBinaryOp kF16cOp = Op == ScatterOp::kAdd   ? HalfBinaryOp::kAdd
                                        : Op == ScatterOp::kSub ? HalfBinaryOp::kSub
                                        : Op == ScatterOp::kMul ? HalfBinaryOp::kMul
                                        : Op == ScatterOp::kDiv ? HalfBinaryOp::kDiv
                                                                : HalfBinaryOp::kMaximum;

template <ScatterOp Op, typename Bits>
inline uint16_t combine_16bit(uint16_t t, uint16_t u) {
  const float a = Bits::to_float(t), b = Bits::to_float(u);
  if constexpr (Op == ScatterOp::kAdd) return Bits::from_float(a + b);
  if constexpr (Op == ScatterOp::kSub) return Bits::from_float(a - b);
  if constexpr (Op == ScatterOp::kMul) return Bits::from_float(a * b);
  if constexpr (Op == ScatterOp::kDiv) return Bits::from_float(a / b);
  if constexpr (Op == ScatterOp::kMin) return b < a ? u : t;
  if constexpr (Op == ScatterOp::kMax) return a < b ? u : t;
  return u;
}

// Writes one update into a row of n elements; with Stream (scatter_update
// of whole cache lines, Rows::stream) around the caches.
//
// kSubScaled (not Scalar): dst -= src * scale, the product rounded before
// the subtraction as the two ops (a multiply, then scatter_sub) round it:
// this file's users are built without contraction into FMA
// (kernels/sources.cmake).
template <ScatterOp Op, bool Scalar, bool Stream = false, typename E>
inline void apply_row(E* __restrict dst, const E* __restrict src, int64_t n, E scale = E{}) {
  if constexpr (Op == kSubScaled) {
    static_assert(!Scalar && !Stream && kScalable<E>);
    for (int64_t c = 0; c < n; ++c) dst[c] = dst[c] - src[c] * scale;
  } else if constexpr (Stream) {
    static_assert(Op == ScatterOp::kUpdate && !Scalar);
    stream_copy(dst, src, static_cast<size_t>(n) * sizeof(E));
  } else if constexpr (Op == ScatterOp::kUpdate && !Scalar) {
    // GCC turns this loop into a call of memmove (loop idiom recognition),
    // and that call, built for this CPU, beat inline copies built for the
    // baseline: constant 64-byte copies (four 16-byte moves each) ran
    // 65,536 Zipf updates into [1M,64] in 1.78-1.94 ms against 1.42-1.65,
    // and rows of 16 floats alike (bench_sparse_limit, 3 alternating
    // rounds; docs/performance.md).
    for (int64_t c = 0; c < n; ++c) dst[c] = src[c];
  } else if constexpr (std::is_same_v<E, Eigen::bfloat16> || std::is_same_v<E, Eigen::half>) {
    static_assert(sizeof(E) == sizeof(uint16_t));
    if constexpr (std::is_same_v<E, Eigen::half> && kF16cOp<Op> != HalfBinaryOp::kMaximum) {
      // F16C's conversions, 8 values an instruction, the same bits
      // (half_blocks.h); the portable ones below cost about a dozen integer
      // operations a value each way.
      if (combine_halves_f16c(kF16cOp<Op>, reinterpret_cast<::varstate::half*>(dst),
                              reinterpret_cast<const ::varstate::half*>(src), Scalar, n)) {
        return;
      }
    }
    using Bits = std::conditional_t<std::is_same_v<E, Eigen::half>, F16Bits, Bf16Bits>;
    auto* __restrict d = reinterpret_cast<uint16_t*>(dst);
    const auto* __restrict u = reinterpret_cast<const uint16_t*>(src);
    const uint16_t s = u[0];
    for (int64_t c = 0; c < n; ++c) d[c] = combine_16bit<Op, Bits>(d[c], Scalar ? s : u[c]);
  } else {
    const E s = src[0];
    for (int64_t c = 0; c < n; ++c) dst[c] = scatter_combine<Op>(dst[c], Scalar ? s : src[c]);
  }
}

// A table row and its mark (nullptr when the call keeps no marks).
template <typename E>
struct RowSlot {
  E* row;
  Mark* mark;
};

// Row r of a whole table...
template <typename E>
struct TableRows {
  // at() is a multiply-add: apply_positions calls it as it goes.
  static constexpr bool kResolveAhead = false;
  E* base;
  int64_t row_width;
  Mark* marks;  // one per row, or nullptr
  bool stream;  // scatter_update stores around the caches (scatter_streams_updates)
  E scale{};    // kSubScaled's factor
  RowSlot<E> at(int64_t r) const {
    return {base + r * row_width, marks == nullptr ? nullptr : marks + r};
  }
};

// The part holding a row of a table split by rows, found in a table of
// blocks: with every part at least 2^shift rows long, the rows of block
// r >> shift lie in the part holding its first row or in the next one, so
// one load and one compare find it. Without such a table (an empty part,
// or parts so short that it would exceed kMaxBlocks) it is null and the
// part bounds are searched.
struct PartBlocks {
  static constexpr int64_t kMaxBlocks = 4096;
  std::vector<int32_t> first_part;  // per block, or empty
  int shift = 0;

  PartBlocks(const int64_t* part_begin, int num_parts) {
    int64_t shortest = part_begin[num_parts];
    for (int k = 0; k < num_parts; ++k) {
      shortest = std::min(shortest, part_begin[k + 1] - part_begin[k]);
    }
    if (shortest <= 0) return;
    shift = std::bit_width(static_cast<uint64_t>(shortest)) - 1;  // 2^shift <= shortest
    const int64_t blocks = ((part_begin[num_parts] - 1) >> shift) + 1;
    if (blocks > kMaxBlocks) return;
    first_part.resize(static_cast<size_t>(blocks));
    int k = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      while (k + 1 < num_parts && part_begin[k + 1] <= (b << shift)) ++k;
      first_part[static_cast<size_t>(b)] = k;
    }
  }
};

// ...or of a table split by rows into parts (a partitioned variable), each
// part with its own marks.
template <typename E>
struct PartRows {
  // at() finds the part: apply_positions looks rows up a chunk at a time,
  // ahead of their writes (apply_resolved).
  static constexpr bool kResolveAhead = true;
  E* const* parts;
  const int64_t* part_begin;
  int num_parts;
  int64_t row_width;
  Mark* const* marks;         // one array per part, or nullptr
  const int32_t* first_part;  // PartBlocks::first_part, or nullptr
  int shift;                  // PartBlocks::shift
  bool stream;                // as TableRows::stream
  E scale{};                  // as TableRows::scale
  RowSlot<E> at(int64_t r) const {
    int64_t k = 0;
    if (first_part != nullptr) {
      k = first_part[r >> shift];
      k += r >= part_begin[k + 1];
    } else {
      // Counted up to 32 parts: this loop's misses hide the count.
      k = starts_at_or_before(part_begin + 1, num_parts - 1, r, /*counted=*/31);
    }
    const int64_t local = r - part_begin[k];
    return {parts[k] + local * row_width, marks == nullptr ? nullptr : marks[k] + local};
  }
};

// The positions 0, 1, 2, ... (every index, in order).
struct AllPositions {
  int64_t operator[](int64_t j) const { return j; }
};

// apply_positions for rows whose lookup costs more than a multiply-add
// (PartRows): the rows (and marks) of up to kChunk updates are looked up
// first, in a tight loop of their own, then written as apply_positions
// writes them, prefetched from the buffer. Measured against looking rows
// up between the writes (65,536 and 1M updates of 16 floats into 4 parts
// of a 1M-row table): 0.69 -> 0.44 ms and 13.8 -> 14.1 ms for
// scatter_update, 0.76 -> 0.40 ms and 18.1 -> 15.8 ms for scatter_add.
// (The prefetches stay in the loop's body: GCC 12 drops the call of a
// lambda that only prefetches, as a call without effects.)
template <ScatterOp Op, bool Scalar, bool Stream, typename E, typename Rows, typename Index,
          typename Positions>
void apply_resolved(const Rows& table, int64_t row_width, const Index* indices,
                    const Positions& pos, int64_t n, const E* updates, int64_t c0, int64_t c1,
                    bool mark) {
  constexpr int64_t kChunk = 1024;  // 16 KiB of slots: written while still in L1
  const int64_t prefetch_bytes = std::min<int64_t>((c1 - c0) * sizeof(E), 256);
  const int64_t ahead_by =
      Stream ? ScatterTuning::kStreamDistance : ScatterTuning::prefetch_distance(prefetch_bytes);
  constexpr bool kSparsePositions = !std::is_same_v<Positions, AllPositions>;
  mark = mark && table.marks != nullptr;
  RowSlot<E> slots[kChunk];
  for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
    const int64_t m = std::min(kChunk, n - j0);
    for (int64_t j = 0; j < m; ++j) slots[j] = table.at(static_cast<int64_t>(indices[pos[j0 + j]]));
    for (int64_t j = -ahead_by; j < m; ++j) {
      if (j + ahead_by < m) {
        const RowSlot<E> next = slots[j + ahead_by];
        if constexpr (!Stream) {  // a streamed row is not read
          const char* line = reinterpret_cast<const char*>(next.row + c0);
          for (int64_t b = 0; b < prefetch_bytes; b += 64) __builtin_prefetch(line + b, 1);
        }
        if (mark) __builtin_prefetch(next.mark, 1);
        if constexpr (!Scalar && kSparsePositions) {
          const char* src =
              reinterpret_cast<const char*>(updates + pos[j0 + j + ahead_by] * row_width + c0);
          for (int64_t b = 0; b < prefetch_bytes; b += 64) __builtin_prefetch(src + b, 0);
        }
      }
      if (j < 0) continue;
      const E* src = Scalar ? updates : updates + pos[j0 + j] * row_width + c0;
      if (mark) slots[j].mark->store(1, std::memory_order_relaxed);
      apply_row<Op, Scalar, Stream>(slots[j].row + c0, src, c1 - c0, table.scale);
    }
  }
}

// apply_positions with the rows streamed or not: the loop for rows found
// as it goes.
template <ScatterOp Op, bool Scalar, bool Stream, typename E, typename Rows, typename Index,
          typename Positions>
void write_positions(const Rows& table, int64_t row_width, const Index* indices,
                     const Positions& pos, int64_t n, const E* updates, int64_t c0, int64_t c1,
                     bool mark) {
  if constexpr (Rows::kResolveAhead) {
    apply_resolved<Op, Scalar, Stream>(table, row_width, indices, pos, n, updates, c0, c1, mark);
    return;
  }
  const int64_t prefetch_bytes = std::min<int64_t>((c1 - c0) * sizeof(E), 256);
  const int64_t ahead_by =
      Stream ? ScatterTuning::kStreamDistance : ScatterTuning::prefetch_distance(prefetch_bytes);
  constexpr bool kSparsePositions = !std::is_same_v<Positions, AllPositions>;
  mark = mark && table.marks != nullptr;
  for (int64_t j = 0; j < n; ++j) {
    if (j + ahead_by < n) {
      // The table row, and (positions of one shard are not consecutive, so
      // the hardware prefetcher misses them) the update row.
      const int64_t ahead = pos[j + ahead_by];
      const RowSlot<E> next = table.at(static_cast<int64_t>(indices[ahead]));
      if constexpr (!Stream) {  // a streamed row is not read
        const char* line = reinterpret_cast<const char*>(next.row + c0);
        for (int64_t b = 0; b < prefetch_bytes; b += 64) __builtin_prefetch(line + b, 1);
      }
      if (mark) __builtin_prefetch(next.mark, 1);
      if constexpr (!Scalar && kSparsePositions) {
        const char* src = reinterpret_cast<const char*>(updates + ahead * row_width + c0);
        for (int64_t b = 0; b < prefetch_bytes; b += 64) __builtin_prefetch(src + b, 0);
      }
    }
    const int64_t i = pos[j];
    const E* src = Scalar ? updates : updates + i * row_width + c0;
    const RowSlot<E> slot = table.at(static_cast<int64_t>(indices[i]));
    if (mark) slot.mark->store(1, std::memory_order_relaxed);
    apply_row<Op, Scalar, Stream>(slot.row + c0, src, c1 - c0, table.scale);
  }
}

// Applies, in order, the updates at positions pos[0, n) to columns
// [c0, c1) of their rows, marking each row just before it writes it when
// the table keeps marks and `mark` is set. A mark costs a cache miss of its
// own (the marks of a 1M-row table are 1 MiB, touched at random), so it is
// prefetched with its row, and set where that row's miss is waited for. A
// table that streams its updates (Rows::stream) is written around the
// caches, each row unread, and fenced before this returns.
//
// The combining ops on floating-point rows (kIsaVariants) run a loop built
// for this CPU's widest instruction set (isa_variants.h): their arithmetic
// vectorizes, and on the 2-vCPU VM (AVX-512) scatter_add and scatter_mul
// on rows of 64 floats ran up to 1.3x faster so (rows of 16 floats, one
// cache line, as fast as before; docs/performance.md). scatter_update
// keeps the baseline build: its copy is a memmove call, and with the
// whole file built for this CPU its streamed stores ran 0.8x.
template <ScatterOp Op, typename E>
inline constexpr bool kIsaVariants = Op != ScatterOp::kUpdate &&
                                     (std::is_floating_point_v<E> ||
                                      std::is_same_v<E, Eigen::half> ||
                                      std::is_same_v<E, Eigen::bfloat16>);

template <ScatterOp Op, bool Scalar, typename E, typename Rows, typename Index, typename Positions>
void apply_positions(const Rows& table, int64_t row_width, const Index* indices,
                     const Positions& pos, int64_t n, const E* updates, int64_t c0, int64_t c1,
                     bool mark) {
  if constexpr (Op == ScatterOp::kUpdate && !Scalar && kCanStream) {
    if (table.stream) {
      write_positions<Op, Scalar, true>(table, row_width, indices, pos, n, updates, c0, c1, mark);
      stream_fence();  // before the shard says it is done, or the call returns
      return;
    }
  }
  if constexpr (kIsaVariants<Op, E>) {
    for_cpu_isa([&] {
      write_positions<Op, Scalar, false>(table, row_width, indices, pos, n, updates, c0, c1, mark);
    });
  } else {
    write_positions<Op, Scalar, false>(table, row_width, indices, pos, n, updates, c0, c1, mark);
  }
}

// The first pass of a shard over all indices: checks each, and lists in
// order the positions of those whose row part `mine` accepts (branch-free:
// a position is always written, and kept when it belongs). Returns the
// count, or -1 when an index is bad.
template <typename Index, typename Mine>
int64_t list_positions(const Index* indices, int64_t n, int64_t rows, const ShardPlan& plan,
                       const Mine& mine, int64_t* pos) {
  const uint64_t limit = static_cast<uint64_t>(rows);
  bool bad = false;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = static_cast<int64_t>(indices[i]);
    bad |= static_cast<uint64_t>(r) >= limit;
    pos[count] = i;
    count += mine(owner_of(r, plan.block_shift, plan.row_parts));
  }
  return bad ? -1 : count;
}

// One shard: its row part times its column range. Returns false (nothing
// written) when an index is bad.
template <ScatterOp Op, bool Scalar, typename E, typename Rows, typename Index>
bool run_shard(const Rows& table, int64_t rows, const ShardPlan& plan, int64_t shard,
               int64_t row_width, const Index* indices, int64_t n, const E* updates) {
  const int64_t part = shard / plan.col_parts;
  const int64_t c0 = std::min(row_width, shard % plan.col_parts * plan.col_chunk);
  const int64_t c1 = std::min(row_width, c0 + plan.col_chunk);
  ThreadScratch<int64_t> scratch(static_cast<size_t>(n));
  const int64_t count = list_positions(
      indices, n, rows, plan, [part](int64_t owner) { return owner == part; }, scratch.data());
  if (count < 0) return false;
  if (c0 < c1) {
    apply_positions<Op, Scalar>(table, row_width, indices, scratch.data(), count, updates, c0, c1,
                                /*mark=*/c0 == 0);
  }
  return true;
}

// Whole rows split by row part (one shard per part): part 0 is the calling
// thread's, the others are offered to the pool. After its first pass (which
// checked every index) the caller takes back the parts no pool thread has
// started: with none started it applies every update itself, in order, as
// the serial path does, so a late pool costs nothing but the offer.
template <ScatterOp Op, bool Scalar, typename E, typename Rows, typename Index>
bool scatter_by_rows(const Rows& table, int64_t rows, const ShardPlan& plan, int64_t row_width,
                     const Index* indices, int64_t n, const E* updates) {
  std::atomic<bool> any_bad{false};
  auto pool_shard = [&](int64_t s) {
    if (!run_shard<Op, Scalar>(table, rows, plan, s, row_width, indices, n, updates)) {
      any_bad.store(true, std::memory_order_relaxed);
    }
  };
  ShardOffer offer(plan.row_parts, pool_shard);
  ThreadScratch<int64_t> scratch(static_cast<size_t>(n));
  int64_t* const pos = scratch.data();
  int64_t count = list_positions(
      indices, n, rows, plan, [](int64_t owner) { return owner == 0; }, pos);
  const int64_t taken_from = offer.close();
  if (count < 0) return false;  // the pool's shards find the bad index too
  if (taken_from == 1) {
    apply_positions<Op, Scalar>(table, row_width, indices, AllPositions{}, n, updates, 0, row_width,
                                /*mark=*/true);
    return true;
  }
  if (taken_from < plan.row_parts) {
    auto mine = [taken_from](int64_t owner) { return owner == 0 || owner >= taken_from; };
    count = list_positions(indices, n, rows, plan, mine, pos);
  }
  apply_positions<Op, Scalar>(table, row_width, indices, pos, count, updates, 0, row_width,
                              /*mark=*/true);
  offer.wait();
  return !any_bad.load();
}

// scatter_update on one thread when many indices repeat a row: only the
// last update of each row is applied (the rows end as the serial loop
// leaves them, bitwise: an update copies). The first pass checks every
// index and records in last[r] the last position naming row r; the second
// keeps the positions that are their row's last. Entries of rows no index
// names are never read, so `last` needs no clearing. Pays when there are
// at least twice as many indices as rows: 1M updates into [100k,64] ran
// 2-3x faster, while at one index per row ([1M,16], 1M updates, where
// `last` is 4 MB of random accesses) or 0.65 ([100k,64], 65,536) the two
// passes cost more than the copies they save. Positions must fit int32.
inline bool worth_last_writers(int64_t n, int64_t rows) {
  return n >= 2 * rows && n <= int64_t{INT32_MAX};
}

template <bool Scalar, typename E, typename Rows, typename Index>
int64_t update_last_writers(const Rows& table, int64_t rows, int64_t row_width,
                            const Index* indices, int64_t n, const E* updates) {
  ThreadScratch<int32_t> last_of(static_cast<size_t>(rows));
  int32_t* const last = last_of.data();
  const uint64_t limit = static_cast<uint64_t>(rows);
  for (int64_t j = 0; j < n; ++j) {
    const uint64_t r = static_cast<uint64_t>(static_cast<int64_t>(indices[j]));
    if (r >= limit) return j;
    last[r] = static_cast<int32_t>(j);
  }
  ThreadScratch<int64_t> positions(static_cast<size_t>(n));
  int64_t* const pos = positions.data();
  int64_t count = 0;
  for (int64_t j = 0; j < n; ++j) {
    pos[count] = j;
    count += last[static_cast<int64_t>(indices[j])] == j;
  }
  apply_positions<ScatterOp::kUpdate, Scalar>(table, row_width, indices, pos, count, updates, 0,
                                              row_width, /*mark=*/true);
  return -1;
}

// The whole call: returns the first bad position (nothing written) or -1.
template <ScatterOp Op, bool Scalar, typename E, typename Rows, typename Index>
int64_t scatter_op(const Rows& table, int64_t rows, const ShardPlan& plan, int64_t row_width,
                   const Index* indices, int64_t n, const E* updates) {
  const int64_t shards = plan.row_parts * plan.col_parts;
  if (shards == 1) {
    if constexpr (Op == ScatterOp::kUpdate) {
      if (worth_last_writers(n, rows)) {
        return update_last_writers<Scalar>(table, rows, row_width, indices, n, updates);
      }
    }
    const int64_t bad = first_bad(indices, n, rows);
    if (bad >= 0) return bad;
    apply_positions<Op, Scalar>(table, row_width, indices, AllPositions{}, n, updates, 0, row_width,
                                /*mark=*/true);
    return -1;
  }
  bool ok = true;
  if (plan.col_parts == 1) {
    ok = scatter_by_rows<Op, Scalar>(table, rows, plan, row_width, indices, n, updates);
  } else {
    std::atomic<bool> any_bad{false};
    auto shard = [&](int64_t s) {
      if (!run_shard<Op, Scalar>(table, rows, plan, s, row_width, indices, n, updates)) {
        any_bad.store(true, std::memory_order_relaxed);
      }
    };
    run_shards(shards, shard);
    ok = !any_bad.load();
  }
  return ok ? -1 : first_bad(indices, n, rows);
}

// A call on rows of no elements: checks the indices and, when all are
// good, marks their rows (nothing else is written). Returns as scatter_op.
template <typename Rows, typename Index>
int64_t mark_empty_rows(const Rows& table, const Index* indices, int64_t n, int64_t rows) {
  const int64_t bad = first_bad(indices, n, rows);
  if (bad >= 0 || table.marks == nullptr) return bad;
  for (int64_t i = 0; i < n; ++i) {
    table.at(static_cast<int64_t>(indices[i])).mark->store(1, std::memory_order_relaxed);
  }
  return -1;
}

inline bool line_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

// fn(std::integral_constant<ScatterOp, op>) for the runtime op, or for
// kSubScaled when `scaled` (op is then kSub); complex types have no
// min/max.
template <typename E, typename Fn>
auto with_op(ScatterOp op, bool scaled, Fn&& fn) {
  if constexpr (kScalable<E>) {
    if (scaled) return fn(std::integral_constant<ScatterOp, kSubScaled>{});
  }
  switch (op) {
    case ScatterOp::kUpdate:
      return fn(std::integral_constant<ScatterOp, ScatterOp::kUpdate>{});
    case ScatterOp::kAdd:
      return fn(std::integral_constant<ScatterOp, ScatterOp::kAdd>{});
    case ScatterOp::kSub:
      return fn(std::integral_constant<ScatterOp, ScatterOp::kSub>{});
    case ScatterOp::kMul:
      return fn(std::integral_constant<ScatterOp, ScatterOp::kMul>{});
    case ScatterOp::kDiv:
      return fn(std::integral_constant<ScatterOp, ScatterOp::kDiv>{});
    case ScatterOp::kMin:
    case ScatterOp::kMax:
      if constexpr (kIsComplex<E>) {
        throw InvalidArgumentError("scatter_min/scatter_max: complex values are not ordered");
      } else if (op == ScatterOp::kMin) {
        return fn(std::integral_constant<ScatterOp, ScatterOp::kMin>{});
      } else {
        return fn(std::integral_constant<ScatterOp, ScatterOp::kMax>{});
      }
  }
  return fn(std::integral_constant<ScatterOp, ScatterOp::kUpdate>{});  // not reached
}

// The class of a scatter in its split trial (SplitTrials): what decides
// whether a split pays, sizes to the power of two.
inline uint64_t split_trial_key(ScatterOp op, bool stream, bool repeats, int64_t work,
                                int64_t table_bytes, int64_t row_bytes, int64_t elem_bytes) {
  const auto log2 = [](int64_t v) {
    return static_cast<uint64_t>(std::bit_width(static_cast<uint64_t>(v)));
  };
  return static_cast<uint64_t>(op) | uint64_t{stream} << 4 | uint64_t{repeats} << 5 |
         log2(work) << 8 | log2(table_bytes) << 16 | log2(row_bytes) << 24 |
         static_cast<uint64_t>(elem_bytes) << 32;
}

// The scatter `op` of n updates into `table`'s rows; when `scaled`, op is
// kSub and each update is multiplied by table.scale first (kSubScaled).
template <typename E, typename Rows, typename Index>
int64_t scatter_rows(ScatterOp op, const Rows& table, int64_t rows, int64_t row_width,
                     const Index* indices, int64_t n, const E* updates, bool updates_scalar,
                     const RepeatsRows<Index>& repeats, bool scaled = false) {
  const int64_t work = n * (3 * row_width * int64_t{sizeof(E)} + int64_t{sizeof(Index)});
  const int64_t table_bytes = rows * row_width * int64_t{sizeof(E)};
  int64_t threshold = scatter_split_threshold(op, work, table_bytes, repeats);
  // Below its threshold, from the trial size up, the call's class learns
  // from its own calls whether a split pays on this machine.
  SplitTrials::Choice trial;
  uint64_t key = 0;
  const int threads = pool_threads();
  if (work < threshold && work >= parallel_thresholds().scatter_trial_bytes && threads > 1) {
    // (scaled: a class of its own, its compute per byte being higher)
    key = split_trial_key(scaled ? kSubScaled : op, table.stream, repeats(), work, table_bytes,
                          row_width * int64_t{sizeof(E)}, sizeof(E));
    trial = scatter_split_trials().choose(key);
    if (trial.split) threshold = work;
  }
  const ShardPlan plan = plan_shards(work, row_width, sizeof(E), threads, threshold);
  const auto start =
      trial.timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  const int64_t bad = with_op<E>(op, scaled, [&](auto kind) {
    constexpr ScatterOp kOp = decltype(kind)::value;
    if constexpr (kOp == kSubScaled) {
      return scatter_op<kOp, false>(table, rows, plan, row_width, indices, n, updates);
    } else {
      return updates_scalar
                 ? scatter_op<kOp, true>(table, rows, plan, row_width, indices, n, updates)
                 : scatter_op<kOp, false>(table, rows, plan, row_width, indices, n, updates);
    }
  });
  if (trial.timed) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    scatter_split_trials().record(key, plan.row_parts * plan.col_parts > 1, took.count());
  }
  return bad;
}

}  // namespace varstate::kernels::cpu::scatter_internal

namespace varstate::kernels::cpu {

template <typename T, typename Index>
int64_t scatter(ScatterOp op, T* table, int64_t rows, int64_t row_width, const Index* indices,
                int64_t num_indices, const T* updates, bool updates_scalar, bool deterministic,
                std::atomic<uint8_t>* marks) {
  using namespace scatter_internal;
  using E = eigen_t<T>;
  (void)deterministic;
  if (num_indices == 0) return -1;
  const RepeatsRows<Index> repeats(indices, num_indices);
  const TableRows<E> rows_of{
      reinterpret_cast<E*>(table), row_width, marks,
      scatter_streams_updates(op, updates_scalar, rows, row_width * int64_t{sizeof(E)}, num_indices,
                              line_aligned(table)) &&
          !repeats()};
  if (row_width == 0) return mark_empty_rows(rows_of, indices, num_indices, rows);
  return scatter_rows(op, rows_of, rows, row_width, indices, num_indices,
                      reinterpret_cast<const E*>(updates), updates_scalar, repeats);
}

template <typename T, typename Index>
int64_t scatter_sub_scaled(T* table, int64_t rows, int64_t row_width, const Index* indices,
                           int64_t num_indices, const T* updates, T scale,
                           std::atomic<uint8_t>* marks) {
  using namespace scatter_internal;
  using E = eigen_t<T>;
  static_assert(kScalable<E> && sizeof(E) == sizeof(T));
  if (num_indices == 0) return -1;
  const RepeatsRows<Index> repeats(indices, num_indices);
  const TableRows<E> rows_of{reinterpret_cast<E*>(table), row_width, marks, /*stream=*/false,
                             std::bit_cast<E>(scale)};
  if (row_width == 0) return mark_empty_rows(rows_of, indices, num_indices, rows);
  return scatter_rows(ScatterOp::kSub, rows_of, rows, row_width, indices, num_indices,
                      reinterpret_cast<const E*>(updates), /*updates_scalar=*/false, repeats,
                      /*scaled=*/true);
}

template <typename T, typename Index>
int64_t scatter_parts(ScatterOp op, T* const* parts, const int64_t* part_begin, int num_parts,
                      int64_t row_width, const Index* indices, int64_t num_indices,
                      const T* updates, bool updates_scalar, std::atomic<uint8_t>* const* marks) {
  using namespace scatter_internal;
  using E = eigen_t<T>;
  static_assert(sizeof(E) == sizeof(T));
  const int64_t rows = part_begin[num_parts];
  if (num_indices == 0) return -1;
  const PartBlocks blocks(part_begin, num_parts);
  const RepeatsRows<Index> repeats(indices, num_indices);
  const PartRows<E> table{
      reinterpret_cast<E* const*>(parts),
      part_begin,
      num_parts,
      row_width,
      marks,
      blocks.first_part.empty() ? nullptr : blocks.first_part.data(),
      blocks.shift,
      scatter_streams_updates(
          op, updates_scalar, rows, row_width * int64_t{sizeof(E)}, num_indices,
          std::all_of(parts, parts + num_parts, [](const T* p) { return line_aligned(p); })) &&
          !repeats()};
  if (row_width == 0) return mark_empty_rows(table, indices, num_indices, rows);
  return scatter_rows(op, table, rows, row_width, indices, num_indices,
                      reinterpret_cast<const E*>(updates), updates_scalar, repeats);
}

}  // namespace varstate::kernels::cpu

// Explicit instantiations for storage type T, inside namespace
// varstate::kernels::cpu.
#define VARSTATE_INSTANTIATE_CPU_SCATTER(E, T)                                                   \
  template int64_t scatter<T, int32_t>(ScatterOp, T*, int64_t, int64_t, const int32_t*, int64_t, \
                                       const T*, bool, bool, std::atomic<uint8_t>*);             \
  template int64_t scatter<T, int64_t>(ScatterOp, T*, int64_t, int64_t, const int64_t*, int64_t, \
                                       const T*, bool, bool, std::atomic<uint8_t>*);             \
  template int64_t scatter_parts<T, int64_t>(ScatterOp, T* const*, const int64_t*, int, int64_t, \
                                             const int64_t*, int64_t, const T*, bool,            \
                                             std::atomic<uint8_t>* const*);

// scatter_sub_scaled's, for the floating-point storage types.
#define VARSTATE_INSTANTIATE_CPU_SCATTER_SCALED(T)                                               \
  template int64_t scatter_sub_scaled<T, int32_t>(T*, int64_t, int64_t, const int32_t*, int64_t, \
                                                  const T*, T, std::atomic<uint8_t>*);           \
  template int64_t scatter_sub_scaled<T, int64_t>(T*, int64_t, int64_t, const int64_t*, int64_t, \
                                                  const T*, T, std::atomic<uint8_t>*);
