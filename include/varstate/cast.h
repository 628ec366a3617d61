// Element-wise dtype conversion (tf.cast): numeric <-> numeric and bool.
// Floats (and the real part of complex values) to integers truncate toward
// zero and saturate: NaN becomes 0, a value beyond the integer type's range
// (infinities included) becomes its minimum or maximum (300.0 -> int8 127,
// -1.5 -> uint8 0). Integers to narrower integers wrap (300 -> int8 44).
// Complex to real keeps the real part; anything to bool is "!= 0" (NaN ->
// true). String tensors do not convert (TypeError). Runs on the tensor's
// device, with the same results on the CPU and on a GPU.
#pragma once

#include "varstate/tensor.h"

namespace varstate {

Tensor cast_tensor(const Tensor& t, DType dtype);

}  // namespace varstate
