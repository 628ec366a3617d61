// The scalar semantics of every element-wise and scatter op, shared by the CPU and CUDA
// kernels so that both compute the same thing by construction.
//
// Functors work on a "compute type" C: the storage type itself, except that
// 16-bit floats compute in float (each backend widens on load and narrows on
// store) and complex numbers are std::complex on the host and
// cuda::std::complex on the device. Ops that can fail (integer division by
// zero, integers to negative powers) write a KernelError to *err and return
// a placeholder instead of trapping; err may be null for ops that cannot
// fail. Compiled as C++17 by nvcc and C++20 by the host compiler.
#pragma once

#include <math.h>

#include <complex>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/common.h"
#include "kernels/dtype_traits.h"
#include "varstate/dtype.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cuda/std/complex>
#define VARSTATE_HD __host__ __device__ __forceinline__
#else
#define VARSTATE_HD inline
#endif

namespace varstate::kernels {

// ---------------------------------------------------------------------------
// Which storage types each op is defined for (TensorFlow's type lists). The
// runtime checks these before dispatch (TypeError); kernels instantiate
// only the supported pairs.

template <typename T>
constexpr bool binary_op_supports(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
    case BinaryOp::kSub:
    case BinaryOp::kMul:
      return kIsNumeric<T>;
    case BinaryOp::kDiv:
      return kIsFloating<T> || kIsComplex<T>;
    case BinaryOp::kFloorDiv:
    case BinaryOp::kFloorMod:
    case BinaryOp::kMaximum:
    case BinaryOp::kMinimum:
    case BinaryOp::kLess:
    case BinaryOp::kLessEqual:
    case BinaryOp::kGreater:
    case BinaryOp::kGreaterEqual:
      return kIsReal<T>;
    case BinaryOp::kPow:
      return kIsFloating<T> || kIsComplex<T> || (kIsInteger<T> && std::is_signed_v<T>);
    case BinaryOp::kEqual:
    case BinaryOp::kNotEqual:
      return kIsNumeric<T> || std::is_same_v<T, bool>;
    case BinaryOp::kLogicalAnd:
    case BinaryOp::kLogicalOr:
    case BinaryOp::kLogicalXor:
      return std::is_same_v<T, bool>;
  }
  return false;
}

// True for the ops whose result is bool.
constexpr bool binary_op_is_predicate(BinaryOp op) { return op >= BinaryOp::kLess; }

// True when the op can report a KernelError for storage type T.
template <typename T>
constexpr bool binary_op_can_fail(BinaryOp op) {
  return kIsInteger<T> && (op == BinaryOp::kFloorDiv || op == BinaryOp::kFloorMod ||
                           (op == BinaryOp::kPow && std::is_signed_v<T>));
}

template <typename T>
constexpr bool unary_op_supports(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNegative:
    case UnaryOp::kAbs:
      return kIsFloating<T> || kIsComplex<T> || (kIsInteger<T> && std::is_signed_v<T>);
    case UnaryOp::kInvert:
      return kIsInteger<T> || std::is_same_v<T, bool>;
  }
  return false;
}

// ---------------------------------------------------------------------------
// Scalar helpers with one spelling on host and device.

// The C library's functions, qualified so that no overload in an enclosing
// namespace (varstate::pow and varstate::abs take Tensors) is picked up.
VARSTATE_HD float floor_of(float x) { return ::floorf(x); }
VARSTATE_HD double floor_of(double x) { return ::floor(x); }
VARSTATE_HD float fmod_of(float x, float y) { return ::fmodf(x, y); }
VARSTATE_HD double fmod_of(double x, double y) { return ::fmod(x, y); }
VARSTATE_HD float pow_of(float x, float y) { return ::powf(x, y); }
VARSTATE_HD double pow_of(double x, double y) { return ::pow(x, y); }
VARSTATE_HD float fabs_of(float x) { return ::fabsf(x); }
VARSTATE_HD double fabs_of(double x) { return ::fabs(x); }

// Complex power and magnitude: libcu++ on the device, libstdc++ on the host.
template <typename C>
VARSTATE_HD C complex_pow(const C& a, const C& b) {
#if defined(__CUDACC__)
  return ::cuda::std::pow(a, b);
#else
  return std::pow(a, b);
#endif
}
template <typename C>
VARSTATE_HD auto complex_abs_of(const C& a) {
#if defined(__CUDACC__)
  return ::cuda::std::abs(a);
#else
  return std::abs(a);
#endif
}

