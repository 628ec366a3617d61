// Element-wise dtype conversion (tf.cast): numeric <-> numeric and bool.
// Floats to integers truncate toward zero; complex to real keeps the real
// part; anything to bool is "!= 0". String tensors do not convert
// (TypeError). Runs on the tensor's device.
#pragma once

#include "varstate/tensor.h"

namespace varstate {

Tensor cast_tensor(const Tensor& t, DType dtype);

}  // namespace varstate
