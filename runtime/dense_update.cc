#include "varstate/dense_update.h"

#include <string>

#include "kernels/common.h"
#include "kernels/cpu/dense_update.h"
#include "runtime/dense_update_internal.h"
#include "varstate/error.h"
#ifdef VARSTATE_HAVE_CUDA
#include "kernels/cuda/dense_update.h"
#endif

namespace varstate {
namespace internal {

std::string dense_update_subject(kernels::DenseUpdateOp op, std::string_view name) {
  std::string s;
  switch (op) {
    case kernels::DenseUpdateOp::kAssign:
      s = "Assign";
      break;
    case kernels::DenseUpdateOp::kAdd:
      s = "AssignAdd";
      break;
    case kernels::DenseUpdateOp::kSub:
      s = "AssignSub";
      break;
  }
  if (!name.empty()) s += " to " + quoted(name);
  return s;
}

void check_dense_update_shape(const std::string& who, const TensorShape& target,
                              const TensorShape& value, bool scalar_ok) {
  if (value == target || (scalar_ok && value.is_scalar())) return;
  throw ValueError(who + ": shapes must match: target shape " + target.to_string() +
                   ", value shape " + value.to_string() + (scalar_ok ? " (or a scalar)" : ""));
}

}  // namespace internal

namespace {

using kernels::DenseUpdateOp;

std::string subject(DenseUpdateOp op, std::string_view name) {
  return internal::dense_update_subject(op, name);
}

// Validates and returns the value converted to the target's dtype and
// moved to its device. Throws before anything is written.
Tensor prepare_value(DenseUpdateOp op, const Tensor& target, const Tensor& value,
                     std::string_view name, bool validate_shape) {
  const std::string who = subject(op, name);
  if (!target.valid()) throw InvalidArgumentError(who + ": the target is an empty tensor handle");
  if (!value.valid()) throw InvalidArgumentError(who + ": the value is an empty tensor handle");
  if (op != DenseUpdateOp::kAssign && !dtype_is_numeric(target.dtype())) {
    throw TypeError(who + ": dtype " + std::string(dtype_name(target.dtype())) +
                    " does not support arithmetic");
  }
  Tensor v = convert_to_dtype(value, target.dtype(), who);
  if (validate_shape) internal::check_dense_update_shape(who, target.shape(), v.shape(), true);
  v = v.on(target.device());
  return v;
}

template <typename T>
void run_kernel(DenseUpdateOp op, Tensor& target, const Tensor& value) {
  T* dst = static_cast<T*>(target.raw_data());
  const T* src = static_cast<const T*>(value.raw_data());
  bool scalar = value.num_elements() == 1 && target.num_elements() != 1;
  if (target.num_elements() == 0) return;
  if (target.device().is_cpu()) {
    kernels::cpu::dense_update<T>(op, dst, src, target.num_elements(), scalar);
    return;
  }
#ifdef VARSTATE_HAVE_CUDA
  DeviceGuard guard(target.device());
  kernels::cuda::dense_update<T>(op, dst, src, target.num_elements(), scalar,
                                 target.device().stream());
#endif
}

void dense_update(DenseUpdateOp op, Tensor& target, const Tensor& value, std::string_view name) {
  Tensor v = prepare_value(op, target, value, name, /*validate_shape=*/true);
  if (target.dtype() == DType::kString || target.dtype() == DType::kBool) {
    // Plain element copies (assign only; arithmetic was rejected above).
    Tensor host = v.to_host();
    Tensor out = target.on_cpu() ? target : target.to_host();
    dispatch_all(target.dtype(), subject(op, name), [&](auto tag) {
      using T = decltype(tag);
      const T* src = static_cast<const T*>(host.raw_data());
      T* dst = static_cast<T*>(out.raw_data());
      bool scalar = host.num_elements() == 1;
      for (int64_t i = 0; i < out.num_elements(); ++i) dst[i] = src[scalar ? 0 : i];
      return 0;
    });
    if (!target.on_cpu())
      copy_bytes(target.device(), target.raw_data(), out.device(), out.raw_data(), out.nbytes());
    return;
  }
  dispatch_numeric(target.dtype(), subject(op, name), [&](auto tag) {
    run_kernel<decltype(tag)>(op, target, v);
    return 0;
  });
}

}  // namespace

void assign(Tensor& target, const Tensor& value, const UpdateOptions& options) {
  if (!options.validate_shape && target.valid() && value.valid() &&
      value.shape() != target.shape()) {
    // Take the value's shape: a fresh buffer on the target's device.
    Tensor v = prepare_value(DenseUpdateOp::kAssign, target, value, options.name, false);
    Tensor fresh(target.dtype(), v.shape(), target.device());
    dense_update(DenseUpdateOp::kAssign, fresh, v, options.name);
    target = fresh;
    return;
  }
  dense_update(DenseUpdateOp::kAssign, target, value, options.name);
}

void assign_add(Tensor& target, const Tensor& delta, const UpdateOptions& options) {
  dense_update(DenseUpdateOp::kAdd, target, delta, options.name);
}

void assign_sub(Tensor& target, const Tensor& delta, const UpdateOptions& options) {
  dense_update(DenseUpdateOp::kSub, target, delta, options.name);
}

}  // namespace varstate
