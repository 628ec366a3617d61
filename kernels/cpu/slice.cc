#include "kernels/cpu/slice.h"

#include <type_traits>

#include "kernels/cpu/eigen_support.h"

namespace varstate::kernels::cpu {

template <typename T>
void strided_copy(const T* src, T* dst, const StridedCopy& c) {
  if (c.n == 0) return;
  if (c.rank == 0) {
    dst[c.dst.offset] = src[c.src.offset];
    return;
  }
  const int inner_dim = c.rank - 1;
  const int64_t inner = c.dims[inner_dim];
  const int64_t rows = c.n / inner;
  const int64_t ss = c.src.strides[inner_dim], ds = c.dst.strides[inner_dim];
  // Each row (one run along the innermost dim) finds its start offsets by
  // decomposing its row number over the outer dims.
  auto copy_rows = [&](int64_t first, int64_t last) {
    for (int64_t row = first; row < last; ++row) {
      int64_t so = c.src.offset, dof = c.dst.offset, rem = row;
      for (int d = inner_dim - 1; d >= 0; --d) {
        const int64_t idx = rem % c.dims[d];
        rem /= c.dims[d];
        so += idx * c.src.strides[d];
        dof += idx * c.dst.strides[d];
      }
      for (int64_t j = 0; j < inner; ++j) dst[dof + j * ds] = src[so + j * ss];
    }
  };
  const int64_t bytes = c.n * static_cast<int64_t>(sizeof(T));
  if (std::is_same_v<T, std::string> || bytes < kParallelBytesThreshold || rows == 1) {
    copy_rows(0, rows);
    return;
  }
  eigen_device().parallelFor(
      rows,
      Eigen::TensorOpCost(static_cast<double>(inner * sizeof(T)),
                          static_cast<double>(inner * sizeof(T)), 0),
      [&](Eigen::Index first, Eigen::Index last) { copy_rows(first, last); });
}

template void strided_copy<Opaque<1>>(const Opaque<1>*, Opaque<1>*, const StridedCopy&);
template void strided_copy<Opaque<2>>(const Opaque<2>*, Opaque<2>*, const StridedCopy&);
template void strided_copy<Opaque<4>>(const Opaque<4>*, Opaque<4>*, const StridedCopy&);
template void strided_copy<Opaque<8>>(const Opaque<8>*, Opaque<8>*, const StridedCopy&);
template void strided_copy<Opaque<16>>(const Opaque<16>*, Opaque<16>*, const StridedCopy&);
template void strided_copy<std::string>(const std::string*, std::string*, const StridedCopy&);

}  // namespace varstate::kernels::cpu
