// The CPU scatter template, shared by the files that instantiate it for
// groups of dtypes (floating point in scatter.cc, scatter_int.cc,
// scatter_complex.cc).
#pragma once

#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/eigen_internal.h"
#include "kernels/cpu/scatter.h"
#include "kernels/elementwise_functors.h"
#include "varstate/error.h"

namespace varstate::kernels::cpu::scatter_internal {

// How the table is cut into shards, each updated by one thread: row_parts
// equal row ranges times column ranges of col_chunk elements.
struct ShardPlan {
  int64_t row_parts = 1;
  int64_t col_parts = 1;
  int64_t col_chunk = 0;
};

struct ScatterTuning {
  // A thread's column range spans at least this many bytes (two cache lines,
  // so that neighbouring threads never write the same line).
  static constexpr int64_t kMinColumnBytes = 128;
  // Row ranges per thread when rows are split: more than one evens out
  // skewed indices at the cost of one more scan of the indices per range.
  static constexpr int64_t kRowPartsPerThread = 2;
  // Rows ahead of the current one whose first cache lines are prefetched.
  static constexpr int64_t kPrefetchDistance = 8;
};

// Shards for `work_bytes` of updates into rows of `row_bytes` (element size
// `elem_bytes`) on `threads` threads; a single shard below the threshold.
ShardPlan plan_shards(int64_t work_bytes, int64_t row_width, int64_t elem_bytes, int threads);

template <ScatterOp Op, bool Scalar, typename E>
inline void apply_row(E* __restrict dst, const E* __restrict src, int64_t n) {
  if constexpr (Op == ScatterOp::kUpdate && !Scalar) {
    std::memcpy(dst, src, n * sizeof(E));
  } else {
    const E s = src[0];
    for (int64_t c = 0; c < n; ++c) dst[c] = scatter_combine<Op>(dst[c], Scalar ? s : src[c]);
  }
}

// Where row r of the table starts: a buffer holding rows from `first` on
// (a whole table, or one part of a partitioned table)...
template <typename E>
struct TableRows {
  E* base;
  int64_t first;
  int64_t row_width;
  E* row(int64_t r) const { return base + (r - first) * row_width; }
};

// ...or, for the updates of one call, the address of each update's row
// (computed once for all threads): row(i) is update i's row.
template <typename E>
struct PointerRows {
  E* const* rows;
  E* row(int64_t i) const { return rows[i]; }
};

// The indices 0, 1, 2, ... (positions into PointerRows).
struct Positions {
  int64_t operator[](int64_t i) const { return i; }
};

// Rows [r0, r1) of the table, reached through `rows`: the unit of work of
// one thread (times a column range).
template <typename Rows>
struct RowRange {
  Rows rows;
  int64_t r0, r1;
};

// Appends `pieces` equal ranges covering rows [r0, r1).
template <typename Rows>
void split_rows(const Rows& rows, int64_t r0, int64_t r1, int64_t pieces,
                std::vector<RowRange<Rows>>& out) {
  const int64_t n = r1 - r0;
  for (int64_t p = 0; p < pieces; ++p) {
    out.push_back({rows, r0 + n * p / pieces, r0 + n * (p + 1) / pieces});
  }
}

// Applies, in order, the indices at positions order[0, n) (all in the
// range whose rows `table` reaches) to columns [c0, c1).
template <ScatterOp Op, bool Scalar, typename E, typename Rows, typename Index>
void scatter_shard(const Rows& table, int64_t row_width, const Index* indices, const int64_t* order,
                   int64_t n, const E* updates, int64_t c0, int64_t c1) {
  constexpr int64_t kAhead = ScatterTuning::kPrefetchDistance;
  const int64_t prefetch_bytes = std::min<int64_t>((c1 - c0) * sizeof(E), 256);
  for (int64_t j = 0; j < n; ++j) {
    if (j + kAhead < n) {
      // The table row, and the update row: rows of a range are not
      // consecutive updates, so the hardware prefetcher misses them.
      const int64_t ahead = order[j + kAhead];
      const char* line = reinterpret_cast<const char*>(table.row(indices[ahead]) + c0);
      for (int64_t b = 0; b < prefetch_bytes; b += 64) __builtin_prefetch(line + b, 1);
      if constexpr (!Scalar) {
        const char* src = reinterpret_cast<const char*>(updates + ahead * row_width + c0);
        for (int64_t b = 0; b < prefetch_bytes; b += 64) __builtin_prefetch(src + b, 0);
      }
    }
    const int64_t i = order[j];
    const E* src = Scalar ? updates : updates + i * row_width + c0;
    apply_row<Op, Scalar>(table.row(indices[i]) + c0, src, c1 - c0);
  }
}

// The same over every index, all in the one range (no order list).
// `indices[i]` may be a pointer's element or a computed value.
template <ScatterOp Op, bool Scalar, typename E, typename Rows, typename Indices>
void scatter_all(const Rows& table, int64_t row_width, const Indices& indices, int64_t n,
                 const E* updates, int64_t c0, int64_t c1) {
  constexpr int64_t kAhead = ScatterTuning::kPrefetchDistance;
  const int64_t prefetch_bytes = std::min<int64_t>((c1 - c0) * sizeof(E), 256);
  for (int64_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      const char* line = reinterpret_cast<const char*>(table.row(indices[i + kAhead]) + c0);
      for (int64_t b = 0; b < prefetch_bytes; b += 64) __builtin_prefetch(line + b, 1);
    }
    const E* src = Scalar ? updates : updates + i * row_width + c0;
    apply_row<Op, Scalar>(table.row(indices[i]) + c0, src, c1 - c0);
  }
}

