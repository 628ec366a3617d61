// The host's 16-bit floats (varstate::half, varstate::bfloat16) to and from
// float, inline, for the CPU kernels' loops.
//
// varstate/dtype.h converts out of line: a function call per element, which
// keeps a loop over 16-bit values from vectorizing. These are the same
// conversions (round to nearest even; NaN stays a quiet NaN) on
// kernels/philox.h's bit routines, written without branches so that the
// loops vectorize; random_test.cc checks them against dtype.h on every
// 16-bit pattern and on floats around every rounding boundary. With a call
// per element, float16 sparse Adagrad ran 6-13x slower than float32 on the
// 2-vCPU VM, and the element-wise math ops and casts 3-10x slower than
// their memory traffic (docs/performance.md).
#pragma once

#include "kernels/dtype_traits.h"
#include "kernels/philox.h"  // rng::bfloat16_bits, rng::half_bits, rng::half_value

namespace varstate::kernels {

template <typename T>
VARSTATE_HOST_DEVICE float host16_to_float(T x) {
  static_assert(kIsHalfLike<T>);
  if constexpr (std::is_same_v<T, ::varstate::half>) {
    return rng::half_value(x.bits);
  } else {
    return rng::bfloat16_value(x.bits);
  }
}

template <typename T>
VARSTATE_HOST_DEVICE T host16_from_float(float x) {
  static_assert(kIsHalfLike<T>);
  if constexpr (std::is_same_v<T, ::varstate::half>) {
    return T::from_bits(rng::half_bits(x));
  } else {
    return T::from_bits(rng::bfloat16_bits(x));
  }
}

// x rounded to the nearest float16 value (ties to even; 65520 and up to
// infinity) and widened back: host16_to_float(host16_from_float<half>(x))
// for every x, but that a NaN keeps its payload (the sign is x's either
// way), in float arithmetic instead of two conversions through the
// integer unit. The rounding is the float adder's: with a in [2^e,
// 2^(e+1)) and c = 1.5 * 2^(e+13), a + c lies in c's binade, whose unit is
// 2^(e-10), a float16's unit at a's binade; so a + c rounds a to a
// multiple of that unit, to nearest even (c is an even multiple of it),
// and subtracting c is exact. Below 2^-14 a float16's unit stays 2^-24 (c
// = 0.75), and from 2^15 it stays 2^5 (c = 1.5 * 2^28), where 65520 rounds
// to 65536, which no float16 holds: infinity. About a dozen vector
// operations, against twice that and the 16-bit lane shuffles of the two
// conversions; the 16-bit training ops round after every operation, as
// TensorFlow's Eigen does (training_functors.h's round_through).
VARSTATE_HOST_DEVICE float host16_round_to_half(float x) {
  const uint32_t u = rng::float_bits(x);
  const float a = rng::bits_float(u & 0x7fffffffu);
  float c = rng::bits_float(u & 0x7f800000u) * 12288.0f;  // 2^e * 1.5 * 2^13; NaN, inf: inf
  c = c < 0.75f ? 0.75f : c;
  c = c > 402653184.0f ? 402653184.0f : c;  // 1.5 * 2^28
  const float r = (a + c) - c;
  const uint32_t m = r >= 65536.0f ? 0x7f800000u : rng::float_bits(r);
  return rng::bits_float(m | (u & 0x80000000u));
}

}  // namespace varstate::kernels
