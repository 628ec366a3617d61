#include "kernels/cpu/dense_update.h"

#include <cstring>

#include "kernels/cpu/eigen_internal.h"

namespace varstate::kernels::cpu {
namespace {

template <typename E, typename Expr, typename Out>
void evaluate(Out& out, const Expr& expr, int64_t n) {
  if (static_cast<int64_t>(n * sizeof(E)) >= kParallelBytesThreshold) {
    out.device(eigen_device()) = expr;
  } else {
    out = expr;
  }
}

}  // namespace

template <typename T>
void dense_update(DenseUpdateOp op, T* dst, const T* src, int64_t n, bool src_is_scalar) {
  using E = eigen_t<T>;
  if (n == 0) return;
  Eigen::TensorMap<Eigen::Tensor<E, 1, Eigen::RowMajor>> out(reinterpret_cast<E*>(dst), n);
  if (src_is_scalar) {
    const E s = *reinterpret_cast<const E*>(src);
    auto c = out.constant(s);
    switch (op) {
      case DenseUpdateOp::kAssign:
        evaluate<E>(out, c, n);
        break;
      case DenseUpdateOp::kAdd:
        evaluate<E>(out, out + c, n);
        break;
      case DenseUpdateOp::kSub:
        evaluate<E>(out, out - c, n);
        break;
    }
    return;
  }
  Eigen::TensorMap<const Eigen::Tensor<const E, 1, Eigen::RowMajor>> in(
      reinterpret_cast<const E*>(src), n);
  switch (op) {
    case DenseUpdateOp::kAssign:
      if (dst != src) evaluate<E>(out, in, n);
      break;
    case DenseUpdateOp::kAdd:
      evaluate<E>(out, out + in, n);
      break;
    case DenseUpdateOp::kSub:
      evaluate<E>(out, out - in, n);
      break;
  }
}

#define VARSTATE_INSTANTIATE(E, T) \
  template void dense_update<T>(DenseUpdateOp, T*, const T*, int64_t, bool);
VARSTATE_FOR_EACH_NUMERIC_STORAGE_TYPE(VARSTATE_INSTANTIATE)
#undef VARSTATE_INSTANTIATE

}  // namespace varstate::kernels::cpu
