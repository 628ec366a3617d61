// CPU training ops: the optimizer updates of kernels/training_functors.h,
// dense (every element) and sparse (the rows named by indices), each one
// fused pass over the variable and its slots on the pool (the dense ones
// on Eigen's, the rows of a sparse one through for_ranges,
// kernels/cpu/parallel.h).
//
// Sparse updates combine duplicate indices first, as TensorFlow's
// optimizers do (_deduplicate_indexed_slices: the gradient rows of one
// index are summed, from zero, in their original order, rounding to T
// after each addition). The distinct rows are numbered in one linear pass
// of lookups, or, for a large batch that touches much of the table, by a
// radix sort of the ids (RowNumbering); a row's gradient rows are added in
// their original order (in one pass over the positions of the rows named
// three times or more). When the ids repeat rows, or number 1M or more, or
// the rows are narrow, the rows are split by owner over the pool, each
// part numbering and summing its own. Each distinct row is updated by
// exactly one thread, so results are bitwise the same run to run, for
// every thread count, numbering and instruction set the loops are built
// for; `deterministic` changes nothing on the CPU.
// Work below kParallelBytesThreshold (dense) or
// ParallelThresholds::sparse_training_bytes (sparse) runs on the calling
// thread.
#pragma once

#include <cstdint>

#include "kernels/training_functors.h"

namespace varstate::kernels::cpu {

// For every element i of the n-element variable: apply op with gradient
// grad[i] (kRowwiseAdagrad: the variable is n / row_width rows). The slots
// the op uses (TrainingSlots) are non-null and do not overlap. Preconditions
// are checked by runtime/. Defined for T in {half, bfloat16, float, double};
// op is not kLazyAdam (dense lazy Adam is Adam).
template <typename T>
void apply_dense(TrainingOp op, const TrainingHyper& hyper, const TrainingSlots<T>& slots,
                 const T* grad, int64_t n, int64_t row_width);

// The sparse update: grad is num_indices rows of row_width; indices are
// rows of the variable (rows x row_width), each in [0, rows) (runtime/
// checks them). kAdam follows TensorFlow's compat.v1 AdamOptimizer: every
// row's m and v decay and every row moves, the rows in the batch with their
// gradient (with num_indices == 0 too); kLazyAdam touches only the rows in
// the batch. Not for
// kGradientDescent (a scatter_sub). Index is int32_t or int64_t.
template <typename T, typename Index>
void apply_sparse(TrainingOp op, const TrainingHyper& hyper, const TrainingSlots<T>& slots,
                  int64_t rows, int64_t row_width, const Index* indices, int64_t num_indices,
                  const T* grad, bool deterministic);

// How a sparse update numbers the distinct rows of its ids: by sorting
// them (large batches that touch much of the table) or by looking each one
// up (training_ops.cc). kAuto decides per call; tests and benchmarks may
// force either way while no kernel runs. The results are the same.
enum class RowNumbering {
  kAuto,
  kSort,
  kLookUp
};
RowNumbering& sparse_row_numbering();

}  // namespace varstate::kernels::cpu
