// One scalar conversion between element types with tf.cast's rules, shared
// by the CPU cast kernel (on storage types) and the CUDA cast kernel (on its
// arithmetic types: __half, __nv_bfloat16, cuda::std::complex). To bool is
// "!= 0"; complex to real keeps the real part; 16-bit floats convert through
// float and round to nearest. Floats to integers truncate toward zero and
// saturate: NaN gives 0, values beyond the integer type's range (infinities
// included) give its minimum or maximum. The same on the CPU and the GPU
// (a bare static_cast would give x86's INT_MIN for NaN on the host, and is
// undefined for values out of range).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/dtype_traits.h"
#include "kernels/elementwise_functors.h"
#include "kernels/host16.h"
#include "varstate/dtype.h"

namespace varstate::kernels {

// Widens a stored value to the arithmetic type used for conversion:
// 16-bit floats -> float, others unchanged.
template <typename T>
VARSTATE_HD auto widen(const T& v) {
  if constexpr (kIsHalfLike<T>) {
    return host16_to_float(v);
  } else if constexpr (kIsDeviceHalf<T>) {
    return device_half_to_float(v);
  } else {
    return v;
  }
}

// The real part of a widened value (the value itself if it is real).
template <typename W>
VARSTATE_HD auto real_part(const W& v) {
  if constexpr (kIsComplex<W>) {
    return v.real();
  } else {
    return v;
  }
}

// A real floating value x converted to the integer type To (not bool):
// truncated toward zero, NaN -> 0, saturated to To's range.
template <typename To, typename R>
VARSTATE_HD To saturating_to_integer(R x) {
  static_assert(std::is_integral_v<To> && !std::is_same_v<To, bool>);
  static_assert(std::is_floating_point_v<R>);
  constexpr int kValueBits = static_cast<int>(sizeof(To) * 8) - (std::is_signed_v<To> ? 1 : 0);
  // 2^kValueBits, one past To's maximum: a power of two, exact in R.
  constexpr R kEnd = static_cast<R>(uint64_t{1} << (kValueBits - 1)) * R(2);
  constexpr To kMax =
      static_cast<To>((uint64_t{1} << (kValueBits - 1)) - 1 + (uint64_t{1} << (kValueBits - 1)));
  constexpr To kMin = std::is_signed_v<To> ? static_cast<To>(-kMax - 1) : To{0};
  if (x != x) return To{0};
  if (x >= kEnd) return kMax;
  // Signed: -2^kValueBits is kMin itself; anything below truncates past it.
  // Unsigned: x <= -1 saturates to 0, (-1, 0] truncates to 0.
  if (std::is_signed_v<To> ? x <= -kEnd : x <= R(-1)) return kMin;
  return static_cast<To>(x);
}

// Converts a widened value (widen()'s result) to To.
template <typename To, typename W>
VARSTATE_HD To convert_widened(const W& v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != W{};
  } else if constexpr (kIsComplex<To>) {
    using R = typename To::value_type;
    if constexpr (kIsComplex<W>) {
      return To(static_cast<R>(v.real()), static_cast<R>(v.imag()));
    } else {
      return To(static_cast<R>(v), R{});
    }
  } else if constexpr (kIsHalfLike<To>) {
    return host16_from_float<To>(static_cast<float>(real_part(v)));
  } else if constexpr (kIsDeviceHalf<To>) {
    return device_half_from_float<To>(static_cast<float>(real_part(v)));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<decltype(real_part(v))>) {
    return saturating_to_integer<To>(real_part(v));
  } else {
    return static_cast<To>(real_part(v));
  }
}

template <typename To, typename From>
VARSTATE_HD To cast_value(const From& from) {
  return convert_widened<To>(widen(from));
}

}  // namespace varstate::kernels