// Per-index scratch arrays kept by the calling thread from one call to the
// next. Allocating them afresh on each call costs more than the kernel once
// the heap is fragmented (a program that freed many small objects: malloc
// then sorts its free lists on every large request). Buffers above
// kMaxKept bytes are freed after the call. Slot tells apart buffers of one
// element type that are in use at the same time.
template <typename T, int Slot>
class ThreadScratch {
 public:
  static constexpr size_t kMaxKept = size_t{64} << 20;
  explicit ThreadScratch(size_t n) : buffer_(kept()) {
    if (buffer_.size() < n) buffer_.resize(n);
  }
  ~ThreadScratch() {
    if (buffer_.capacity() * sizeof(T) > kMaxKept) std::vector<T>().swap(buffer_);
  }
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  // (A lambda run on a pool thread must use this pointer: it would name
  // that thread's own buffer through kept().)
  T* data() { return buffer_.data(); }

 private:
  static std::vector<T>& kept() {
    thread_local std::vector<T> buffer;
    return buffer;
  }
  std::vector<T>& buffer_;
};

// The positions of the indices of each row range, in order (a stable
// counting sort): range k's are order[start[k], start[k + 1]).
struct RangeBuckets {
  std::vector<int64_t> start;
  const int64_t* order = nullptr;
};

// Fills `order` (n entries) and returns the buckets over it.
template <typename Rows, typename Index>
RangeBuckets bucket_by_range(const std::vector<RowRange<Rows>>& ranges, const Index* indices,
                             int64_t n, int64_t* order) {
  const int64_t num_ranges = static_cast<int64_t>(ranges.size());
  std::vector<int64_t> bounds;  // first row of ranges 1..
  for (int64_t k = 1; k < num_ranges; ++k) bounds.push_back(ranges[k].r0);
  auto range_of = [&](int64_t r) -> int64_t {
    if (bounds.size() <= 16) {
      int64_t k = 0;
      for (int64_t b : bounds) k += r >= b;
      return k;
    }
    return std::upper_bound(bounds.begin(), bounds.end(), r) - bounds.begin();
  };
  RangeBuckets buckets;
  ThreadScratch<int32_t, 0> scratch(static_cast<size_t>(n));
  int32_t* const which = scratch.data();
  std::vector<int64_t> next(static_cast<size_t>(num_ranges) + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    which[i] = static_cast<int32_t>(range_of(indices[i]));
    ++next[which[i] + 1];
  }
  for (int64_t k = 0; k < num_ranges; ++k) next[k + 1] += next[k];
  buckets.start = next;
  for (int64_t i = 0; i < n; ++i) order[next[which[i]]++] = i;
  buckets.order = order;
  return buckets;
}

