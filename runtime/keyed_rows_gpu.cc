#include "runtime/keyed_rows_gpu.h"

#include "varstate/error.h"

#ifdef VARSTATE_HAVE_CUDA
#include "kernels/cuda/gather.h"
#include "kernels/cuda/random.h"
#endif

namespace varstate::internal {
namespace {

#ifndef VARSTATE_HAVE_CUDA
[[noreturn]] void no_cuda(const char* what) {
  throw InternalError(std::string(what) + " on a GPU in a build without CUDA");
}
#endif

}  // namespace

Tensor gather_slots(const Tensor& arena, const Tensor& slots, const Tensor& fill) {
  const int64_t n = slots.num_elements();
  const TensorShape row_shape = arena.shape().tail(1);
  Tensor out(arena.dtype(), TensorShape({n}).concatenate(row_shape), arena.device());
#ifdef VARSTATE_HAVE_CUDA
  const int64_t row_bytes =
      row_shape.num_elements() * static_cast<int64_t>(dtype_size(arena.dtype()));
  if (n == 0 || row_bytes == 0) return out;
  Device& device = arena.device();
  DeviceGuard guard(device);
  kernels::cuda::gather_rows_or_fill(
      arena.raw_data(), row_bytes, static_cast<const int64_t*>(slots.raw_data()), n, out.raw_data(),
      fill.valid() ? fill.raw_data() : nullptr, device.stream());
#else
  (void)fill;
  no_cuda("gather_slots");
#endif
  return out;
}

namespace {

// write_initial_rows (rows at the slots) and, with `where_absent`,
// write_initial_rows_where_absent (kernels::cuda::RowsAt).
void initial_rows(Tensor& out, const KeyedRowInit& init, const Tensor& keys, const Tensor& slots,
                  bool where_absent) {
#ifdef VARSTATE_HAVE_CUDA
  const auto at = where_absent ? kernels::cuda::RowsAt::kAbsent : kernels::cuda::RowsAt::kSlots;
  const int64_t n = slots.num_elements();
  const int64_t width = out.shape().tail(1).num_elements();
  if (n == 0 || width == 0) return;
  Device& device = out.device();
  const auto* k = static_cast<const int64_t*>(keys.raw_data());
  const auto* s = static_cast<const int64_t*>(slots.raw_data());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T* rows = static_cast<T*>(out.raw_data());
    const T a = init.a.scalar<T>();
    DeviceGuard guard(device);
    cudaStream_t stream = device.stream();
    switch (init.kind) {
      case KeyedRowInit::Kind::kConstant:
        kernels::cuda::constant_rows<T>(rows, width, s, n, a, stream, at);
        break;
      case KeyedRowInit::Kind::kUniform:
        kernels::cuda::random_uniform_rows<T>(rows, width, k, s, n, init.seed, init.seed2, a,
                                              init.b.scalar<T>(), stream, at);
        break;
      case KeyedRowInit::Kind::kNormal:
        kernels::cuda::random_normal_rows<T>(rows, width, k, s, n, init.seed, init.seed2, a,
                                             init.b.scalar<T>(), stream, at);
        break;
      case KeyedRowInit::Kind::kTruncatedNormal:
        kernels::cuda::truncated_normal_rows<T>(rows, width, k, s, n, init.seed, init.seed2, a,
                                                init.b.scalar<T>(), stream, at);
        break;
    }
  };
  switch (out.dtype()) {
#define VARSTATE_KEYED_ROWS_CASE(E, T) \
  case DType::E:                       \
    return run(T{});
    VARSTATE_DTYPES_FLOATING(VARSTATE_DTYPE_ENTRY, VARSTATE_KEYED_ROWS_CASE)
#undef VARSTATE_KEYED_ROWS_CASE
    default:
      throw InternalError("initial rows of a keyed table of " +
                          std::string(dtype_name(out.dtype())));
  }
#else
  (void)out, (void)init, (void)keys, (void)slots;
  no_cuda(where_absent ? "write_initial_rows_where_absent" : "write_initial_rows");
#endif
}

}  // namespace

void write_initial_rows(Tensor& arena, const KeyedRowInit& init, const Tensor& keys,
                        const Tensor& slots) {
  initial_rows(arena, init, keys, slots, /*where_absent=*/false);
}

void write_initial_rows_where_absent(Tensor& rows, const KeyedRowInit& init, const Tensor& keys,
                                     const Tensor& slots) {
  initial_rows(rows, init, keys, slots, /*where_absent=*/true);
}

}  // namespace varstate::internal