template <typename C>
VARSTATE_HD void report(int* err, int code) {
  if (err) *err = code;
}

// Integer arithmetic wraps around (two's complement), as TensorFlow's
// kernels do in practice, without signed overflow's undefined behaviour:
// integers compute in an unsigned type at least as wide as int (uint16 *
// uint16 would otherwise overflow int).
template <typename C>
inline constexpr bool kWrapsAround = std::is_integral_v<C> && !std::is_same_v<C, bool>;
template <typename C>
using WrapType =
    std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned,
                       std::make_unsigned_t<std::conditional_t<kWrapsAround<C>, C, int>>>;

// ---------------------------------------------------------------------------
// Binary functors: C operator()(C a, C b, int* err) (bool for predicates).

struct AddFn {
  template <typename C>
  VARSTATE_HD C operator()(C a, C b, int*) const {
    if constexpr (kWrapsAround<C>) {
      return C(WrapType<C>(a) + WrapType<C>(b));
    } else {
      return C(a + b);
    }
  }
};
struct SubFn {
  template <typename C>
  VARSTATE_HD C operator()(C a, C b, int*) const {
    if constexpr (kWrapsAround<C>) {
      return C(WrapType<C>(a) - WrapType<C>(b));
    } else {
      return C(a - b);
    }
  }
};
struct MulFn {
  template <typename C>
  VARSTATE_HD C operator()(C a, C b, int*) const {
    if constexpr (kWrapsAround<C>) {
      return C(WrapType<C>(a) * WrapType<C>(b));
    } else {
      return C(a * b);
    }
  }
};
struct DivFn {
  template <typename C>
  VARSTATE_HD C operator()(C a, C b, int*) const {
    return C(a / b);
  }
};

struct FloorDivFn {
  template <typename C>
  VARSTATE_HD C operator()(C a, C b, int* err) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) {
        report<C>(err, kIntegerDivisionByZero);
        return C(0);
      }
      if constexpr (std::is_signed_v<C>) {
        // -MIN / -1 overflows (and traps on x86); negate with wraparound.
        if (b == C(-1)) return C(std::make_unsigned_t<C>(0) - std::make_unsigned_t<C>(a));
        C q = C(a / b);
        C r = C(a % b);
        if (r != 0 && ((r < 0) != (b < 0))) q = C(q - 1);
        return q;
      } else {
        return C(a / b);
      }
    } else {
      return floor_of(a / b);
    }
  }
};

struct FloorModFn {
  template <typename C>
  VARSTATE_HD C operator()(C a, C b, int* err) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) {
        report<C>(err, kIntegerDivisionByZero);
        return C(0);
      }
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return C(0);
        C r = C(a % b);
        if (r != 0 && ((r < 0) != (b < 0))) r = C(r + b);
        return r;
      } else {
        return C(a % b);
      }
    } else {
      C r = fmod_of(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
  }
};

struct PowFn {
  template <typename C>
  VARSTATE_HD C operator()(C a, C b, int* err) const {
    if constexpr (std::is_integral_v<C>) {
      if (b < 0) {
        report<C>(err, kNegativeIntegerPower);
        return C(0);
      }
      // Wrapping arithmetic in 64-bit unsigned, truncated to C at the end.
      uint64_t result = 1, base = static_cast<uint64_t>(static_cast<int64_t>(a));
      for (uint64_t e = static_cast<uint64_t>(b); e != 0; e >>= 1) {
        if (e & 1) result *= base;
        base *= base;
      }
      return static_cast<C>(result);
    } else if constexpr (kIsComplex<C>) {
      return complex_pow(a, b);
    } else {
      return pow_of(a, b);
    }
  }
};

// NaN-propagating, as TensorFlow's Maximum/Minimum.
struct MaximumFn {
  template <typename C>
  VARSTATE_HD C operator()(C a, C b, int*) const {
    return (a != a || a > b) ? a : b;
  }
};
struct MinimumFn {
  template <typename C>
  VARSTATE_HD C operator()(C a, C b, int*) const {
    return (a != a || a < b) ? a : b;
  }
};