// Each row range times each column range of `plan` is one shard, updated
// by one thread. With several row ranges, the indices are first bucketed
// by range, so that a thread reads only its own (in order: duplicates
// apply as in a serial loop).
template <ScatterOp Op, bool Scalar, typename E, typename Rows, typename Index>
void scatter_op(const std::vector<RowRange<Rows>>& ranges, const ShardPlan& plan, int64_t row_width,
                const Index* indices, int64_t num_indices, const E* updates) {
  ThreadScratch<int64_t, 0> order(ranges.size() > 1 ? static_cast<size_t>(num_indices) : 0);
  RangeBuckets buckets;
  if (ranges.size() > 1) buckets = bucket_by_range(ranges, indices, num_indices, order.data());
  auto run = [&](int64_t shard) {
    const int64_t k = shard / plan.col_parts;
    const int64_t c0 = std::min(row_width, shard % plan.col_parts * plan.col_chunk);
    const int64_t c1 = std::min(row_width, c0 + plan.col_chunk);
    if (c0 >= c1) return;
    if (ranges.size() == 1) {
      scatter_all<Op, Scalar>(ranges[0].rows, row_width, indices, num_indices, updates, c0, c1);
    } else {
      const int64_t first = buckets.start[k];
      scatter_shard<Op, Scalar>(ranges[k].rows, row_width, indices, buckets.order + first,
                                buckets.start[k + 1] - first, updates, c0, c1);
    }
  };
  const int64_t shards = static_cast<int64_t>(ranges.size()) * plan.col_parts;
  if (shards == 1) {
    run(0);
    return;
  }
  const double bytes_per_shard =
      num_indices * (3.0 * row_width * sizeof(E) + sizeof(Index)) / shards;
  eigen_device().parallelFor(shards, Eigen::TensorOpCost(bytes_per_shard, 0, 0),
                             [&](Eigen::Index first, Eigen::Index last) {
                               for (Eigen::Index s = first; s < last; ++s) run(s);
                             });
}

// fn(std::integral_constant<ScatterOp, op>) for the runtime op; complex
// types have no min/max.
template <typename E, typename Fn>
void with_op(ScatterOp op, Fn&& fn) {
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
}

template <typename E, typename Rows, typename Index>
void scatter_rows(ScatterOp op, const std::vector<RowRange<Rows>>& ranges, const ShardPlan& plan,
                  int64_t row_width, const Index* indices, int64_t num_indices, const E* updates,
                  bool updates_scalar) {
  with_op<E>(op, [&](auto kind) {
    if (updates_scalar) {
      scatter_op<decltype(kind)::value, true>(ranges, plan, row_width, indices, num_indices,
                                              updates);
    } else {
      scatter_op<decltype(kind)::value, false>(ranges, plan, row_width, indices, num_indices,
                                               updates);
    }
  });
}

}  // namespace varstate::kernels::cpu::scatter_internal

