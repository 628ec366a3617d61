// CUDA row gather, the twin of kernels/cpu/gather.h: copies rows of a table,
// picked by index, into a dense output. Rows are opaque bytes; the widest
// word (16, 8, 4, 2 or 1 bytes) that divides the row size and both pointers'
// alignment is used.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace varstate::kernels::cuda {

struct IndexCheck;  // kernels/cuda/scatter.h

// Enqueues out[i, :] = table[indices[i], :] for i in [0, n), each row
// `row_bytes` bytes; all pointers are device memory of the stream's device.
// Precondition: every index is a valid row, checked by the caller (on the
// host), or with `check`: by validate_indices into `check` enqueued before
// on this stream (kernels/cuda/scatter.h's bounds protocol), the gather then
// writing nothing when a bad index was recorded. No host synchronization.
// Defined for Index in {int32_t, int64_t}. Throws InternalError if the
// launch fails.
template <typename Index>
void gather_rows(const void* table, int64_t row_bytes, const Index* indices, int64_t n, void* out,
                 cudaStream_t stream, const IndexCheck* check = nullptr);

// As gather_rows with int64 indices and no check, except that a row whose
// index is negative gets `fill` (a row of `row_bytes` bytes in device
// memory) or, with `fill` null, is left as it is (for rows written after).
void gather_rows_or_fill(const void* table, int64_t row_bytes, const int64_t* indices, int64_t n,
                         void* out, const void* fill, cudaStream_t stream);

}  // namespace varstate::kernels::cuda
