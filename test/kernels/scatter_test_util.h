// Shared by the CPU and GPU scatter kernel tests: input generators (unique
// and heavily duplicated indices, op-appropriate update values) and
// byte-exact comparison. The naive reference loop is test/scatter_reference.h.
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
#include "scatter_reference.h"
#include "test_util.h"
#include "varstate/dtype.h"

namespace varstate::testing {

using kernels::ScatterOp;

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