namespace varstate::kernels::cpu {

template <typename T, typename Index>
void scatter(ScatterOp op, T* table, int64_t rows, int64_t row_width, const Index* indices,
             int64_t num_indices, const T* updates, bool updates_scalar, bool deterministic) {
  using namespace scatter_internal;
  using E = eigen_t<T>;
  if (num_indices == 0 || row_width == 0) return;
  const ShardPlan plan = plan_shards(num_indices * row_width * int64_t{sizeof(E)}, row_width,
                                     sizeof(E), eigen_device().numThreads());
  std::vector<RowRange<TableRows<E>>> ranges;
  split_rows(TableRows<E>{reinterpret_cast<E*>(table), 0, row_width}, 0, rows, plan.row_parts,
             ranges);
  scatter_rows(op, ranges, plan, row_width, indices, num_indices,
               reinterpret_cast<const E*>(updates), updates_scalar);
}

template <typename T, typename Index>
void scatter_parts(ScatterOp op, T* const* parts, const int64_t* part_begin, int num_parts,
                   int64_t row_width, const Index* indices, int64_t num_indices, const T* updates,
                   bool updates_scalar) {
  using namespace scatter_internal;
  using E = eigen_t<T>;
  static_assert(sizeof(E) == sizeof(T));
  if (num_indices == 0 || row_width == 0) return;
  const int64_t rows = part_begin[num_parts];
  const ShardPlan plan = plan_shards(num_indices * row_width * int64_t{sizeof(E)}, row_width,
                                     sizeof(E), eigen_device().numThreads());
  const E* src = reinterpret_cast<const E*>(updates);
  if (plan.row_parts == 1) {
    // Threads split the columns only: the address of each update's row is
    // found once, then every thread walks the updates in order as on one
    // table.
    ThreadScratch<E*, 0> scratch(static_cast<size_t>(num_indices));
    E** const rows_of = scratch.data();
    const int64_t* bounds = part_begin + 1;
    auto locate = [&](Eigen::Index first, Eigen::Index last) {
      for (int64_t i = first; i < last; ++i) {
        const int64_t r = static_cast<int64_t>(indices[i]);
        int64_t k = 0;  // branch-free for a few parts: rows are random
        if (num_parts <= 32) {
          for (int j = 0; j + 1 < num_parts; ++j) k += r >= bounds[j];
        } else {
          k = std::upper_bound(bounds, bounds + num_parts - 1, r) - bounds;
        }
        rows_of[i] = reinterpret_cast<E*>(parts[k]) + (r - part_begin[k]) * row_width;
      }
    };
    locate(0, num_indices);
    with_op<E>(op, [&](auto kind) {
      auto run = [&](int64_t cp) {
        const int64_t c0 = std::min(row_width, cp * plan.col_chunk);
        const int64_t c1 = std::min(row_width, c0 + plan.col_chunk);
        if (c0 >= c1) return;
        if (updates_scalar) {
          scatter_all<decltype(kind)::value, true>(PointerRows<E>{rows_of}, row_width, Positions{},
                                                   num_indices, src, c0, c1);
        } else {
          scatter_all<decltype(kind)::value, false>(PointerRows<E>{rows_of}, row_width, Positions{},
                                                    num_indices, src, c0, c1);
        }
      };
      if (plan.col_parts == 1) return run(0);
      eigen_device().parallelFor(
          plan.col_parts,
          Eigen::TensorOpCost(num_indices * 3.0 * row_width * sizeof(E) / plan.col_parts, 0, 0),
          [&](Eigen::Index first, Eigen::Index last) {
            for (Eigen::Index cp = first; cp < last; ++cp) run(cp);
          });
    });
    return;
  }
  // Each part is a table of its own: the plan's row ranges are shared out
  // among the parts by their row counts, at least one each.
  std::vector<RowRange<TableRows<E>>> ranges;
  for (int k = 0; k < num_parts; ++k) {
    const int64_t r0 = part_begin[k], r1 = part_begin[k + 1];
    const int64_t pieces =
        rows == 0 ? 1 : std::max<int64_t>(1, (plan.row_parts * (r1 - r0) + rows - 1) / rows);
    split_rows(TableRows<E>{reinterpret_cast<E*>(parts[k]), r0, row_width}, r0, r1, pieces, ranges);
  }
  scatter_rows(op, ranges, plan, row_width, indices, num_indices, src, updates_scalar);
}

}  // namespace varstate::kernels::cpu

// Explicit instantiations for storage type T, inside namespace
// varstate::kernels::cpu.
#define VARSTATE_INSTANTIATE_CPU_SCATTER(E, T)                                                \
  template void scatter<T, int32_t>(ScatterOp, T*, int64_t, int64_t, const int32_t*, int64_t, \
                                    const T*, bool, bool);                                    \
  template void scatter<T, int64_t>(ScatterOp, T*, int64_t, int64_t, const int64_t*, int64_t, \
                                    const T*, bool, bool);                                    \
  template void scatter_parts<T, int64_t>(ScatterOp, T* const*, const int64_t*, int, int64_t, \
                                          const int64_t*, int64_t, const T*, bool);