struct LessFn {
  template <typename C>
  VARSTATE_HD bool operator()(C a, C b, int*) const {
    return a < b;
  }
};
struct LessEqualFn {
  template <typename C>
  VARSTATE_HD bool operator()(C a, C b, int*) const {
    return a <= b;
  }
};
struct GreaterFn {
  template <typename C>
  VARSTATE_HD bool operator()(C a, C b, int*) const {
    return a > b;
  }
};
struct GreaterEqualFn {
  template <typename C>
  VARSTATE_HD bool operator()(C a, C b, int*) const {
    return a >= b;
  }
};
struct EqualFn {
  template <typename C>
  VARSTATE_HD bool operator()(C a, C b, int*) const {
    return a == b;
  }
};
struct NotEqualFn {
  template <typename C>
  VARSTATE_HD bool operator()(C a, C b, int*) const {
    return a != b;
  }
};
struct LogicalAndFn {
  VARSTATE_HD bool operator()(bool a, bool b, int*) const { return a && b; }
};
struct LogicalOrFn {
  VARSTATE_HD bool operator()(bool a, bool b, int*) const { return a || b; }
};
struct LogicalXorFn {
  VARSTATE_HD bool operator()(bool a, bool b, int*) const { return a != b; }
};

// Calls fn(Functor{}) for a binary op known at run time.
template <typename Fn>
decltype(auto) with_binary_functor(BinaryOp op, Fn&& fn) {
  switch (op) {
    case BinaryOp::kAdd:
      return fn(AddFn{}, std::integral_constant<BinaryOp, BinaryOp::kAdd>{});
    case BinaryOp::kSub:
      return fn(SubFn{}, std::integral_constant<BinaryOp, BinaryOp::kSub>{});
    case BinaryOp::kMul:
      return fn(MulFn{}, std::integral_constant<BinaryOp, BinaryOp::kMul>{});
    case BinaryOp::kDiv:
      return fn(DivFn{}, std::integral_constant<BinaryOp, BinaryOp::kDiv>{});
    case BinaryOp::kFloorDiv:
      return fn(FloorDivFn{}, std::integral_constant<BinaryOp, BinaryOp::kFloorDiv>{});
    case BinaryOp::kFloorMod:
      return fn(FloorModFn{}, std::integral_constant<BinaryOp, BinaryOp::kFloorMod>{});
    case BinaryOp::kPow:
      return fn(PowFn{}, std::integral_constant<BinaryOp, BinaryOp::kPow>{});
    case BinaryOp::kMaximum:
      return fn(MaximumFn{}, std::integral_constant<BinaryOp, BinaryOp::kMaximum>{});
    case BinaryOp::kMinimum:
      return fn(MinimumFn{}, std::integral_constant<BinaryOp, BinaryOp::kMinimum>{});
    case BinaryOp::kLess:
      return fn(LessFn{}, std::integral_constant<BinaryOp, BinaryOp::kLess>{});
    case BinaryOp::kLessEqual:
      return fn(LessEqualFn{}, std::integral_constant<BinaryOp, BinaryOp::kLessEqual>{});
    case BinaryOp::kGreater:
      return fn(GreaterFn{}, std::integral_constant<BinaryOp, BinaryOp::kGreater>{});
    case BinaryOp::kGreaterEqual:
      return fn(GreaterEqualFn{}, std::integral_constant<BinaryOp, BinaryOp::kGreaterEqual>{});
    case BinaryOp::kEqual:
      return fn(EqualFn{}, std::integral_constant<BinaryOp, BinaryOp::kEqual>{});
    case BinaryOp::kNotEqual:
      return fn(NotEqualFn{}, std::integral_constant<BinaryOp, BinaryOp::kNotEqual>{});
    case BinaryOp::kLogicalAnd:
      return fn(LogicalAndFn{}, std::integral_constant<BinaryOp, BinaryOp::kLogicalAnd>{});
    case BinaryOp::kLogicalOr:
      return fn(LogicalOrFn{}, std::integral_constant<BinaryOp, BinaryOp::kLogicalOr>{});
    case BinaryOp::kLogicalXor:
      return fn(LogicalXorFn{}, std::integral_constant<BinaryOp, BinaryOp::kLogicalXor>{});
  }
  return fn(AddFn{}, std::integral_constant<BinaryOp, BinaryOp::kAdd>{});
}

// ---------------------------------------------------------------------------
// Unary functors.

