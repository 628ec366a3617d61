// Definitions shared by the CPU and CUDA kernels. Kernels work on raw
// buffers: pointers, element counts and (CUDA) a stream; they know nothing of
// Tensor or Variable and do no validation — runtime/ validates shapes, dtypes
// and devices once, then calls a kernel with arguments that are known good.
// Element types are varstate's storage types (varstate/dtype.h); each backend maps
// them to its native arithmetic type.
#pragma once

#include <cstdint>
#include <type_traits>

// The CUDA runtime's stream handle, declared the way cuda_runtime_api.h does
// so that kernel headers need no CUDA include.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace varstate::kernels {

// body(std::integral_constant<int64_t, V>()) when value is one of kValues,
// else body(value): a loop whose bound is a common constant (a row of 16
// floats) compiles to straight vector moves.
template <int64_t... kValues, typename Body>
void with_constant(int64_t value, const Body& body) {
  const bool matched =
      ((value == kValues ? (body(std::integral_constant<int64_t, kValues>()), true) : false) ||
       ...);
  if (!matched) body(value);
}

// Dense element-wise updates: dst[i] = src[i], dst[i] += src[i], dst[i] -= src[i].
enum class DenseUpdateOp {
  kAssign,
  kAdd,
  kSub
};

// Sparse row updates: table[indices[i], :] (op)= updates[i, :]. kUpdate
// overwrites; the others combine the row with the update element-wise:
// +, -, *, /, and min/max (table = u < t ? u : t, t < u ? u : t; not defined
// for complex types). Integer +, -, * wrap around.
enum class ScatterOp {
  kUpdate,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMin,
  kMax
};

// Element-wise binary ops. Arithmetic ops produce the input type; the
// comparisons and logical ops produce bool.
//   kDiv       a / b on floating and complex types (truediv after the cast)
//   kFloorDiv  floor(a / b); integers round toward negative infinity
//   kFloorMod  a - floor(a / b) * b: the result has the sign of b
//   kPow       a ** b; integers by repeated squaring
enum class BinaryOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kFloorDiv,
  kFloorMod,
  kPow,
  kMaximum,
  kMinimum,
  kLess,
  kLessEqual,
  kGreater,
  kGreaterEqual,
  kEqual,
  kNotEqual,
  kLogicalAnd,
  kLogicalOr,
  kLogicalXor,
};

// Element-wise unary ops. kAbs of a complex type gives its real magnitude;
// kInvert is bitwise not on integers and logical not on bool.
enum class UnaryOp {
  kNegative,
  kAbs,
  kInvert
};

// Failures a kernel reports through its error word (never by aborting).
enum KernelError : int {
  kKernelOk = 0,
  kIntegerDivisionByZero = 1,
  kNegativeIntegerPower = 2,
};

// How the two operands of a binary op map onto the n output elements.
//  - kSame: both are contiguous with n elements.
//  - kScalarA / kScalarB / kScalarBoth: that operand is one element, the
//    other (if any) has n.
//  - kBroadcast: general NumPy broadcasting over `rank` (<= kMaxDims)
//    output dimensions; a stride of 0 repeats an operand along that dim.
struct BinaryGeometry {
  static constexpr int kMaxDims = 8;
  enum Layout {
    kSame,
    kScalarA,
    kScalarB,
    kScalarBoth,
    kBroadcast
  };
  Layout layout = kSame;
  int64_t n = 0;
  int rank = 0;
  int64_t dims[kMaxDims] = {};
  int64_t a_strides[kMaxDims] = {};
  int64_t b_strides[kMaxDims] = {};
};

// A strided view for slicing: element i of the `rank`-dimensional index
// space `dims` (row-major order) lives at `offset + sum(idx[d] * strides[d])`
// elements from the buffer start. Strides may be negative.
struct StridedView {
  static constexpr int kMaxDims = 8;
  int rank = 0;
  int64_t offset = 0;
  int64_t strides[kMaxDims] = {};
};

// An element of `Bytes` bytes moved as an opaque value: copy kernels are
// instantiated per element size, not per dtype.
template <int Bytes>
struct alignas(Bytes) Opaque {
  unsigned char bytes[Bytes];
};

// One strided copy: `n` elements over `dims`, read through `src`, written
// through `dst`.
struct StridedCopy {
  static constexpr int kMaxDims = 8;
  int rank = 0;
  int64_t n = 0;
  int64_t dims[kMaxDims] = {};
  StridedView src;
  StridedView dst;
};

}  // namespace varstate::kernels
