// The device side of dirty-row tracking (runtime/dirty_rows.h):
// scatters on a GPU mark the rows they write in a byte map on the device
// (their index-check kernel, kernels/cuda/scatter.h); a take moves the
// marks out with take_marks. On the host the marks are atomics, read and
// cleared one by one (runtime/dirty_rows.cc, collect_byte_marks).
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace varstate::kernels::cuda {

// Enqueues, for i in [0, n): out[i] = marks[i]; marks[i] = 0, as one kernel:
// in stream order, a marking kernel enqueued before it has its marks moved
// to `out`, one enqueued after it leaves its marks for the next take, and
// none can mark between the read and the clear. Device memory of the
// stream's device; no host synchronization. Throws InternalError if the
// launch fails.
void take_marks(uint8_t* marks, uint8_t* out, int64_t n, cudaStream_t stream);

// Enqueues marks[indices[i]] = 1 for each i in [0, n) whose index is in
// [0, rows): the rows a sparse write into another buffer of the same rows
// touches (a training op's slots; validate_indices marks the variable's in
// its check pass). Device memory of the stream's device; no host
// synchronization. Defined for Index in {int32_t, int64_t}. Throws
// InternalError if the launch fails.
template <typename Index>
void mark_rows(const Index* indices, int64_t n, int64_t rows, uint8_t* marks, cudaStream_t stream);

}  // namespace varstate::kernels::cuda