struct NegativeFn {
  template <typename C>
  VARSTATE_HD C operator()(C a) const {
    if constexpr (kWrapsAround<C>) {
      return C(WrapType<C>(0) - WrapType<C>(a));  // -MIN wraps to MIN
    } else {
      return C(-a);
    }
  }
};
struct AbsFn {
  template <typename C>
  VARSTATE_HD auto operator()(C a) const {
    if constexpr (kIsComplex<C>) {
      return complex_abs_of(a);  // the real magnitude
    } else if constexpr (std::is_floating_point_v<C>) {
      return fabs_of(a);
    } else {
      return a < 0 ? C(WrapType<C>(0) - WrapType<C>(a)) : a;  // |MIN| wraps to MIN
    }
  }
};
struct InvertFn {
  template <typename C>
  VARSTATE_HD C operator()(C a) const {
    if constexpr (std::is_same_v<C, bool>) {
      return !a;
    } else {
      return C(~a);
    }
  }
};

// ---------------------------------------------------------------------------
// Scatter: table element t combined with update u by a ScatterOp, shared by
// the CPU and CUDA scatter kernels. Integers wrap around (INT_MIN / -1 too).
// The device's 16-bit floats (__half, __nv_bfloat16) compute in float and
// round once, as the CPU's Eigen::half/bfloat16 arithmetic does, so that the
// deterministic paths of both backends agree bit for bit.

#if defined(__CUDACC__)
template <typename C>
inline constexpr bool kIsDeviceHalf = std::is_same_v<C, __half> || std::is_same_v<C, __nv_bfloat16>;
#else
template <typename C>
inline constexpr bool kIsDeviceHalf = false;
#endif

// Conversions of a kIsDeviceHalf value to and from float (round to nearest).
template <typename C>
VARSTATE_HD float device_half_to_float(C x) {
#if defined(__CUDACC__)
  if constexpr (std::is_same_v<C, __half>)
    return __half2float(x);
  else
    return __bfloat162float(x);
#else
  return static_cast<float>(x);
#endif
}
template <typename C>
VARSTATE_HD C device_half_from_float(float x) {
#if defined(__CUDACC__)
  if constexpr (std::is_same_v<C, __half>)
    return __float2half_rn(x);
  else
    return __float2bfloat16_rn(x);
#else
  return C(x);
#endif
}

template <ScatterOp Op, typename C>
VARSTATE_HD C scatter_combine(C t, C u) {
  if constexpr (Op == ScatterOp::kUpdate) {
    return u;
  } else if constexpr (kIsDeviceHalf<C>) {
    const float a = device_half_to_float(t), b = device_half_to_float(u);
    if constexpr (Op == ScatterOp::kAdd) return device_half_from_float<C>(a + b);
    if constexpr (Op == ScatterOp::kSub) return device_half_from_float<C>(a - b);
    if constexpr (Op == ScatterOp::kMul) return device_half_from_float<C>(a * b);
    if constexpr (Op == ScatterOp::kDiv) return device_half_from_float<C>(a / b);
    if constexpr (Op == ScatterOp::kMin) return b < a ? u : t;
    if constexpr (Op == ScatterOp::kMax) return a < b ? u : t;
  } else if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<std::common_type_t<C, unsigned>>;
    if constexpr (Op == ScatterOp::kAdd) return static_cast<C>(U(t) + U(u));
    if constexpr (Op == ScatterOp::kSub) return static_cast<C>(U(t) - U(u));
    if constexpr (Op == ScatterOp::kMul) return static_cast<C>(U(t) * U(u));
    if constexpr (Op == ScatterOp::kDiv) {
      if constexpr (std::is_signed_v<C>) {
        if (u == C(-1)) return static_cast<C>(U(0) - U(t));  // INT_MIN / -1 is UB
      }
      return static_cast<C>(t / u);
    }
    if constexpr (Op == ScatterOp::kMin) return u < t ? u : t;
    if constexpr (Op == ScatterOp::kMax) return t < u ? u : t;
  } else {
    if constexpr (Op == ScatterOp::kAdd) return t + u;
    if constexpr (Op == ScatterOp::kSub) return t - u;
    if constexpr (Op == ScatterOp::kMul) return t * u;
    if constexpr (Op == ScatterOp::kDiv) return t / u;
    if constexpr (Op == ScatterOp::kMin) return u < t ? u : t;
    if constexpr (Op == ScatterOp::kMax) return t < u ? u : t;
  }
}

}  // namespace varstate::kernels
