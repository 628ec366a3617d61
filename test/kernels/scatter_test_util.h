// Shared by the CPU and GPU scatter tests: the naive reference loop, input
// generators (unique and heavily duplicated indices, op-appropriate update
// values) and the list of ops.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
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

// The ops defined for T (min/max are not defined for complex types).
template <typename T>
std::vector<ScatterOp> ops_for() {
  std::vector<ScatterOp> ops = {ScatterOp::kUpdate, ScatterOp::kAdd, ScatterOp::kSub,
                                ScatterOp::kMul, ScatterOp::kDiv};
  if (!is_complex<T>::value) {
    ops.push_back(ScatterOp::kMin);
    ops.push_back(ScatterOp::kMax);
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

// n distinct indices in [0, rows) (n <= rows), shuffled.
template <typename Index>
std::vector<Index> unique_indices(int64_t n, int64_t rows, uint64_t seed) {
  std::vector<Index> all(rows);
  std::iota(all.begin(), all.end(), Index{0});
  std::mt19937_64 gen(seed);
  std::shuffle(all.begin(), all.end(), gen);
  all.resize(n);
  return all;
}

// n indices into [0, rows), heavily duplicated: about half hit one of four
// hot rows (one of them much hotter), the rest are skewed towards low rows.
template <typename Index>
std::vector<Index> duplicate_indices(int64_t n, int64_t rows, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  const Index hot[4] = {Index(rows / 2), Index(rows - 1), Index(0), Index(rows / 3)};
  std::vector<Index> out(n);
  for (auto& x : out) {
    const double p = u01(gen);
    if (p < 0.25)
      x = hot[0];
    else if (p < 0.5)
      x = hot[1 + static_cast<int>(u01(gen) * 3) % 3];
    else
      x = static_cast<Index>(static_cast<int64_t>(rows * u01(gen) * u01(gen)) % rows);
  }
  return out;
}

// Update values for `op` whose effect is exact and independent of the order
// in which duplicates are applied (so that atomic GPU results can be compared
// exactly): small integers for add/sub, units (+-1, and +-i for complex) for
// mul/div, anything for update/min/max. With `general`, values that are not
// order-independent: wider ranges, and non-zero divisors.
template <typename T>
std::vector<T> updates_for(ScatterOp op, size_t n, uint64_t seed, bool general) {
  std::mt19937_64 gen(seed);
  std::vector<T> out(n);
  if (op == ScatterOp::kMul || op == ScatterOp::kDiv) {
    std::uniform_int_distribution<int> pick(0, 3);
    for (auto& v : out) {
      const int k = pick(gen);
      if constexpr (is_complex<T>::value) {
        using R = typename T::value_type;
        const T units[4] = {T(1, 0), T(-1, 0), T(0, 1), T(0, -1)};
        v = general ? T(R(k + 1), R(k % 2 ? -2 : 1)) : units[k];
      } else if constexpr (std::is_unsigned_v<T>) {
        v = from_int<T>(general ? k + 1 : 1);
      } else {
        const int units[4] = {1, -1, 1, -1};
        const int wide[4] = {1, -2, 3, -1};
        v = from_int<T>(general ? wide[k] : units[k]);
      }
    }
    return out;
  }
  const int range = (op == ScatterOp::kAdd || op == ScatterOp::kSub) && !general ? 2 : 8;
  return random_ints<T>(n, seed, -range, range);
}

// Byte-exact equality of two element arrays; returns the first differing
// element or -1.
template <typename T>
int64_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<int64_t>(i);
  }
  return a.size() == b.size() ? -1 : static_cast<int64_t>(std::min(a.size(), b.size()));
}

}  // namespace varstate::testing
