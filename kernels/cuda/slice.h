// CUDA strided copies for slicing, the twin of kernels/cpu/slice.h:
// instantiated per element size (kernels::Opaque<1|2|4|8|16>), 64-bit
// indexing, enqueued on `stream`.
#pragma once

#include "kernels/common.h"

namespace varstate::kernels::cuda {

// For each index tuple i over c.dims: dst[c.dst at i] = src[c.src at i].
// Device pointers of the stream's device; the views must not overlap.
// Throws InternalError if the launch fails.
template <typename T>
void strided_copy(const T* src, T* dst, const StridedCopy& c, cudaStream_t stream);

}  // namespace varstate::kernels::cuda
