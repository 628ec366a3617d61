// Tensor-level test helpers: seeded random tensors of any numeric dtype,
// element-wise comparison with the per-dtype tolerance of test_util.h, and
// bit-for-bit comparison.
#pragma once

#include <cstring>
#include <string>

#include "device_fixture.h"
#include "test_util.h"
#include "varstate/tensor.h"

namespace varstate::testing {

// A tensor of small integer values in [lo, hi] (exact in every dtype), on
// the binary's test device (test/device_fixture.h): the test bodies that
// build their inputs with it run their ops there.
inline Tensor random_tensor(DType dtype, const TensorShape& shape, uint64_t seed, int lo = -8,
                            int hi = 8) {
  int64_t n = shape.num_elements();
  return dispatch_numeric(dtype, "random_tensor", [&](auto tag) {
    using T = decltype(tag);
    Tensor t = Tensor::from_vector<T>(random_ints<T>(n, seed, lo, hi), shape);
    return t.to(test_device());
  });
}

// Empty string when equal within tolerance, else a description of the first
// difference (for INFO/CHECK messages).
inline std::string compare_tensors(const Tensor& actual, const Tensor& expected) {
  if (actual.dtype() != expected.dtype()) {
    return "dtype " + std::string(dtype_name(actual.dtype())) + " vs " +
           std::string(dtype_name(expected.dtype()));
  }
  if (actual.shape() != expected.shape()) {
    return "shape " + actual.shape().to_string() + " vs " + expected.shape().to_string();
  }
  Tensor a = actual.to_host(), e = expected.to_host();
  return dispatch_all(actual.dtype(), "compare_tensors", [&](auto tag) -> std::string {
    using T = decltype(tag);
    const T* pa = static_cast<const T*>(a.raw_data());
    const T* pe = static_cast<const T*>(e.raw_data());
    for (int64_t i = 0; i < a.num_elements(); ++i) {
      bool same;
      if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
        same = pa[i] == pe[i];
      } else {
        same = close(pa[i], pe[i]);
      }
      if (!same) {
        return "element " + std::to_string(i) + " differs: " + a.to_string().substr(0, 200) +
               " vs " + e.to_string().substr(0, 200);
      }
    }
    return std::string();
  });
}

// True when both have the same dtype, shape and bytes.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.nbytes() == 0) return true;  // no buffers to compare (memcmp wants pointers)
  Tensor x = a.to_host(), y = b.to_host();
  return std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

}  // namespace varstate::testing
