#include "varstate/training_ops.h"

#include "runtime/keyed_storage.h"
#include "runtime/local_storage.h"
#include "runtime/scatter_by_op.h"
#include "runtime/variable_storage.h"
#include "training/training_ops_internal.h"
#include "varstate/device_manager.h"
#include "varstate/math_ops.h"
#include "varstate/scatter.h"

namespace varstate {
namespace {

using internal::RowsUpdate;
using internal::TrainingCall;
using kernels::TrainingOp;

// Runs `call` with a dense or a sparse gradient.
Tensor finish(TrainingCall& call, const Tensor& grad) { return call.apply_dense(grad); }
Tensor finish(TrainingCall& call, const IndexedSlices& grad) { return call.apply_sparse(grad); }

const char* pick(bool sparse, const char* dense_name, const char* sparse_name) {
  return sparse ? sparse_name : dense_name;
}

template <typename Grad>
constexpr bool kSparse = std::is_same_v<Grad, IndexedSlices>;

template <typename Grad>
Tensor momentum(Variable& var, Variable& accum, const Tensor& lr, const Grad& grad,
                const Tensor& momentum, bool use_nesterov, const UpdateOptions& options) {
  TrainingCall call(TrainingOp::kMomentum,
                    pick(kSparse<Grad>, "ApplyMomentum", "SparseApplyMomentum"), var,
                    {{&accum, "accum"}}, options);
  call.hyper().lr = call.scalar(lr, "lr");
  call.hyper().momentum = call.scalar(momentum, "momentum");
  call.hyper().use_nesterov = use_nesterov;
  return finish(call, grad);
}

template <typename Grad>
Tensor adagrad(TrainingOp op, const char* dense_name, const char* sparse_name, Variable& var,
               Variable& accum, const Tensor& lr, const Grad& grad, const UpdateOptions& options) {
  TrainingCall call(op, pick(kSparse<Grad>, dense_name, sparse_name), var, {{&accum, "accum"}},
                    options);
  call.hyper().lr = call.scalar(lr, "lr");
  return finish(call, grad);
}

template <typename Grad>
Tensor adam(TrainingOp op, const char* name, Variable& var, Variable& m, Variable& v,
            const Tensor& beta1_power, const Tensor& beta2_power, const Tensor& lr,
            const Tensor& beta1, const Tensor& beta2, const Tensor& epsilon, const Grad& grad,
            bool use_nesterov, const UpdateOptions& options) {
  TrainingCall call(op, name, var, {{&m, "m"}, {&v, "v"}}, options);
  kernels::TrainingHyper& h = call.hyper();
  h.beta1_power = call.scalar(beta1_power, "beta1_power");
  h.beta2_power = call.scalar(beta2_power, "beta2_power");
  h.lr = call.scalar(lr, "lr");
  h.beta1 = call.scalar(beta1, "beta1");
  h.beta2 = call.scalar(beta2, "beta2");
  h.epsilon = call.scalar(epsilon, "epsilon");
  h.use_nesterov = use_nesterov;
  return finish(call, grad);
}

template <typename Grad>
Tensor rms_prop(Variable& var, Variable* mg, Variable& ms, Variable& mom, const Tensor& lr,
                const Tensor& rho, const Tensor& momentum, const Tensor& epsilon, const Grad& grad,
                const UpdateOptions& options) {
  const bool centered = mg != nullptr;
  std::vector<internal::TrainingSlot> slots = {{&ms, "ms"}, {&mom, "mom"}};
  if (centered) slots.push_back({mg, "mg"});
  const char* name = centered
                         ? pick(kSparse<Grad>, "ApplyCenteredRMSProp", "SparseApplyCenteredRMSProp")
                         : pick(kSparse<Grad>, "ApplyRMSProp", "SparseApplyRMSProp");
  TrainingCall call(centered ? TrainingOp::kCenteredRMSProp : TrainingOp::kRMSProp, name, var,
                    std::move(slots), options);
  kernels::TrainingHyper& h = call.hyper();
  h.lr = call.scalar(lr, "lr");
  h.rho = call.scalar(rho, "rho");
  h.momentum = call.scalar(momentum, "momentum");
  h.epsilon = call.scalar(epsilon, "epsilon");
  return finish(call, grad);
}

template <typename Grad>
Tensor ftrl(Variable& var, Variable& accum, Variable& linear, const Grad& grad, const Tensor& lr,
            const Tensor& l1, const Tensor& l2, const Tensor* l2_shrinkage, const Tensor& lr_power,
            const UpdateOptions& options) {
  const char* name = l2_shrinkage ? pick(kSparse<Grad>, "ApplyFtrlV2", "SparseApplyFtrlV2")
                                  : pick(kSparse<Grad>, "ApplyFtrl", "SparseApplyFtrl");
  TrainingCall call(TrainingOp::kFtrl, name, var, {{&accum, "accum"}, {&linear, "linear"}},
                    options);
  kernels::TrainingHyper& h = call.hyper();
  h.lr = call.scalar(lr, "lr");
  h.l1 = call.scalar(l1, "l1");
  h.l2 = call.scalar(l2, "l2");
  if (l2_shrinkage) h.l2_shrinkage = call.scalar(*l2_shrinkage, "l2_shrinkage");
  h.lr_power = call.scalar(lr_power, "lr_power");
  if (!(h.lr > 0))
    throw InvalidArgumentError(call.who() + ": lr is not positive: " + std::to_string(h.lr));
  if (h.l1 < 0 || h.l2 < 0 || h.l2_shrinkage < 0 || h.lr_power > 0) {
    throw InvalidArgumentError(call.who() +
                               ": l1, l2 and l2_shrinkage must be >= 0 and lr_power <= 0");
  }
  return finish(call, grad);
}

template <typename Grad>
Tensor adadelta(Variable& var, Variable& accum, Variable& accum_update, const Tensor& lr,
                const Tensor& rho, const Tensor& epsilon, const Grad& grad,
                const UpdateOptions& options) {
  TrainingCall call(TrainingOp::kAdadelta,
                    pick(kSparse<Grad>, "ApplyAdadelta", "SparseApplyAdadelta"), var,
                    {{&accum, "accum"}, {&accum_update, "accum_update"}}, options);
  kernels::TrainingHyper& h = call.hyper();
  h.lr = call.scalar(lr, "lr");
  h.rho = call.scalar(rho, "rho");
  h.epsilon = call.scalar(epsilon, "epsilon");
  return finish(call, grad);
}

template <typename Grad>
Tensor proximal_gradient_descent(Variable& var, const Tensor& alpha, const Tensor& l1,
                                 const Tensor& l2, const Grad& delta,
                                 const UpdateOptions& options) {
  TrainingCall call(
      TrainingOp::kProximalGradientDescent,
      pick(kSparse<Grad>, "ApplyProximalGradientDescent", "SparseApplyProximalGradientDescent"),
      var, {}, options);
  kernels::TrainingHyper& h = call.hyper();
  h.lr = call.scalar(alpha, "alpha");
  h.l1 = call.scalar(l1, "l1");
  h.l2 = call.scalar(l2, "l2");
  return finish(call, delta);
}

template <typename Grad>
Tensor proximal_adagrad(Variable& var, Variable& accum, const Tensor& lr, const Tensor& l1,
                        const Tensor& l2, const Grad& grad, const UpdateOptions& options) {
  TrainingCall call(TrainingOp::kProximalAdagrad,
                    pick(kSparse<Grad>, "ApplyProximalAdagrad", "SparseApplyProximalAdagrad"), var,
                    {{&accum, "accum"}}, options);
  kernels::TrainingHyper& h = call.hyper();
  h.lr = call.scalar(lr, "lr");
  h.l1 = call.scalar(l1, "l1");
  h.l2 = call.scalar(l2, "l2");
  // The checks of TensorFlow's CPU kernel.
  auto check = [&](bool ok, const char* what, double value) {
    if (!ok)
      throw InvalidArgumentError(call.who() + ": " + what + ", got " + std::to_string(value));
  };
  check(h.lr > 0, "lr is not a positive scalar", h.lr);
  check(h.l1 >= 0, "l1 regularization strength is not a non-negative scalar", h.l1);
  check(h.l2 >= 0, "l2 regularization strength is not a non-negative scalar", h.l2);
  return finish(call, grad);
}

template <typename Grad>
Tensor adagrad_da(Variable& var, Variable& gradient_accumulator,
                  Variable& gradient_squared_accumulator, const Grad& grad, const Tensor& lr,
                  const Tensor& l1, const Tensor& l2, const Tensor& global_step,
                  const UpdateOptions& options) {
  TrainingCall call(TrainingOp::kAdagradDA,
                    pick(kSparse<Grad>, "ApplyAdagradDA", "SparseApplyAdagradDA"), var,
                    {{&gradient_accumulator, "gradient_accumulator"},
                     {&gradient_squared_accumulator, "gradient_squared_accumulator"}},
                    options);
  kernels::TrainingHyper& h = call.hyper();
  h.lr = call.scalar(lr, "lr");
  h.l1 = call.scalar(l1, "l1");
  h.l2 = call.scalar(l2, "l2");
  // An integer scalar (TensorFlow's op takes int64; a C++ integer converts).
  if (!global_step.valid() || global_step.rank() != 0) {
    throw InvalidArgumentError(
        call.who() + ": global_step is not a scalar: " +
        (global_step.valid() ? global_step.shape().to_string() : std::string("empty")));
  }
  if (global_step.dtype() != DType::kInt64 &&
      !(global_step.weakly_typed() && global_step.dtype() == DType::kInt32)) {
    throw TypeError(call.who() + ": global_step is " +
                    std::string(dtype_name(global_step.dtype())) + ", expected int64");
  }
  h.global_step = static_cast<double>(global_step.to_host().cast(DType::kInt64).scalar<int64_t>());
  return finish(call, grad);
}

}  // namespace

Tensor internal::apply_moving_average(Variable& avg, const Tensor& value, double factor,
                                      const UpdateOptions& options) {
  TrainingCall call(TrainingOp::kMovingAverage, "AssignMovingAvg", avg, {}, options);
  call.hyper().lr = factor;
  return call.apply_dense(value);
}

Tensor apply_gradient_descent(Variable& var, const Tensor& alpha, const Tensor& delta,
                              const UpdateOptions& options) {
  TrainingCall call(TrainingOp::kGradientDescent, "ApplyGradientDescent", var, {}, options);
  call.hyper().lr = call.scalar(alpha, "alpha");
  return call.apply_dense(delta);
}

Tensor sparse_apply_gradient_descent(Variable& var, const Tensor& alpha, const IndexedSlices& delta,
                                     const UpdateOptions& options) {
  TrainingCall call(TrainingOp::kGradientDescent, "SparseApplyGradientDescent", var, {}, options);
  const double lr = call.scalar(alpha, "alpha");
  internal::check_sparse_gradient(delta, var, call.who());
  Device& device = var.device();
  Tensor values = delta.values().cast(var.dtype());
  values = values.on(device);
  // alpha rounded to the variable's dtype, as TensorFlow's cast of lr; a
  // host scalar (on a GPU it is the kernel's argument).
  const Tensor alpha_value =
      Tensor::filled(var.dtype(), {}, Tensor(lr), DeviceManager::instance().cpu());
  UpdateOptions scatter_options = options;
  scatter_options.use_locking = options.use_locking.value_or(false);
  internal::VariableStorage& storage = internal::storage(var);
  if (auto* local = dynamic_cast<internal::LocalStorage*>(&storage)) {
    // scatter_sub(var, indices, values * alpha), the product taken in the
    // scatter's own pass on the CPU for float and double (bitwise the
    // same); its errors (indices checked on a GPU among them) name this op.
    return internal::scatter_local(kernels::ScatterOp::kSub, var, *local, delta.indices(), values,
                                   scatter_options, call.who(), &alpha_value);
  }
  const Tensor scaled = values * alpha_value;
  if (!storage.updates_in_place() && internal::keyed_storage(var) == nullptr) {
    // Bitwise the single-process op (duplicates subtracted one by one, in
    // order, which an accumulate on the owner would not keep): the rows
    // come under the owner's lock, the CPU scatter_sub updates them, and
    // nothing else is read back (training_ops.h).
    Tensor compact;
    std::vector<int64_t> rows = internal::distinct_rows(delta.indices().to_host(), compact);
    if (rows.empty()) return Tensor();
    const Tensor host = scaled.to_host();
    RowsUpdate update{
        {&storage}, rows, [compact, host, name = options.name](std::vector<Tensor>& t) {
          scatter_sub(t[0], compact, host, {.name = name});
        }};
    internal::RemoteApplyBatch::submit(std::move(update));
    return Tensor();
  }
  if (internal::KeyedStorage* keyed = internal::keyed_storage(var)) {
    // A dynamic variable's value is every row: nothing is read back. The
    // step counts for expiry and eviction.
    internal::scatter_into(kernels::ScatterOp::kSub, var, delta.indices(), scaled, scatter_options,
                           call.who());
    keyed->table().tick();
    return Tensor();
  }
  // Any other storage that updates in place: a scatter_sub naming this op.
  return storage.scatter(kernels::ScatterOp::kSub, var, delta.indices(), scaled, scatter_options,
                         call.who(), /*read_back=*/true);
}

Tensor apply_momentum(Variable& var, Variable& accum, const Tensor& lr, const Tensor& grad,
                      const Tensor& momentum_value, bool use_nesterov,
                      const UpdateOptions& options) {
  return momentum(var, accum, lr, grad, momentum_value, use_nesterov, options);
}
Tensor sparse_apply_momentum(Variable& var, Variable& accum, const Tensor& lr,
                             const IndexedSlices& grad, const Tensor& momentum_value,
                             bool use_nesterov, const UpdateOptions& options) {
  return momentum(var, accum, lr, grad, momentum_value, use_nesterov, options);
}

Tensor apply_adagrad(Variable& var, Variable& accum, const Tensor& lr, const Tensor& grad,
                     const UpdateOptions& options) {
  return adagrad(TrainingOp::kAdagrad, "ApplyAdagrad", "SparseApplyAdagrad", var, accum, lr, grad,
                 options);
}
Tensor sparse_apply_adagrad(Variable& var, Variable& accum, const Tensor& lr,
                            const IndexedSlices& grad, const UpdateOptions& options) {
  return adagrad(TrainingOp::kAdagrad, "ApplyAdagrad", "SparseApplyAdagrad", var, accum, lr, grad,
                 options);
}
Tensor apply_rowwise_adagrad(Variable& var, Variable& accum, const Tensor& lr, const Tensor& grad,
                             const UpdateOptions& options) {
  return adagrad(TrainingOp::kRowwiseAdagrad, "ApplyRowwiseAdagrad", "SparseApplyRowwiseAdagrad",
                 var, accum, lr, grad, options);
}
Tensor sparse_apply_rowwise_adagrad(Variable& var, Variable& accum, const Tensor& lr,
                                    const IndexedSlices& grad, const UpdateOptions& options) {
  return adagrad(TrainingOp::kRowwiseAdagrad, "ApplyRowwiseAdagrad", "SparseApplyRowwiseAdagrad",
                 var, accum, lr, grad, options);
}

Tensor apply_adam(Variable& var, Variable& m, Variable& v, const Tensor& beta1_power,
                  const Tensor& beta2_power, const Tensor& lr, const Tensor& beta1,
                  const Tensor& beta2, const Tensor& epsilon, const Tensor& grad, bool use_nesterov,
                  const UpdateOptions& options) {
  return adam(TrainingOp::kAdam, "ApplyAdam", var, m, v, beta1_power, beta2_power, lr, beta1, beta2,
              epsilon, grad, use_nesterov, options);
}
Tensor sparse_apply_adam(Variable& var, Variable& m, Variable& v, const Tensor& beta1_power,
                         const Tensor& beta2_power, const Tensor& lr, const Tensor& beta1,
                         const Tensor& beta2, const Tensor& epsilon, const IndexedSlices& grad,
                         const UpdateOptions& options) {
  return adam(TrainingOp::kAdam, "SparseApplyAdam", var, m, v, beta1_power, beta2_power, lr, beta1,
              beta2, epsilon, grad, false, options);
}
Tensor sparse_apply_lazy_adam(Variable& var, Variable& m, Variable& v, const Tensor& beta1_power,
                              const Tensor& beta2_power, const Tensor& lr, const Tensor& beta1,
                              const Tensor& beta2, const Tensor& epsilon, const IndexedSlices& grad,
                              const UpdateOptions& options) {
  return adam(TrainingOp::kLazyAdam, "SparseApplyLazyAdam", var, m, v, beta1_power, beta2_power, lr,
              beta1, beta2, epsilon, grad, false, options);
}

Tensor apply_rms_prop(Variable& var, Variable& ms, Variable& mom, const Tensor& lr,
                      const Tensor& rho, const Tensor& momentum_value, const Tensor& epsilon,
                      const Tensor& grad, const UpdateOptions& options) {
  return rms_prop(var, nullptr, ms, mom, lr, rho, momentum_value, epsilon, grad, options);
}
Tensor sparse_apply_rms_prop(Variable& var, Variable& ms, Variable& mom, const Tensor& lr,
                             const Tensor& rho, const Tensor& momentum_value, const Tensor& epsilon,
                             const IndexedSlices& grad, const UpdateOptions& options) {
  return rms_prop(var, nullptr, ms, mom, lr, rho, momentum_value, epsilon, grad, options);
}
Tensor apply_centered_rms_prop(Variable& var, Variable& mg, Variable& ms, Variable& mom,
                               const Tensor& lr, const Tensor& rho, const Tensor& momentum_value,
                               const Tensor& epsilon, const Tensor& grad,
                               const UpdateOptions& options) {
  return rms_prop(var, &mg, ms, mom, lr, rho, momentum_value, epsilon, grad, options);
}
Tensor sparse_apply_centered_rms_prop(Variable& var, Variable& mg, Variable& ms, Variable& mom,
                                      const Tensor& lr, const Tensor& rho,
                                      const Tensor& momentum_value, const Tensor& epsilon,
                                      const IndexedSlices& grad, const UpdateOptions& options) {
  return rms_prop(var, &mg, ms, mom, lr, rho, momentum_value, epsilon, grad, options);
}

Tensor apply_ftrl(Variable& var, Variable& accum, Variable& linear, const Tensor& grad,
                  const Tensor& lr, const Tensor& l1, const Tensor& l2, const Tensor& lr_power,
                  const UpdateOptions& options) {
  return ftrl(var, accum, linear, grad, lr, l1, l2, nullptr, lr_power, options);
}
Tensor sparse_apply_ftrl(Variable& var, Variable& accum, Variable& linear,
                         const IndexedSlices& grad, const Tensor& lr, const Tensor& l1,
                         const Tensor& l2, const Tensor& lr_power, const UpdateOptions& options) {
  return ftrl(var, accum, linear, grad, lr, l1, l2, nullptr, lr_power, options);
}
Tensor apply_ftrl_v2(Variable& var, Variable& accum, Variable& linear, const Tensor& grad,
                     const Tensor& lr, const Tensor& l1, const Tensor& l2,
                     const Tensor& l2_shrinkage, const Tensor& lr_power,
                     const UpdateOptions& options) {
  return ftrl(var, accum, linear, grad, lr, l1, l2, &l2_shrinkage, lr_power, options);
}
Tensor sparse_apply_ftrl_v2(Variable& var, Variable& accum, Variable& linear,
                            const IndexedSlices& grad, const Tensor& lr, const Tensor& l1,
                            const Tensor& l2, const Tensor& l2_shrinkage, const Tensor& lr_power,
                            const UpdateOptions& options) {
  return ftrl(var, accum, linear, grad, lr, l1, l2, &l2_shrinkage, lr_power, options);
}

Tensor apply_adadelta(Variable& var, Variable& accum, Variable& accum_update, const Tensor& lr,
                      const Tensor& rho, const Tensor& epsilon, const Tensor& grad,
                      const UpdateOptions& options) {
  return adadelta(var, accum, accum_update, lr, rho, epsilon, grad, options);
}
Tensor sparse_apply_adadelta(Variable& var, Variable& accum, Variable& accum_update,
                             const Tensor& lr, const Tensor& rho, const Tensor& epsilon,
                             const IndexedSlices& grad, const UpdateOptions& options) {
  return adadelta(var, accum, accum_update, lr, rho, epsilon, grad, options);
}

Tensor apply_proximal_gradient_descent(Variable& var, const Tensor& alpha, const Tensor& l1,
                                       const Tensor& l2, const Tensor& delta,
                                       const UpdateOptions& options) {
  return proximal_gradient_descent(var, alpha, l1, l2, delta, options);
}
Tensor sparse_apply_proximal_gradient_descent(Variable& var, const Tensor& alpha, const Tensor& l1,
                                              const Tensor& l2, const IndexedSlices& delta,
                                              const UpdateOptions& options) {
  return proximal_gradient_descent(var, alpha, l1, l2, delta, options);
}

Tensor apply_proximal_adagrad(Variable& var, Variable& accum, const Tensor& lr, const Tensor& l1,
                              const Tensor& l2, const Tensor& grad, const UpdateOptions& options) {
  return proximal_adagrad(var, accum, lr, l1, l2, grad, options);
}
Tensor sparse_apply_proximal_adagrad(Variable& var, Variable& accum, const Tensor& lr,
                                     const Tensor& l1, const Tensor& l2, const IndexedSlices& grad,
                                     const UpdateOptions& options) {
  return proximal_adagrad(var, accum, lr, l1, l2, grad, options);
}

Tensor apply_adagrad_da(Variable& var, Variable& gradient_accumulator,
                        Variable& gradient_squared_accumulator, const Tensor& grad,
                        const Tensor& lr, const Tensor& l1, const Tensor& l2,
                        const Tensor& global_step, const UpdateOptions& options) {
  return adagrad_da(var, gradient_accumulator, gradient_squared_accumulator, grad, lr, l1, l2,
                    global_step, options);
}
Tensor sparse_apply_adagrad_da(Variable& var, Variable& gradient_accumulator,
                               Variable& gradient_squared_accumulator, const IndexedSlices& grad,
                               const Tensor& lr, const Tensor& l1, const Tensor& l2,
                               const Tensor& global_step, const UpdateOptions& options) {
  return adagrad_da(var, gradient_accumulator, gradient_squared_accumulator, grad, lr, l1, l2,
                    global_step, options);
}

}  // namespace varstate
