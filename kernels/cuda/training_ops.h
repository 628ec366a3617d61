// CUDA training ops: the twins of kernels/cpu/training_ops.h, with the
// same contract and the same arithmetic (kernels/training_functors.h; nvcc
// runs with --fmad=false), so that for float32 and float64 a GPU's result
// equals the CPU's bit for bit. Everything is enqueued on the given stream;
// no call synchronizes with the host.
//
// Sparse updates combine duplicate indices without a host round trip: the
// (index, position) pairs are radix-sorted (CUB, stable), and the first
// position of each run of one index updates its row once, summing the run's
// gradient rows in their original order. There is no atomic path: every
// sparse update is deterministic (bitwise the same run to run and for any
// grid size), so `deterministic` changes nothing.
#pragma once

#include <cstdint>

#include "kernels/cuda/scatter.h"
#include "kernels/training_functors.h"

namespace varstate::kernels::cuda {

// As cpu::apply_dense; pointers are device memory of the stream's device.
// Throws InternalError if a launch fails.
template <typename T>
void apply_dense(TrainingOp op, const TrainingHyper& hyper, const TrainingSlots<T>& slots,
                 const T* grad, int64_t n, int64_t row_width, cudaStream_t stream);

// As cpu::apply_sparse, for num_indices < 2^31 (InvalidArgumentError
// otherwise); `scratch` provides the sort's memory (about 16 bytes per
// index plus CUB's storage, and 8 bytes per row for kAdam), freed
// stream-ordered before the call returns. The indices are valid rows, or,
// with `check`, were validated into it on this stream first
// (kernels/cuda/scatter.h's bounds protocol): nothing is written when a bad
// index was recorded.
template <typename T, typename Index>
void apply_sparse(TrainingOp op, const TrainingHyper& hyper, const TrainingSlots<T>& slots,
                  int64_t rows, int64_t row_width, const Index* indices, int64_t num_indices,
                  const T* grad, bool deterministic, const ScratchAllocator& scratch,
                  cudaStream_t stream, const IndexCheck* check = nullptr);

}  // namespace varstate::kernels::cuda
