// The definition of MatmulRows (matmul_rows.h) for one instruction set,
// included once by each matmul_rows_*.cc, which first defines
//   VARSTATE_MATMUL_NS     the namespace of its build (matmul_avx2, ...)
//   VARSTATE_MATMUL_EIGEN  (optional) the name Eigen's namespace takes in
//                          this file.
// A file compiled with wider flags than the rest of the library must name
// VARSTATE_MATMUL_EIGEN and include nothing that includes Eigen before
// this header: Eigen's templates are inline functions, and the linker
// keeps one copy of each name for the whole library. Under another name,
// this file's AVX-512 copies can only be called from here.
// tools/check_isa_objects.sh checks the built objects for any other weak
// symbol. Internal.
#pragma once

#ifndef VARSTATE_MATMUL_NS
#error "define VARSTATE_MATMUL_NS before including matmul_rows_impl.h"
#endif

#ifdef VARSTATE_MATMUL_EIGEN
#define Eigen VARSTATE_MATMUL_EIGEN
#endif
#include <Eigen/Core>

#include "kernels/cpu/matmul_rows.h"

namespace varstate::kernels::cpu::VARSTATE_MATMUL_NS {

template <typename T>
using RowMajorMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <typename T>
void rows(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
          bool transpose_b, int64_t first, int64_t last) {
  Eigen::Map<const RowMajorMatrix<T>> lhs(a, transpose_a ? k : m, transpose_a ? m : k);
  Eigen::Map<const RowMajorMatrix<T>> rhs(b, transpose_b ? n : k, transpose_b ? k : n);
  Eigen::Map<RowMajorMatrix<T>> out(c, m, n);
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
}

#define VARSTATE_MATMUL_ROWS(T)                                                                 \
  template void rows<T>(const T*, const T*, T*, int64_t, int64_t, int64_t, bool, bool, int64_t, \
                        int64_t);

}  // namespace varstate::kernels::cpu::VARSTATE_MATMUL_NS
