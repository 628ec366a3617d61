// Shard planning and the bounds check; the scatter template is instantiated
// for floating-point types here and in scatter_int.cc / scatter_complex.cc.
#include <algorithm>
#include <array>
#include <bit>
#include <vector>

#include "kernels/cpu/scatter_internal.h"

namespace varstate::kernels::cpu {
namespace scatter_internal {

ShardPlan plan_shards(int64_t work_bytes, int64_t row_width, int64_t elem_bytes, int threads,
                      int64_t threshold) {
  ShardPlan plan;
  plan.col_chunk = row_width;
  if (threads <= 1 || !worth_splitting(work_bytes, threshold)) {
    return plan;
  }
  // Rows first: a thread that owns whole rows reads and writes whole lines
  // and pages. Very wide rows are split by columns as well.
  const int64_t row_bytes = row_width * elem_bytes;
  plan.col_parts = std::clamp<int64_t>(row_bytes / ScatterTuning::kMinColumnBytes, 1, threads);
  const int64_t line = std::max<int64_t>(1, 64 / elem_bytes);
  plan.col_chunk = (row_width + plan.col_parts - 1) / plan.col_parts;
  plan.col_chunk = (plan.col_chunk + line - 1) / line * line;
  plan.col_parts = (row_width + plan.col_chunk - 1) / plan.col_chunk;
  plan.row_parts = (threads + plan.col_parts - 1) / plan.col_parts;
  const int64_t block_rows = (ScatterTuning::kMinBlockBytes + row_bytes - 1) / row_bytes;
  plan.block_shift = std::bit_width(static_cast<uint64_t>(block_rows - 1));
  return plan;
}

}  // namespace scatter_internal

bool scatter_streams_updates(ScatterOp op, bool updates_scalar, int64_t rows, int64_t row_bytes,
                             int64_t n, bool bases_aligned) {
  if (!kCanStream || op != ScatterOp::kUpdate || updates_scalar || row_bytes % 64 != 0 ||
      !bases_aligned || n * row_bytes < kStreamMinBytes) {
    return false;
  }
  // Rows of 256 bytes and more from tables of half the cache: few of them
  // fit beside everything else.
  const int64_t cache = last_level_cache_bytes();
  return rows * row_bytes > (row_bytes >= 256 ? cache / 2 : cache);
}

template <typename Index>
bool ids_repeat(const Index* ids, int64_t n) {
  // An open-addressing set of the sampled ids, twice the sample's size.
  constexpr int64_t kSlots = 2 * kRepeatSample;
  std::array<int64_t, kSlots> seen;
  seen.fill(-1);
  const int64_t samples = std::min(n, kRepeatSample);
  int64_t repeats = 0;
  for (int64_t s = 0; s < samples; ++s) {
    const auto id = static_cast<int64_t>(ids[s * n / samples]);
    auto slot = static_cast<int64_t>((static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> 53);
    while (seen[static_cast<size_t>(slot)] != -1 && seen[static_cast<size_t>(slot)] != id) {
      slot = (slot + 1) & (kSlots - 1);
    }
    repeats += seen[static_cast<size_t>(slot)] == id;
    seen[static_cast<size_t>(slot)] = id;
  }
  return repeats * 32 > samples;
}

template bool ids_repeat<int32_t>(const int32_t*, int64_t);
template bool ids_repeat<int64_t>(const int64_t*, int64_t);

template <typename Index>
int64_t scatter_split_threshold(ScatterOp op, int64_t work_bytes, int64_t table_bytes,
                                const RepeatsRows<Index>& repeats) {
  const ParallelThresholds& t = parallel_thresholds();
  if (op == ScatterOp::kUpdate || t.scatter_combining_bytes >= t.scatter_bytes ||
      work_bytes < t.scatter_combining_bytes ||
      table_bytes <= kSplitTableCaches * last_level_cache_bytes()) {
    return t.scatter_bytes;
  }
  return repeats() ? t.scatter_bytes : t.scatter_combining_bytes;
}

template int64_t scatter_split_threshold<int32_t>(ScatterOp, int64_t, int64_t,
                                                  const RepeatsRows<int32_t>&);
template int64_t scatter_split_threshold<int64_t>(ScatterOp, int64_t, int64_t,
                                                  const RepeatsRows<int64_t>&);

template <typename Index>
int64_t validate_indices(const Index* indices, int64_t n, int64_t rows) {
  using scatter_internal::first_bad;
  const int threads = eigen_device().numThreads();
  if (!worth_splitting(n * int64_t{sizeof(Index)}, parallel_thresholds().gather_bytes)) {
    return first_bad(indices, n, rows);
  }
  const int64_t parts = threads;
  std::vector<int64_t> found(parts, -1);
  auto check = [&](int64_t p) {
    const int64_t lo = n * p / parts, hi = n * (p + 1) / parts;
    const int64_t bad = first_bad(indices + lo, hi - lo, rows);
    found[p] = bad < 0 ? -1 : lo + bad;
  };
  run_shards(parts, check);
  for (int64_t f : found) {
    if (f >= 0) return f;
  }
  return -1;
}

template int64_t validate_indices<int32_t>(const int32_t*, int64_t, int64_t);
template int64_t validate_indices<int64_t>(const int64_t*, int64_t, int64_t);

VARSTATE_INSTANTIATE_CPU_SCATTER(kFloat, float)
VARSTATE_INSTANTIATE_CPU_SCATTER(kDouble, double)
VARSTATE_INSTANTIATE_CPU_SCATTER(kHalf, ::varstate::half)
VARSTATE_INSTANTIATE_CPU_SCATTER(kBFloat16, ::varstate::bfloat16)
VARSTATE_INSTANTIATE_CPU_SCATTER_SCALED(float)
VARSTATE_INSTANTIATE_CPU_SCATTER_SCALED(double)

}  // namespace varstate::kernels::cpu
