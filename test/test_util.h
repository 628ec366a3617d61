// Helpers shared by the tests: seeded random data for every storage type,
// per-dtype tolerances (kept here, in one place), and element comparison.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/dtype_traits.h"
#include "varstate/dtype.h"

namespace varstate::testing {

// Folder of test data files: $VARSTATE_TESTDATA_DIR when set (relocated
// test bundles), else the source tree's test/testdata.
inline std::string testdata_dir() {
  if (const char* env = std::getenv("VARSTATE_TESTDATA_DIR"); env && *env) return env;
  return VARSTATE_TESTDATA_DIR;
}

// Quick mode (VARSTATE_TEST_QUICK=1, set by tools/gpu_check.sh under
// compute-sanitizer): sweeps shrink to a representative subset of their
// configurations, keeping every code path.
inline bool quick_mode() {
  const char* env = std::getenv("VARSTATE_TEST_QUICK");
  return env != nullptr && *env != '\0' && *env != '0';
}

// n bytes of a pattern that depends on each byte's position (and `seed`),
// for checking that copies move every byte to its place.
inline std::vector<unsigned char> byte_pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 131 + seed) ^ (i >> 9));
  return v;
}

// The seed every randomized test starts from; printed by INFO/CAPTURE.
inline constexpr uint64_t kSeed = 20261122;

// The library's complex-type trait (kernels/dtype_traits.h), as a type.
template <typename T>
using is_complex = std::bool_constant<kernels::kIsComplex<T>>;

// Element as double (real part for complex types).
template <typename T>
double to_double(const T& v) {
  if constexpr (is_complex<T>::value) {
    return static_cast<double>(v.real());
  } else {
    return static_cast<double>(v);
  }
}
inline double to_double(half v) { return static_cast<float>(v); }
inline double to_double(bfloat16 v) { return static_cast<float>(v); }

// A value of type T from a small integer (exactly representable in every
// type, so integer-valued float tests can compare exactly).
template <typename T>
T from_int(int64_t i) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return T(static_cast<float>(i));
  } else if constexpr (is_complex<T>::value) {
    using R = typename T::value_type;
    return T(static_cast<R>(i), static_cast<R>(-i));
  } else {
    return static_cast<T>(i);
  }
}

// n small integer-valued elements in [lo, hi], from `seed`.
template <typename T>
std::vector<T> random_ints(size_t n, uint64_t seed, int lo = -8, int hi = 8) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<T> out(n);
  for (auto& v : out) {
    int x = dist(gen);
    if constexpr (std::is_unsigned_v<T>) x = x < 0 ? -x : x;
    v = from_int<T>(x);
  }
  return out;
}

// Relative tolerance for comparing float results of different
// implementations (CPU vs GPU, kernel vs reference); 0 for exact types.
template <typename T>
double tolerance() {
  if constexpr (std::is_same_v<T, half>)
    return 1e-2;
  else if constexpr (std::is_same_v<T, bfloat16>)
    return 1e-2;
  else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, std::complex<float>>)
    return 1e-5;
  else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, std::complex<double>>)
    return 1e-12;
  else
    return 0.0;
}

// True if a and b agree within tolerance<T>() (exactly for integers).
template <typename T>
bool close(const T& a, const T& b) {
  if constexpr (is_complex<T>::value) {
    const bool finite = std::isfinite(a.real()) && std::isfinite(a.imag()) &&
                        std::isfinite(b.real()) && std::isfinite(b.imag());
    if (!finite) {  // inf and NaN match only their own kind, part by part
      auto same = [](auto x, auto y) { return std::isnan(x) ? std::isnan(y) : x == y; };
      return same(a.real(), b.real()) && same(a.imag(), b.imag());
    }
    double tol = tolerance<T>();
    return std::abs(a - b) <= tol * std::max(1.0, static_cast<double>(std::abs(b)));
  } else {
    double x = to_double(a), y = to_double(b), tol = tolerance<T>();
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
    if (x == y) return true;  // also equal infinities
    return std::abs(x - y) <= tol * std::max(1.0, std::abs(y));
  }
}

}  // namespace varstate::testing
