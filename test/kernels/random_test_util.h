// Shared by the CPU and GPU random kernel tests: the distributions under
// test, the CPU kernels behind one call, and byte-exact comparison of
// outputs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/random.h"
#include "varstate/dtype.h"

namespace varstate::testing {

enum class Dist {
  kUniform,
  kNormal,
  kTruncated
};

// The distributions the kernels provide for T: integers only uniform.
template <typename T>
std::vector<Dist> dists() {
  if constexpr (std::is_integral_v<T>) {
    return {Dist::kUniform};
  } else {
    return {Dist::kUniform, Dist::kNormal, Dist::kTruncated};
  }
}

// Elements [first, first + n) of the CPU kernel's tensor for `dist`, with
// (a, b) as (minval, maxval) or (mean, stddev).
template <typename T>
std::vector<T> run_cpu(Dist dist, int64_t n, int64_t first, uint64_t seed, uint64_t seed2, T a,
                       T b) {
  namespace cpu = kernels::cpu;
  std::vector<T> out(n);
  if (dist == Dist::kUniform) {
    cpu::random_uniform<T>(out.data(), n, first, seed, seed2, a, b);
  } else if constexpr (!std::is_integral_v<T>) {
    if (dist == Dist::kNormal) {
      cpu::random_normal<T>(out.data(), n, first, seed, seed2, a, b);
    } else {
      cpu::truncated_normal<T>(out.data(), n, first, seed, seed2, a, b);
    }
  }
  return out;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The first element whose bytes differ, or the shorter size when one is a
// prefix of the other.
template <typename T>
size_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return i;
  }
  return std::min(a.size(), b.size());
}

}  // namespace varstate::testing
