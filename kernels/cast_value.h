// One scalar conversion between element types with tf.cast's rules, shared
// by the CPU cast kernel (on storage types) and the CUDA cast kernel (on its
// arithmetic types: __half, __nv_bfloat16, cuda::std::complex). To bool is
// "!= 0"; complex to real keeps the real part; 16-bit floats convert through
// float and round to nearest.
#pragma once

#include <type_traits>

#include "kernels/dtype_traits.h"
#include "kernels/elementwise_functors.h"
#include "varstate/dtype.h"

namespace varstate::kernels {

// Widens a stored value to the arithmetic type used for conversion:
// 16-bit floats -> float, others unchanged.
template <typename T>
VARSTATE_HD auto widen(const T& v) {
  if constexpr (kIsHalfLike<T>) {
    return static_cast<float>(v);
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
    return To(static_cast<float>(real_part(v)));
  } else if constexpr (kIsDeviceHalf<To>) {
    return device_half_from_float<To>(static_cast<float>(real_part(v)));
  } else {
    return static_cast<To>(real_part(v));
  }
}

template <typename To, typename From>
VARSTATE_HD To cast_value(const From& from) {
  return convert_widened<To>(widen(from));
}

}  // namespace varstate::kernels
