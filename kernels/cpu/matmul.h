// CPU matrix product with Eigen's dense GEMM, built per instruction set
// (matmul_rows.h), rows split over the Eigen thread pool for all but tiny
// products.
#pragma once

#include <cstdint>

namespace varstate::kernels::cpu {

// c[m,n] = op(a) * op(b), row-major, where op(a) is [m,k] (a stored [k,m]
// when transpose_a) and op(b) is [k,n] (b stored [n,k] when transpose_b).
// Defined for float, double, half, bfloat16, complex64, complex128, int32;
// half and bfloat16 are summed in float and rounded once.
template <typename T>
void matmul(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
            bool transpose_b);

}  // namespace varstate::kernels::cpu
