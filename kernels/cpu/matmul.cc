#include "kernels/cpu/matmul.h"

#include "kernels/cpu/eigen_internal.h"

namespace varstate::kernels::cpu {

template <typename T>
void matmul(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
            bool transpose_b) {
  using E = eigen_t<T>;
  using ConstMatrix = Eigen::TensorMap<Eigen::Tensor<const E, 2, Eigen::RowMajor>>;
  ConstMatrix lhs(reinterpret_cast<const E*>(a), transpose_a ? k : m, transpose_a ? m : k);
  ConstMatrix rhs(reinterpret_cast<const E*>(b), transpose_b ? n : k, transpose_b ? k : n);
  Eigen::TensorMap<Eigen::Tensor<E, 2, Eigen::RowMajor>> out(reinterpret_cast<E*>(c), m, n);
  const Eigen::array<Eigen::IndexPair<Eigen::Index>, 1> contract = {
      Eigen::IndexPair<Eigen::Index>(transpose_a ? 0 : 1, transpose_b ? 1 : 0)};
  // Below ~1M multiply-adds the pool's wake-up costs more than it saves.
  if (m * n * k < (int64_t{1} << 20)) {
    out = lhs.contract(rhs, contract);
  } else {
    out.device(eigen_device()) = lhs.contract(rhs, contract);
  }
}

template void matmul<float>(const float*, const float*, float*, int64_t, int64_t, int64_t, bool, bool);
template void matmul<double>(const double*, const double*, double*, int64_t, int64_t, int64_t, bool, bool);
template void matmul<half>(const half*, const half*, half*, int64_t, int64_t, int64_t, bool, bool);
template void matmul<bfloat16>(const bfloat16*, const bfloat16*, bfloat16*, int64_t, int64_t, int64_t,
                               bool, bool);
template void matmul<complex64>(const complex64*, const complex64*, complex64*, int64_t, int64_t,
                                int64_t, bool, bool);
template void matmul<complex128>(const complex128*, const complex128*, complex128*, int64_t, int64_t,
                                 int64_t, bool, bool);
template void matmul<int32_t>(const int32_t*, const int32_t*, int32_t*, int64_t, int64_t, int64_t,
                              bool, bool);

}  // namespace varstate::kernels::cpu
