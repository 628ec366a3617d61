// Element-wise math on tensors, as TensorFlow's operators on variables:
// arithmetic, comparisons, logical ops, unary ops and matmul.
//
// Binary ops broadcast their operands the NumPy way: shapes are aligned at
// the right, and each pair of dimensions must be equal or contain a 1
// ([3,1] + [1,4] -> [3,4]; a scalar goes with anything). Incompatible shapes
// throw ValueError naming both shapes (TensorFlow's graph builder raises it
// for static shapes; an eager call's shapes are always known). Errors only
// the values reveal (integer division by zero) are InvalidArgumentError, as
// TensorFlow's kernels raise them.
//
// Both operands must have the same dtype, else TypeError. A weakly typed
// operand (one built implicitly from C++ literals, see Tensor::weakly_typed)
// converts to the other's dtype first, so `x + 1` and `2.5 * x` work for a
// float tensor x. Each op accepts TensorFlow's dtypes for it (listed below);
// any other dtype throws TypeError naming the op and the dtype.
//
// Ops run on the first operand's device (a second operand elsewhere is
// copied there first); on a GPU they are enqueued on the device's stream and
// return without waiting, except integer floordiv/mod/pow, which wait to
// check their error flag. Results are new, strongly typed tensors; nothing
// is modified. All functions are thread-safe.
//
// The operators are non-template free functions taking const Tensor&, so
// any type with a conversion to Tensor (a Variable, a literal) works:
//   Tensor y = (x + 1) * w;      Tensor m = x < 0.5;
// `==` and `!=` are not overloaded: tensors compare by identity in
// TensorFlow; use equal() / not_equal() for element-wise comparison.
#pragma once

#include "varstate/tensor.h"

namespace varstate {

// x + y, x - y, x * y. All numeric dtypes (not quantized, bool or string).
Tensor add(const Tensor& x, const Tensor& y);
Tensor subtract(const Tensor& x, const Tensor& y);
Tensor multiply(const Tensor& x, const Tensor& y);

// x * y + z * w in one pass: bitwise add(multiply(x, y), multiply(z, w))
// (each product rounded to the dtype, then their sum: never a fused
// multiply-add instruction), with the same dtype rules, broadcasting and
// errors, but without the two intermediate tensors. For expressions such as
// a gradient with weight decay, errors * v + u * l2 (errors [n, 1], v and u
// [n, k], l2 a scalar). float32 and float64 operands of the same dtype on
// the CPU, each of the result's shape, a scalar, or (for a [n, k] result) a
// [n, 1] column, run as one pass; anything else runs as the two multiplies
// and the add.
Tensor multiply_add(const Tensor& x, const Tensor& y, const Tensor& z, const Tensor& w);

// True division (Python 3's x / y), always floating point: floating and
// complex inputs keep their dtype; integer inputs are cast first, int8,
// uint8, int16 and uint16 to float32, int32 and int64 (and the other
// integers) to float64. Division by zero follows IEEE (inf / nan).
Tensor divide(const Tensor& x, const Tensor& y);

// floor(x / y) on real dtypes; integers round toward negative infinity
// (-7 // 2 == -4). Complex inputs throw TypeError. Integer division by
// zero throws InvalidArgumentError("Integer division by zero").
Tensor floordiv(const Tensor& x, const Tensor& y);

// Floor modulo on real dtypes: x - floordiv(x, y) * y, which has the sign
// of y (-7 % 3 == 2, 7 % -3 == -2), so that floordiv(x, y) * y + mod(x, y)
// == x. Integer modulo by zero throws InvalidArgumentError.
Tensor mod(const Tensor& x, const Tensor& y);

// x to the power y: floating, complex and signed integer dtypes. Integers
// raised to a negative power throw InvalidArgumentError.
Tensor pow(const Tensor& x, const Tensor& y);

// Element-wise max / min of real dtypes; NaN wins.
Tensor maximum(const Tensor& x, const Tensor& y);
Tensor minimum(const Tensor& x, const Tensor& y);

// Comparisons, producing bool. Ordering: real dtypes; equality: numeric
// dtypes and bool.
Tensor less(const Tensor& x, const Tensor& y);
Tensor less_equal(const Tensor& x, const Tensor& y);
Tensor greater(const Tensor& x, const Tensor& y);
Tensor greater_equal(const Tensor& x, const Tensor& y);
Tensor equal(const Tensor& x, const Tensor& y);
Tensor not_equal(const Tensor& x, const Tensor& y);

// Logical ops on bool tensors (any other dtype: TypeError). logical_xor is
// (x | y) & ~(x & y).
Tensor logical_and(const Tensor& x, const Tensor& y);
Tensor logical_or(const Tensor& x, const Tensor& y);
Tensor logical_xor(const Tensor& x, const Tensor& y);
Tensor logical_not(const Tensor& x);

// -x: floating, complex and signed integer dtypes.
Tensor negative(const Tensor& x);
// |x| for floating and signed integer dtypes (same dtype); for complex
// dtypes the magnitude, as float32 (complex64) or float64 (complex128).
Tensor abs(const Tensor& x);
// Bitwise not of integer dtypes; logical not of bool.
Tensor invert(const Tensor& x);

// Matrix product of two rank-2 tensors: op(a) [m,k] times op(b) [k,n],
// where op transposes when asked. float16, bfloat16, float32, float64,
// complex64, complex128 and int32. cuBLAS on a GPU (float32 in full
// precision, no TF32), Eigen on the CPU. Throws ValueError naming both
// shapes when a rank is not 2 or the inner dimensions differ.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// Operators (see the file comment): + - * / as add/subtract/multiply/
// divide, % as mod (floor modulo), unary - as negative, ~ as invert (logical
// not for bool), < <= > >= as the comparisons, & | ^ as logical and/or/xor
// on bool tensors.
Tensor operator+(const Tensor& x, const Tensor& y);
Tensor operator-(const Tensor& x, const Tensor& y);
Tensor operator*(const Tensor& x, const Tensor& y);
Tensor operator/(const Tensor& x, const Tensor& y);
Tensor operator%(const Tensor& x, const Tensor& y);
Tensor operator-(const Tensor& x);
Tensor operator~(const Tensor& x);
Tensor operator<(const Tensor& x, const Tensor& y);
Tensor operator<=(const Tensor& x, const Tensor& y);
Tensor operator>(const Tensor& x, const Tensor& y);
Tensor operator>=(const Tensor& x, const Tensor& y);
Tensor operator&(const Tensor& x, const Tensor& y);
Tensor operator|(const Tensor& x, const Tensor& y);
Tensor operator^(const Tensor& x, const Tensor& y);

}  // namespace varstate
