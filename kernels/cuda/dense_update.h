// CUDA dense updates (assign / assign_add / assign_sub): vectorized
// (16-byte loads and stores where aligned), grid-stride kernels enqueued on
// the given stream. Asynchronous: returns once the work is enqueued.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace varstate::kernels::cuda {

// dst[i] (op)= src[src_is_scalar ? 0 : i] for i in [0, n), on `stream`. dst
// and src are device pointers of the stream's device. Defined for every
// numeric storage type. Throws InternalError if the launch fails.
template <typename T>
void dense_update(DenseUpdateOp op, T* dst, const T* src, int64_t n, bool src_is_scalar,
                  cudaStream_t stream);

}  // namespace varstate::kernels::cuda
