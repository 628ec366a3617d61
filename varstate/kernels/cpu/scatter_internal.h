// The CPU scatter template, shared by the files that instantiate it for
// groups of dtypes (floating point in scatter.cc, scatter_int.cc,
// scatter_complex.cc).
#pragma once

#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "varstate/base/error.h"
#include "varstate/kernels/cpu/eigen_internal.h"
#include "varstate/kernels/cpu/scatter.h"

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

template <typename T> struct is_complex : std::false_type {};
template <typename T> struct is_complex<std::complex<T>> : std::true_type {};

// op(t, u) on Eigen arithmetic types; integers wrap around.
template <ScatterOp Op, typename E>
inline E combine(E t, E u) {
  if constexpr (Op == ScatterOp::kUpdate) {
    return u;
  } else if constexpr (std::is_integral_v<E>) {
    using U = std::make_unsigned_t<std::common_type_t<E, unsigned>>;
    if constexpr (Op == ScatterOp::kAdd) return static_cast<E>(U(t) + U(u));
    if constexpr (Op == ScatterOp::kSub) return static_cast<E>(U(t) - U(u));
    if constexpr (Op == ScatterOp::kMul) return static_cast<E>(U(t) * U(u));
    if constexpr (Op == ScatterOp::kDiv) {
      if constexpr (std::is_signed_v<E>) {
        if (u == E(-1)) return static_cast<E>(U(0) - U(t));  // INT_MIN / -1 is UB
      }
      return static_cast<E>(t / u);
    }
    if constexpr (Op == ScatterOp::kMin) return u < t ? u : t;
    if constexpr (Op == ScatterOp::kMax) return t < u ? u : t;
  } else {
    if constexpr (Op == ScatterOp::kAdd) return t + u;
    if constexpr (Op == ScatterOp::kSub) return t - u;
    if constexpr (Op == ScatterOp::kMul) return t * u;
    if constexpr (Op == ScatterOp::kDiv) return t / u;
    if constexpr (Op == ScatterOp::kMin) return u < t ? u : t;
    if constexpr (Op == ScatterOp::kMax) return t < u ? u : t;
  }
}

template <ScatterOp Op, bool Scalar, typename E>
inline void apply_row(E* __restrict dst, const E* __restrict src, int64_t n) {
  if constexpr (Op == ScatterOp::kUpdate && !Scalar) {
    std::memcpy(dst, src, n * sizeof(E));
  } else {
    const E s = src[0];
    for (int64_t c = 0; c < n; ++c) dst[c] = combine<Op>(dst[c], Scalar ? s : src[c]);
  }
}

// Where row r of the table starts: one buffer...
template <typename E>
struct TableRows {
  E* base;
  int64_t row_width;
  E* row(int64_t r) const { return base + r * row_width; }
};

// ...or the parts of a table split by rows: part k holds rows
// [begin[k], begin[k + 1]). Rows are random, so the part is found without
// data-dependent branches: a count of the boundaries at or below r for a
// few parts, a binary search for many.
template <typename E>
struct PartRows {
  E* const* bases;
  const int64_t* begin;
  int num_parts;
  int64_t row_width;
  E* row(int64_t r) const {
    int k = 0;
    if (num_parts <= 16) {
      for (int j = 1; j < num_parts; ++j) k += r >= begin[j];
    } else {
      k = static_cast<int>(std::upper_bound(begin + 1, begin + num_parts, r) - (begin + 1));
    }
    return bases[k] + (r - begin[k]) * row_width;
  }
};

// Applies, in order, the indices in [r0, r1) to columns [c0, c1).
template <ScatterOp Op, bool Scalar, typename E, typename Rows, typename Index>
void scatter_shard(const Rows& table, int64_t row_width, const Index* indices, int64_t n,
                   const E* updates, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  constexpr int64_t kAhead = ScatterTuning::kPrefetchDistance;
  const uint64_t span = static_cast<uint64_t>(r1 - r0);
  const int64_t prefetch_bytes = std::min<int64_t>((c1 - c0) * sizeof(E), 256);
  for (int64_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      const int64_t p = indices[i + kAhead];
      if (static_cast<uint64_t>(p - r0) < span) {
        const char* line = reinterpret_cast<const char*>(table.row(p) + c0);
        for (int64_t b = 0; b < prefetch_bytes; b += 64) __builtin_prefetch(line + b, 1);
      }
    }
    const int64_t r = indices[i];
    if (static_cast<uint64_t>(r - r0) >= span) continue;
    const E* src = Scalar ? updates : updates + i * row_width + c0;
    apply_row<Op, Scalar>(table.row(r) + c0, src, c1 - c0);
  }
}

