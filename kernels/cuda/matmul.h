// GPU matrix product: cuBLAS (one handle per device, created on first use
// and bound to the device's stream) for the floating and complex dtypes, a
// plain CUDA kernel for int32. Asynchronous on `stream`.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace varstate::kernels::cuda {

// c[m,n] = op(a) * op(b), row-major, as kernels::cpu::matmul, on GPU
// `device` (whose stream is `stream`). float32 runs in full fp32 precision
// (no TF32), half and bfloat16 accumulate in float32. Throws InternalError
// when a cuBLAS or CUDA call fails, UnimplementedError for a dimension past
// 2^31 - 1.
template <typename T>
void matmul(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
            bool transpose_b, int device, cudaStream_t stream);

}  // namespace varstate::kernels::cuda
