// CPU element-wise kernels: binary arithmetic, comparisons and logical ops
// with NumPy broadcasting (BinaryGeometry), and unary ops. Work above
// kParallelBytesThreshold is split over the Eigen thread pool. The scalar
// semantics are kernels/elementwise_functors.h, shared with the CUDA twins.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace varstate::kernels::cpu {

// out[i] = op(a[ia(i)], b[ib(i)]) for the n output elements of `g`, for
// the ops binary_op_supports<T> allows that produce T (arithmetic). Returns
// a KernelError: kIntegerDivisionByZero / kNegativeIntegerPower when some
// element failed (its output is unspecified), else kKernelOk.
template <typename T>
int arithmetic(BinaryOp op, const T* a, const T* b, T* out, const BinaryGeometry& g);

// The same for the comparisons and logical ops, which produce bool.
template <typename T>
void predicate(BinaryOp op, const T* a, const T* b, bool* out, const BinaryGeometry& g);

// One operand of multiply_add, for an output of rows x k elements (row
// major): an element per output element, one value for all, or one value
// per row.
enum class OperandKind {
  kElements,
  kScalar,
  kColumn
};
template <typename T>
struct MultiplyAddOperand {
  const T* data;
  OperandKind kind;
};

// out[i] = x(i) * y(i) + z(i) * w(i) over rows x k elements, each product
// rounded to T before the sum (no contraction into an FMA): bitwise the
// two multiplies and the add. float and double. out is a fresh buffer.
template <typename T>
void multiply_add(const MultiplyAddOperand<T>& x, const MultiplyAddOperand<T>& y,
                  const MultiplyAddOperand<T>& z, const MultiplyAddOperand<T>& w, T* out,
                  int64_t rows, int64_t k);

// out[i] = op(in[i]) for i in [0, n): kNegative, kAbs (real types), kInvert.
template <typename T>
void unary(UnaryOp op, const T* in, T* out, int64_t n);

// out[i] = |in[i]|, the magnitude of a complex number, as its real type.
template <typename T, typename R>
void complex_abs(const T* in, R* out, int64_t n);

}  // namespace varstate::kernels::cpu
