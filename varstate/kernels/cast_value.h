// One scalar conversion between storage types with tf.cast's rules: the CPU
// cast kernel (kernels/cpu/cast.cc) applies it. The CUDA kernel
// (kernels/cuda/cast.cu) implements the same rules with CUDA's types.
#pragma once

#include <complex>
#include <type_traits>

#include "varstate/base/dtype.h"

namespace varstate::kernels {

template <typename T> struct IsComplex : std::false_type {};
template <typename T> struct IsComplex<std::complex<T>> : std::true_type {};

// Widens a storage value to the arithmetic type used for conversion:
// half/bfloat16 -> float, others unchanged.
template <typename T>
auto widen(const T& v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return static_cast<float>(v);
  } else {
    return v;
  }
}

template <typename To, typename From>
To cast_value(const From& from) {
  auto v = widen(from);
  using W = decltype(v);
  if constexpr (std::is_same_v<To, bool>) {
    return v != W{};
  } else if constexpr (IsComplex<To>::value) {
    using R = typename To::value_type;
    if constexpr (IsComplex<W>::value) {
      return To(static_cast<R>(v.real()), static_cast<R>(v.imag()));
    } else {
      return To(static_cast<R>(v), R{});
    }
  } else {
    auto real = [&] {
      if constexpr (IsComplex<W>::value) return v.real(); else return v;
    }();
    if constexpr (std::is_same_v<To, half> || std::is_same_v<To, bfloat16>) {
      return To(static_cast<float>(real));
    } else {
      return static_cast<To>(real);
    }
  }
}

}  // namespace varstate::kernels
