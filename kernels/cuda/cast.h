// CUDA dtype conversion (tf.cast) with the rules of kernels/cast_value.h:
// one kernel per source type, writing through the destination dtype chosen
// at run time (so 15 kernels, not 15 x 15). Asynchronous on `stream`.
#pragma once

#include <cstdint>

#include "kernels/common.h"
#include "varstate/dtype.h"

namespace varstate::kernels::cuda {

// out[i] = cast_value<storage type of `to`>(in[i]) for i in [0, n). `to`
// is a numeric dtype (quantized ones are written as their integers) or
// bool; `out` holds n elements of it. Defined for every numeric storage
// type and bool as From. Throws InternalError if the launch fails.
template <typename From>
void cast(const From* in, DType to, void* out, int64_t n, cudaStream_t stream);

}  // namespace varstate::kernels::cuda
