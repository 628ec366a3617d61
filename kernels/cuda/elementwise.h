// CUDA element-wise kernels, the twins of kernels/cpu/elementwise.h: same
// contracts, same scalar semantics (kernels/elementwise_functors.h).
// Asynchronous: each call enqueues its kernel on `stream` and returns.
//
// Same-shape and scalar operands take a vectorized path (16-byte loads and
// stores, grid-stride); general broadcasts take a strided path over up to
// BinaryGeometry::kMaxDims dimensions with 64-bit indexing.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace varstate::kernels::cuda {

// out[i] = op(a[ia(i)], b[ib(i)]) for the arithmetic ops (result type T).
// All pointers are device memory of the stream's device. `error_flag` is a
// device int (may be null when binary_op_can_fail<T>(op) is false) that an
// element which fails sets to its KernelError; the caller reads it back.
// Throws InternalError if the launch fails. With `host_b` (not null), b is
// a scalar (layout kScalarB or kScalarBoth) whose value this call reads
// from host memory and passes to the kernel as an argument (`b` is then
// not read): a host scalar operand needs no copy to the device.
template <typename T>
void arithmetic(BinaryOp op, const T* a, const T* b, T* out, const BinaryGeometry& g,
                int* error_flag, cudaStream_t stream, const T* host_b = nullptr);

// The comparisons and logical ops (bool result).
template <typename T>
void predicate(BinaryOp op, const T* a, const T* b, bool* out, const BinaryGeometry& g,
               cudaStream_t stream);

// out[i] = op(in[i]) for i in [0, n): kNegative, kAbs (real types), kInvert.
template <typename T>
void unary(UnaryOp op, const T* in, T* out, int64_t n, cudaStream_t stream);

// out[i] = |in[i]| for complex in, real out.
template <typename T, typename R>
void complex_abs(const T* in, R* out, int64_t n, cudaStream_t stream);

}  // namespace varstate::kernels::cuda
