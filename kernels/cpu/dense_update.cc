#include "kernels/cpu/dense_update.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/eigen_support.h"
#include "kernels/cpu/half_blocks.h"
#include "kernels/cpu/isa_variants.h"
#include "kernels/dtype_traits.h"
#include "kernels/host16.h"

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

// assign_add and assign_sub of the floating types, in loops built per
// instruction set (isa_variants.h). The 16-bit floats widen, compute in
// float and round once, as Eigen's half and bfloat16 arithmetic does:
// bfloat16 with the inline conversions (kernels/host16.h), float16 with
// F16C where the CPU has it (kernels/cpu/half_blocks.h). Eigen's 16-bit
// arithmetic is a scalar loop in the baseline x86-64 build, 4-11x slower
// than these; float32's vector loop there ran 1.1-1.2x slower too
// (docs/performance.md).
template <typename T>
void add_range(bool subtract, T* dst, const T* src, int64_t n, bool src_is_scalar) {
  auto run = [&](auto subtract_constant, auto scalar_constant) {
    if constexpr (std::is_same_v<T, half>) {
      add_to_halves(dst, src, n, subtract_constant, scalar_constant);  // F16C
    } else if constexpr (std::is_same_v<T, bfloat16>) {
      for (int64_t i = 0; i < n; ++i) {
        const float x = host16_to_float(dst[i]);
        const float y = host16_to_float(scalar_constant ? src[0] : src[i]);
        dst[i] = host16_from_float<T>(subtract_constant ? x - y : x + y);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        const T y = scalar_constant ? src[0] : src[i];
        dst[i] = subtract_constant ? dst[i] - y : dst[i] + y;
      }
    }
  };
  // The flags as constants, so that each loop is straight vector code.
  auto with_scalar = [&](auto subtract_constant) {
    if (src_is_scalar) {
      run(subtract_constant, std::true_type());
    } else {
      run(subtract_constant, std::false_type());
    }
  };
  for_cpu_isa([&] {
    if (subtract) {
      with_scalar(std::true_type());
    } else {
      with_scalar(std::false_type());
    }
  });
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
  for_ranges(
      n, line, streams * n * int64_t{sizeof(E)}, parallel_thresholds().dense_update_bytes,
      [&](int64_t first, int64_t last) {
        const int64_t offset = src_is_scalar ? 0 : first;
        if constexpr (kIsHalfLike<T> || std::is_same_v<T, float> || std::is_same_v<T, double>) {
          if (op != DenseUpdateOp::kAssign) {
            return add_range(op == DenseUpdateOp::kSub, dst + first, src + offset, last - first,
                             src_is_scalar);
          }
        }
        update_range(op, out + first, in + offset, last - first, src_is_scalar);
      });
}

#define VARSTATE_INSTANTIATE(E, T) \
  template void dense_update<T>(DenseUpdateOp, T*, const T*, int64_t, bool);
VARSTATE_FOR_EACH_NUMERIC_STORAGE_TYPE(VARSTATE_INSTANTIATE)
#undef VARSTATE_INSTANTIATE

}  // namespace varstate::kernels::cpu
