// Shard planning and the bounds check; the scatter template is instantiated
// for floating-point types here and in scatter_int.cc / scatter_complex.cc.
#include <algorithm>
#include <vector>

#include "kernels/cpu/scatter_internal.h"

namespace varstate::kernels::cpu {
namespace scatter_internal {

ShardPlan plan_shards(int64_t work_bytes, int64_t row_width, int64_t elem_bytes, int threads) {
  ShardPlan plan;
  plan.col_chunk = row_width;
  if (threads <= 1 || work_bytes < kParallelBytesThreshold) return plan;
  // Split columns first: a column split balances the threads whatever the
  // distribution of indices. Rows take up the threads that are left.
  const int64_t row_bytes = row_width * elem_bytes;
  plan.col_parts = std::clamp<int64_t>(row_bytes / ScatterTuning::kMinColumnBytes, 1, threads);
  const int64_t line = std::max<int64_t>(1, 64 / elem_bytes);
  plan.col_chunk = (row_width + plan.col_parts - 1) / plan.col_parts;
  plan.col_chunk = (plan.col_chunk + line - 1) / line * line;
  plan.col_parts = (row_width + plan.col_chunk - 1) / plan.col_chunk;
  const int64_t row_threads = (threads + plan.col_parts - 1) / plan.col_parts;
  plan.row_parts = row_threads > 1 ? row_threads * ScatterTuning::kRowPartsPerThread : 1;
  return plan;
}

}  // namespace scatter_internal

namespace {

// First bad position in [lo, hi), or -1. Checks blocks branch-free (so the
// compiler vectorizes the test) and looks closer only at a failing block.
template <typename Index>
int64_t first_bad(const Index* indices, int64_t lo, int64_t hi, int64_t rows) {
  constexpr int64_t kBlock = 256;
  const uint64_t limit = static_cast<uint64_t>(rows);
  for (int64_t b = lo; b < hi; b += kBlock) {
    const int64_t e = std::min(hi, b + kBlock);
    bool bad = false;
    for (int64_t i = b; i < e; ++i) {
      bad |= static_cast<uint64_t>(static_cast<int64_t>(indices[i])) >= limit;
    }
    if (!bad) continue;
    for (int64_t i = b; i < e; ++i) {
      if (static_cast<uint64_t>(static_cast<int64_t>(indices[i])) >= limit) return i;
    }
  }
  return -1;
}

}  // namespace

template <typename Index>
int64_t validate_indices(const Index* indices, int64_t n, int64_t rows) {
  const int threads = eigen_device().numThreads();
  if (threads <= 1 || n * static_cast<int64_t>(sizeof(Index)) < kParallelBytesThreshold) {
    return first_bad(indices, 0, n, rows);
  }
  const int64_t parts = int64_t{threads} * 4;
  std::vector<int64_t> found(parts, -1);
  eigen_device().parallelFor(parts, Eigen::TensorOpCost(double(n) * sizeof(Index) / parts, 0, 0),
                             [&](Eigen::Index first, Eigen::Index last) {
                               for (Eigen::Index p = first; p < last; ++p) {
                                 found[p] =
                                     first_bad(indices, n * p / parts, n * (p + 1) / parts, rows);
                               }
                             });
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

}  // namespace varstate::kernels::cpu
