#include "varstate/cast.h"

#include "kernels/cpu/cast.h"
#include "varstate/device_manager.h"
#ifdef VARSTATE_HAVE_CUDA
#include "kernels/cuda/cast.h"
#endif

namespace varstate {
namespace {

// dispatch over numeric storage types plus bool.
template <typename Fn>
void dispatch_castable(DType dtype, Fn&& fn) {
  if (dtype == DType::kBool) {
    fn(bool{});
    return;
  }
  dispatch_numeric(dtype, "cast", fn);
}

Tensor cast_on_cpu(const Tensor& host, DType dtype) {
  Tensor out(dtype, host.shape());
  dispatch_castable(host.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    dispatch_castable(dtype, [&](auto to_tag) {
      using To = decltype(to_tag);
      kernels::cpu::cast<From, To>(static_cast<const From*>(host.raw_data()),
                                   static_cast<To*>(out.raw_data()), host.num_elements());
    });
  });
  return out;
}

}  // namespace

Tensor cast_tensor(const Tensor& t, DType dtype) {
  if (!t.valid()) throw InvalidArgumentError("cast: empty tensor handle");
  if (t.dtype() == dtype) return t.strongly_typed();
  if (t.dtype() == DType::kString || dtype == DType::kString) {
    throw TypeError("cast: cannot convert " + std::string(dtype_name(t.dtype())) + " to " +
                    std::string(dtype_name(dtype)));
  }
  if (t.on_cpu()) return cast_on_cpu(t, dtype);
#ifdef VARSTATE_HAVE_CUDA
  Tensor out(dtype, t.shape(), t.device());
  DeviceGuard guard(t.device());
  dispatch_castable(t.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    kernels::cuda::cast<From>(static_cast<const From*>(t.raw_data()), dtype, out.raw_data(),
                              t.num_elements(), t.device().stream());
  });
  return out;
#else
  return cast_on_cpu(t.to_host(), dtype).on(t.device());
#endif
}

}  // namespace varstate
