// Definition of kernels::cpu::matmul, included by the files that
// instantiate it (matmul.cc, matmul_half_complex.cc: split so the Eigen
// GEMM instantiations build in parallel). Internal.
#pragma once

#include <Eigen/Core>

#include "kernels/cpu/eigen_support.h"
#include "kernels/cpu/matmul.h"

namespace varstate::kernels::cpu {

template <typename E>
using RowMajorMatrix = Eigen::Matrix<E, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Eigen's dense GEMM (far cheaper to compile than the Tensor contraction),
// parallelized by splitting the rows of c over the Eigen thread pool.
template <typename T>
void matmul(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
            bool transpose_b) {
  using E = eigen_t<T>;
  Eigen::Map<const RowMajorMatrix<E>> lhs(reinterpret_cast<const E*>(a), transpose_a ? k : m,
                                          transpose_a ? m : k);
  Eigen::Map<const RowMajorMatrix<E>> rhs(reinterpret_cast<const E*>(b), transpose_b ? n : k,
                                          transpose_b ? k : n);
  Eigen::Map<RowMajorMatrix<E>> out(reinterpret_cast<E*>(c), m, n);
  auto rows = [&](Eigen::Index first, Eigen::Index last) {
    auto block = out.middleRows(first, last - first);
    if (transpose_a && transpose_b) {
      block.noalias() = lhs.transpose().middleRows(first, last - first) * rhs.transpose();
    } else if (transpose_a) {
      block.noalias() = lhs.transpose().middleRows(first, last - first) * rhs;
    } else if (transpose_b) {
      block.noalias() = lhs.middleRows(first, last - first) * rhs.transpose();
    } else {
      block.noalias() = lhs.middleRows(first, last - first) * rhs;
    }
  };
  // Below ~1M multiply-adds the pool's wake-up costs more than it saves.
  if (m * n * k < (int64_t{1} << 20) || m == 1) {
    rows(0, m);
    return;
  }
  const double row_bytes = static_cast<double>((k + n) * sizeof(T));
  eigen_device().parallelFor(m,
                             Eigen::TensorOpCost(row_bytes, static_cast<double>(n * sizeof(T)),
                                                 2.0 * static_cast<double>(n * k)),
                             rows);
}

}  // namespace varstate::kernels::cpu
