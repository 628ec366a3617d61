// CPU dense updates (assign / assign_add / assign_sub) with Eigen, spread
// over the Eigen thread pool above kParallelBytesThreshold.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace varstate::kernels::cpu {

// dst[i] (op)= src[src_is_scalar ? 0 : i] for i in [0, n). dst and src must
// not overlap unless they are equal. Defined for every numeric storage type.
template <typename T>
void dense_update(DenseUpdateOp op, T* dst, const T* src, int64_t n, bool src_is_scalar);

}  // namespace varstate::kernels::cpu
