// The naive scatter reference shared by the kernel and runtime scatter
// tests (test/kernels/, test/runtime/): op(t, u) written independently of
// the kernels, and the serial loop that defines scatter, over the library's
// own op enum (kernels::ScatterOp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/common.h"
#include "test_util.h"
#include "varstate/dtype.h"

namespace varstate::testing {

using kernels::ScatterOp;

inline const char* op_name(ScatterOp op) {
  switch (op) {
    case ScatterOp::kUpdate:
      return "update";
    case ScatterOp::kAdd:
      return "add";
    case ScatterOp::kSub:
      return "sub";
    case ScatterOp::kMul:
      return "mul";
    case ScatterOp::kDiv:
      return "div";
    case ScatterOp::kMin:
      return "min";
    case ScatterOp::kMax:
      return "max";
  }
  return "?";
}

inline constexpr ScatterOp kScatterOps[] = {ScatterOp::kUpdate, ScatterOp::kAdd, ScatterOp::kSub,
                                            ScatterOp::kMul,    ScatterOp::kDiv, ScatterOp::kMin,
                                            ScatterOp::kMax};

// Whether `op` is defined on complex values (min and max are not).
inline bool defined_on_complex(ScatterOp op) {
  return op != ScatterOp::kMin && op != ScatterOp::kMax;
}

// The ops defined for T.
template <typename T>
std::vector<ScatterOp> ops_for() {
  std::vector<ScatterOp> ops;
  for (ScatterOp op : kScatterOps) {
    if (!is_complex<T>::value || defined_on_complex(op)) ops.push_back(op);
  }
  return ops;
}

// op(t, u) written independently of the kernels: 16-bit floats through
// float with one rounding, integers wrapping, INT_MIN / -1 == INT_MIN.
template <typename T>
T reference_op(ScatterOp op, T t, T u) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    const float a = static_cast<float>(t), b = static_cast<float>(u);
    switch (op) {
      case ScatterOp::kUpdate:
        return u;
      case ScatterOp::kAdd:
        return T(a + b);
      case ScatterOp::kSub:
        return T(a - b);
      case ScatterOp::kMul:
        return T(a * b);
      case ScatterOp::kDiv:
        return T(a / b);
      case ScatterOp::kMin:
        return b < a ? u : t;
      case ScatterOp::kMax:
        return a < b ? u : t;
    }
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<std::common_type_t<T, unsigned>>;
    switch (op) {
      case ScatterOp::kUpdate:
        return u;
      case ScatterOp::kAdd:
        return static_cast<T>(U(t) + U(u));
      case ScatterOp::kSub:
        return static_cast<T>(U(t) - U(u));
      case ScatterOp::kMul:
        return static_cast<T>(U(t) * U(u));
      case ScatterOp::kDiv:
        if (std::is_signed_v<T> && u == static_cast<T>(-1)) return static_cast<T>(U(0) - U(t));
        return static_cast<T>(t / u);
      case ScatterOp::kMin:
        return std::min(t, u);
      case ScatterOp::kMax:
        return std::max(t, u);
    }
  } else {
    switch (op) {
      case ScatterOp::kUpdate:
        return u;
      case ScatterOp::kAdd:
        return t + u;
      case ScatterOp::kSub:
        return t - u;
      case ScatterOp::kMul:
        return t * u;
      case ScatterOp::kDiv:
        return t / u;
      default:
        if constexpr (!is_complex<T>::value) {
          return op == ScatterOp::kMin ? (u < t ? u : t) : (t < u ? u : t);
        }
    }
  }
  return t;
}

// The serial loop that defines scatter.
template <typename T, typename Index>
void reference_scatter(ScatterOp op, T* table, int64_t row_width, const std::vector<Index>& indices,
                       const std::vector<T>& updates, bool updates_scalar) {
  for (size_t i = 0; i < indices.size(); ++i) {
    T* row = table + static_cast<int64_t>(indices[i]) * row_width;
    for (int64_t c = 0; c < row_width; ++c) {
      row[c] = reference_op(op, row[c], updates_scalar ? updates[0] : updates[i * row_width + c]);
    }
  }
}

}  // namespace varstate::testing
