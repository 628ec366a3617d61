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

}  // namespace varstate::kernels