// Rows [0, rows) of `table` (TableRows or PartRows).
template <ScatterOp Op, bool Scalar, typename E, typename Rows, typename Index>
void scatter_op(const Rows& table, int64_t rows, int64_t row_width, const Index* indices,
                int64_t num_indices, const E* updates) {
  const ShardPlan plan = plan_shards(num_indices * row_width * int64_t{sizeof(E)}, row_width,
                                     sizeof(E), eigen_device().numThreads());
  auto run = [&](int64_t shard) {
    const int64_t rp = shard / plan.col_parts, cp = shard % plan.col_parts;
    const int64_t r0 = rows * rp / plan.row_parts, r1 = rows * (rp + 1) / plan.row_parts;
    const int64_t c0 = std::min(row_width, cp * plan.col_chunk);
    const int64_t c1 = std::min(row_width, c0 + plan.col_chunk);
    if (r0 < r1 && c0 < c1) {
      scatter_shard<Op, Scalar>(table, row_width, indices, num_indices, updates, r0, r1, c0, c1);
    }
  };
  const int64_t shards = plan.row_parts * plan.col_parts;
  if (shards == 1) {
    run(0);
    return;
  }
  // Every shard scans all indices and updates its share of their rows.
  const double bytes_per_shard =
      num_indices * (sizeof(Index) + 3.0 * row_width * sizeof(E) / shards);
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
    case ScatterOp::kUpdate: return fn(std::integral_constant<ScatterOp, ScatterOp::kUpdate>{});
    case ScatterOp::kAdd: return fn(std::integral_constant<ScatterOp, ScatterOp::kAdd>{});
    case ScatterOp::kSub: return fn(std::integral_constant<ScatterOp, ScatterOp::kSub>{});
    case ScatterOp::kMul: return fn(std::integral_constant<ScatterOp, ScatterOp::kMul>{});
    case ScatterOp::kDiv: return fn(std::integral_constant<ScatterOp, ScatterOp::kDiv>{});
    case ScatterOp::kMin:
    case ScatterOp::kMax:
      if constexpr (is_complex<E>::value) {
        throw InvalidArgumentError("scatter_min/scatter_max: complex values are not ordered");
      } else if (op == ScatterOp::kMin) {
        return fn(std::integral_constant<ScatterOp, ScatterOp::kMin>{});
      } else {
        return fn(std::integral_constant<ScatterOp, ScatterOp::kMax>{});
      }
  }
}

template <typename E, typename Rows, typename Index>
void scatter_rows(ScatterOp op, const Rows& table, int64_t rows, int64_t row_width,
                  const Index* indices, int64_t num_indices, const E* updates,
                  bool updates_scalar) {
  if (num_indices == 0 || row_width == 0) return;
  with_op<E>(op, [&](auto kind) {
    if (updates_scalar) {
      scatter_op<decltype(kind)::value, true>(table, rows, row_width, indices, num_indices,
                                              updates);
    } else {
      scatter_op<decltype(kind)::value, false>(table, rows, row_width, indices, num_indices,
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
  scatter_rows(op, TableRows<E>{reinterpret_cast<E*>(table), row_width}, rows, row_width,
               indices, num_indices, reinterpret_cast<const E*>(updates), updates_scalar);
}

template <typename T, typename Index>
void scatter_parts(ScatterOp op, T* const* parts, const int64_t* part_begin, int num_parts,
                   int64_t row_width, const Index* indices, int64_t num_indices,
                   const T* updates, bool updates_scalar) {
  using namespace scatter_internal;
  using E = eigen_t<T>;
  static_assert(sizeof(E) == sizeof(T));
  scatter_rows(op,
               PartRows<E>{reinterpret_cast<E* const*>(parts), part_begin, num_parts, row_width},
               part_begin[num_parts], row_width, indices, num_indices,
               reinterpret_cast<const E*>(updates), updates_scalar);
}

}  // namespace varstate::kernels::cpu

// Explicit instantiations for storage type T, inside namespace
// varstate::kernels::cpu.
#define VARSTATE_INSTANTIATE_CPU_SCATTER(E, T)                                             \
  template void scatter<T, int32_t>(ScatterOp, T*, int64_t, int64_t, const int32_t*,        \
                                    int64_t, const T*, bool, bool);                         \
  template void scatter<T, int64_t>(ScatterOp, T*, int64_t, int64_t, const int64_t*,        \
                                    int64_t, const T*, bool, bool);                         \
  template void scatter_parts<T, int64_t>(ScatterOp, T* const*, const int64_t*, int,      \
                                          int64_t, const int64_t*, int64_t, const T*, bool);
