#include "kernels/cpu/dense_update.h"

#include <cstring>

#include "kernels/cpu/eigen_support.h"

namespace varstate::kernels::cpu {
namespace {

// Elements [0, n) of the update on one thread.
template <typename E>
void update_range(DenseUpdateOp op, E* dst, const E* src, int64_t n, bool src_is_scalar) {
  Eigen::TensorMap<Eigen::Tensor<E, 1, Eigen::RowMajor>> out(dst, n);
  if (src_is_scalar) {
    auto c = out.constant(*src);
    switch (op) {
      case DenseUpdateOp::kAssign:
        out = c;
        break;
      case DenseUpdateOp::kAdd:
        out = out + c;
        break;
      case DenseUpdateOp::kSub:
        out = out - c;
        break;
    }
    return;
  }
  Eigen::TensorMap<const Eigen::Tensor<const E, 1, Eigen::RowMajor>> in(src, n);
  switch (op) {
    case DenseUpdateOp::kAssign:
      if (dst != src) out = in;
      break;
    case DenseUpdateOp::kAdd:
      out = out + in;
      break;
    case DenseUpdateOp::kSub:
      out = out - in;
      break;
  }
}

}  // namespace

template <typename T>
void dense_update(DenseUpdateOp op, T* dst, const T* src, int64_t n, bool src_is_scalar) {
  using E = eigen_t<T>;
  if (n == 0) return;
  E* out = reinterpret_cast<E*>(dst);
  const E* in = reinterpret_cast<const E*>(src);
  // Bytes read and written: the target, and the source unless a scalar.
  const int64_t streams =
      (op == DenseUpdateOp::kAssign ? 1 : 2) + (src_is_scalar ? 0 : 1) - (out == in ? 1 : 0);
  const int64_t line = std::max<int64_t>(1, 64 / int64_t{sizeof(E)});
  for_ranges(n, line, streams * n * int64_t{sizeof(E)}, parallel_thresholds().dense_update_bytes,
             [&](int64_t first, int64_t last) {
               update_range(op, out + first, src_is_scalar ? in : in + first, last - first,
                            src_is_scalar);
             });
}

#define VARSTATE_INSTANTIATE(E, T) \
  template void dense_update<T>(DenseUpdateOp, T*, const T*, int64_t, bool);
VARSTATE_FOR_EACH_NUMERIC_STORAGE_TYPE(VARSTATE_INSTANTIATE)
#undef VARSTATE_INSTANTIATE

}  // namespace varstate::kernels::cpu
