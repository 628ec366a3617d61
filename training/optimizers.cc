#include "varstate/optimizers.h"

#include "runtime/variable_storage.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/math_ops.h"
#include "varstate/training_ops.h"

namespace varstate {

// ---------------------------------------------------------------------------
// GradientDescent

GradientDescentOptimizer::GradientDescentOptimizer(Hyperparameter learning_rate,
                                                   GradientDescentOptions options)
    : Optimizer(std::move(options.name), options.use_locking),
      learning_rate_(std::move(learning_rate)) {}

void GradientDescentOptimizer::prepare() { lr_ = read(learning_rate_, "learning_rate"); }

void GradientDescentOptimizer::apply_dense(const Tensor& grad, Variable& var) {
  apply_gradient_descent(var, Tensor(lr_), grad, {.use_locking = use_locking()});
}

void GradientDescentOptimizer::apply_sparse(const IndexedSlices& grad, Variable& var) {
  sparse_apply_gradient_descent(var, Tensor(lr_), grad, {.use_locking = use_locking()});
}

// ---------------------------------------------------------------------------
// Momentum

MomentumOptimizer::MomentumOptimizer(Hyperparameter learning_rate, Hyperparameter momentum,
                                     MomentumOptions options)
    : Optimizer(std::move(options.name), options.use_locking),
      learning_rate_(std::move(learning_rate)),
      momentum_(std::move(momentum)),
      use_nesterov_(options.use_nesterov) {}

void MomentumOptimizer::make_slots(const Variable& var) { make_slot(var, "momentum", 0.0); }

void MomentumOptimizer::prepare() {
  lr_ = read(learning_rate_, "learning_rate");
  momentum_value_ = read(momentum_, "momentum");
}

void MomentumOptimizer::apply_dense(const Tensor& grad, Variable& var) {
  apply_momentum(var, slot(var, "momentum"), Tensor(lr_), grad, Tensor(momentum_value_),
                 use_nesterov_, {.use_locking = use_locking()});
}

void MomentumOptimizer::apply_sparse(const IndexedSlices& grad, Variable& var) {
  sparse_apply_momentum(var, slot(var, "momentum"), Tensor(lr_), grad, Tensor(momentum_value_),
                        use_nesterov_, {.use_locking = use_locking()});
}

// ---------------------------------------------------------------------------
// Adagrad and row-wise Adagrad

AdagradOptimizer::AdagradOptimizer(Hyperparameter learning_rate, AdagradOptions options)
    : Optimizer(std::move(options.name), options.use_locking),
      learning_rate_(std::move(learning_rate)),
      initial_accumulator_value_(options.initial_accumulator_value) {
  if (!(initial_accumulator_value_ > 0)) {
    throw ValueError(get_name() + ": initial_accumulator_value must be positive: " +
                     std::to_string(initial_accumulator_value_));
  }
}

void AdagradOptimizer::make_slots(const Variable& var) {
  make_slot(var, "accumulator", initial_accumulator_value_);
}

void AdagradOptimizer::prepare() { lr_ = read(learning_rate_, "learning_rate"); }

void AdagradOptimizer::apply_dense(const Tensor& grad, Variable& var) {
  apply_adagrad(var, slot(var, "accumulator"), Tensor(lr_), grad, {.use_locking = use_locking()});
}

void AdagradOptimizer::apply_sparse(const IndexedSlices& grad, Variable& var) {
  sparse_apply_adagrad(var, slot(var, "accumulator"), Tensor(lr_), grad,
                       {.use_locking = use_locking()});
}

RowwiseAdagradOptimizer::RowwiseAdagradOptimizer(Hyperparameter learning_rate,
                                                 AdagradOptions options)
    : AdagradOptimizer(std::move(learning_rate), std::move(options)) {}

void RowwiseAdagradOptimizer::check_variable(const Variable& var) const {
  if (var.shape().rank() < 1) {
    throw InvalidArgumentError(get_name() + " on " + quoted(var.op_name()) +
                               ": var must be at least 1 dimensional, got shape " +
                               var.shape().to_string());
  }
}

void RowwiseAdagradOptimizer::make_slots(const Variable& var) {
  make_slot(var, "accumulator", initial_accumulator_value_, TensorShape({var.shape().dim(0)}));
}

void RowwiseAdagradOptimizer::apply_dense(const Tensor& grad, Variable& var) {
  apply_rowwise_adagrad(var, slot(var, "accumulator"), Tensor(lr_), grad,
                        {.use_locking = use_locking()});
}

void RowwiseAdagradOptimizer::apply_sparse(const IndexedSlices& grad, Variable& var) {
  sparse_apply_rowwise_adagrad(var, slot(var, "accumulator"), Tensor(lr_), grad,
                               {.use_locking = use_locking()});
}

// ---------------------------------------------------------------------------
// Adam and lazy Adam

AdamOptimizer::AdamOptimizer(AdamOptions options)
    : Optimizer(options.name, options.use_locking), options_(std::move(options)) {}

void AdamOptimizer::make_slots(const Variable& var) {
  make_slot(var, "m", 0.0);
  make_slot(var, "v", 0.0);
}

void AdamOptimizer::make_non_slot_variables(const Variable& first) {
  // float32 whatever the variables' dtype: TensorFlow makes them from
  // the Python floats beta1 and beta2.
  make_non_slot_variable("beta1_power", options_.beta1, DType::kFloat, first);
  make_non_slot_variable("beta2_power", options_.beta2, DType::kFloat, first);
}

void AdamOptimizer::prepare() { lr_ = read(options_.learning_rate, "learning_rate"); }

bool AdamOptimizer::KnownPower::holds(const Variable& power) const {
  // Only this process's buffers have a version to trust without asking.
  internal::VariableStorage& storage = internal::storage(power);
  return valid && variable && variable->same_as(power) && storage.updates_in_place() &&
         storage.version() == version;
}

void AdamOptimizer::read_state() {
  auto power = [this](const char* name, KnownPower& known) {
    Variable& v = non_slot_variable(name);
    if (known.holds(v)) return known.value;
    internal::VariableStorage& storage = internal::storage(v);
    known.value = v.value().to_host().cast(DType::kDouble).scalar<double>();
    known.variable = v;
    known.version = storage.version();
    known.valid = storage.updates_in_place();
    return known.value;
  };
  beta1_power_ = power("beta1_power", known_[0]);
  beta2_power_ = power("beta2_power", known_[1]);
}

void AdamOptimizer::apply_dense(const Tensor& grad, Variable& var) {
  apply_adam(var, slot(var, "m"), slot(var, "v"), Tensor(beta1_power_), Tensor(beta2_power_),
             Tensor(lr_), hyper(options_.beta1), hyper(options_.beta2), hyper(options_.epsilon),
             grad, false, {.use_locking = use_locking()});
}

void AdamOptimizer::apply_sparse(const IndexedSlices& grad, Variable& var) {
  sparse_apply_adam(var, slot(var, "m"), slot(var, "v"), Tensor(beta1_power_), Tensor(beta2_power_),
                    Tensor(lr_), hyper(options_.beta1), hyper(options_.beta2),
                    hyper(options_.epsilon), grad, {.use_locking = use_locking()});
}

void AdamOptimizer::finish() {
  const double betas[2] = {options_.beta1, options_.beta2};
  const char* names[2] = {"beta1_power", "beta2_power"};
  for (int k = 0; k < 2; ++k) {
    Variable& power = non_slot_variable(names[k]);
    internal::VariableStorage& storage = internal::storage(power);
    KnownPower& known = known_[k];
    // Known now only if read_state() left it known and nothing wrote it
    // since: then the new value is the product the device computes, in the
    // power's dtype, rounded once (computed here on the host, which rounds
    // alike), and this assign is the one write that follows.
    const bool was_known = known.holds(power);
    // (beta a host scalar: on a GPU it is the kernel's argument.)
    Device& cpu = DeviceManager::instance().cpu();
    const Tensor beta = Tensor::filled(power.dtype(), {}, Tensor(betas[k]), cpu);
    power.assign(power.value() * beta, {.use_locking = use_locking()});
    known.valid = false;
    if (was_known && storage.version() == known.version + 1) {
      const Tensor old = Tensor(known.value).cast(power.dtype());
      known.value = (old * beta).cast(DType::kDouble).scalar<double>();
      known.version = storage.version();
      known.valid = true;
    }
  }
}

LazyAdamOptimizer::LazyAdamOptimizer(AdamOptions options) : AdamOptimizer(std::move(options)) {}

void LazyAdamOptimizer::apply_sparse(const IndexedSlices& grad, Variable& var) {
  sparse_apply_lazy_adam(var, slot(var, "m"), slot(var, "v"), Tensor(beta1_power_),
                         Tensor(beta2_power_), Tensor(lr_), hyper(options_.beta1),
                         hyper(options_.beta2), hyper(options_.epsilon), grad,
                         {.use_locking = use_locking()});
}

// ---------------------------------------------------------------------------
// RMSProp

RMSPropOptimizer::RMSPropOptimizer(Hyperparameter learning_rate, RMSPropOptions options)
    : Optimizer(options.name, options.use_locking),
      learning_rate_(std::move(learning_rate)),
      options_(std::move(options)) {}

void RMSPropOptimizer::make_slots(const Variable& var) {
  make_slot(var, "rms", 1.0);
  if (options_.centered) make_slot(var, "mg", 0.0);
  make_slot(var, "momentum", 0.0);
}

void RMSPropOptimizer::prepare() { lr_ = read(learning_rate_, "learning_rate"); }

void RMSPropOptimizer::apply_dense(const Tensor& grad, Variable& var) {
  const UpdateOptions o{.use_locking = use_locking()};
  const Tensor lr(lr_), rho = hyper(options_.decay), momentum = hyper(options_.momentum),
                        eps = hyper(options_.epsilon);
  if (options_.centered) {
    apply_centered_rms_prop(var, slot(var, "mg"), slot(var, "rms"), slot(var, "momentum"), lr, rho,
                            momentum, eps, grad, o);
  } else {
    apply_rms_prop(var, slot(var, "rms"), slot(var, "momentum"), lr, rho, momentum, eps, grad, o);
  }
}

void RMSPropOptimizer::apply_sparse(const IndexedSlices& grad, Variable& var) {
  const UpdateOptions o{.use_locking = use_locking()};
  const Tensor lr(lr_), rho = hyper(options_.decay), momentum = hyper(options_.momentum),
                        eps = hyper(options_.epsilon);
  if (options_.centered) {
    sparse_apply_centered_rms_prop(var, slot(var, "mg"), slot(var, "rms"), slot(var, "momentum"),
                                   lr, rho, momentum, eps, grad, o);
  } else {
    sparse_apply_rms_prop(var, slot(var, "rms"), slot(var, "momentum"), lr, rho, momentum, eps,
                          grad, o);
  }
}

// ---------------------------------------------------------------------------
// Ftrl

FtrlOptimizer::FtrlOptimizer(Hyperparameter learning_rate, FtrlOptions options)
    : Optimizer(options.name, options.use_locking),
      learning_rate_(std::move(learning_rate)),
      options_(std::move(options)) {
  auto check = [this](bool ok, const std::string& what, double value) {
    if (!ok) throw ValueError(get_name() + ": " + what + " = " + std::to_string(value));
  };
  check(options_.initial_accumulator_value >= 0, "initial_accumulator_value must be >= 0",
        options_.initial_accumulator_value);
  check(options_.learning_rate_power <= 0, "learning_rate_power must be <= 0",
        options_.learning_rate_power);
  check(options_.l1_regularization_strength >= 0, "l1_regularization_strength must be >= 0",
        options_.l1_regularization_strength);
  check(options_.l2_regularization_strength >= 0, "l2_regularization_strength must be >= 0",
        options_.l2_regularization_strength);
  check(options_.l2_shrinkage_regularization_strength >= 0,
        "l2_shrinkage_regularization_strength must be >= 0",
        options_.l2_shrinkage_regularization_strength);
}

void FtrlOptimizer::make_slots(const Variable& var) {
  make_slot(var, "accum", options_.initial_accumulator_value);
  make_slot(var, "linear", 0.0);
}

void FtrlOptimizer::prepare() { lr_ = read(learning_rate_, "learning_rate"); }

void FtrlOptimizer::apply_dense(const Tensor& grad, Variable& var) {
  const UpdateOptions o{.use_locking = use_locking()};
  const Tensor lr(lr_), l1 = hyper(options_.l1_regularization_strength),
                        l2 = hyper(options_.l2_regularization_strength),
                        power = hyper(options_.learning_rate_power);
  if (options_.l2_shrinkage_regularization_strength > 0) {
    apply_ftrl_v2(var, slot(var, "accum"), slot(var, "linear"), grad, lr, l1, l2,
                  hyper(options_.l2_shrinkage_regularization_strength), power, o);
  } else {
    apply_ftrl(var, slot(var, "accum"), slot(var, "linear"), grad, lr, l1, l2, power, o);
  }
}

void FtrlOptimizer::apply_sparse(const IndexedSlices& grad, Variable& var) {
  const UpdateOptions o{.use_locking = use_locking()};
  const Tensor lr(lr_), l1 = hyper(options_.l1_regularization_strength),
                        l2 = hyper(options_.l2_regularization_strength),
                        power = hyper(options_.learning_rate_power);
  if (options_.l2_shrinkage_regularization_strength > 0) {
    sparse_apply_ftrl_v2(var, slot(var, "accum"), slot(var, "linear"), grad, lr, l1, l2,
                         hyper(options_.l2_shrinkage_regularization_strength), power, o);
  } else {
    sparse_apply_ftrl(var, slot(var, "accum"), slot(var, "linear"), grad, lr, l1, l2, power, o);
  }
}

// ---------------------------------------------------------------------------
// Adadelta

AdadeltaOptimizer::AdadeltaOptimizer(AdadeltaOptions options)
    : Optimizer(options.name, options.use_locking), options_(std::move(options)) {}

void AdadeltaOptimizer::make_slots(const Variable& var) {
  make_slot(var, "accum", 0.0);
  make_slot(var, "accum_update", 0.0);
}

void AdadeltaOptimizer::prepare() { lr_ = read(options_.learning_rate, "learning_rate"); }

void AdadeltaOptimizer::apply_dense(const Tensor& grad, Variable& var) {
  apply_adadelta(var, slot(var, "accum"), slot(var, "accum_update"), Tensor(lr_),
                 hyper(options_.rho), hyper(options_.epsilon), grad,
                 {.use_locking = use_locking()});
}

void AdadeltaOptimizer::apply_sparse(const IndexedSlices& grad, Variable& var) {
  sparse_apply_adadelta(var, slot(var, "accum"), slot(var, "accum_update"), Tensor(lr_),
                        hyper(options_.rho), hyper(options_.epsilon), grad,
                        {.use_locking = use_locking()});
}

// ---------------------------------------------------------------------------
// Proximal gradient descent and proximal Adagrad

ProximalGradientDescentOptimizer::ProximalGradientDescentOptimizer(
    Hyperparameter learning_rate, ProximalGradientDescentOptions options)
    : Optimizer(options.name, options.use_locking),
      learning_rate_(std::move(learning_rate)),
      options_(std::move(options)) {}

void ProximalGradientDescentOptimizer::prepare() { lr_ = read(learning_rate_, "learning_rate"); }

void ProximalGradientDescentOptimizer::apply_dense(const Tensor& grad, Variable& var) {
  apply_proximal_gradient_descent(var, Tensor(lr_), hyper(options_.l1_regularization_strength),
                                  hyper(options_.l2_regularization_strength), grad,
                                  {.use_locking = use_locking()});
}

void ProximalGradientDescentOptimizer::apply_sparse(const IndexedSlices& grad, Variable& var) {
  sparse_apply_proximal_gradient_descent(
      var, Tensor(lr_), hyper(options_.l1_regularization_strength),
      hyper(options_.l2_regularization_strength), grad, {.use_locking = use_locking()});
}

ProximalAdagradOptimizer::ProximalAdagradOptimizer(Hyperparameter learning_rate,
                                                   ProximalAdagradOptions options)
    : Optimizer(options.name, options.use_locking),
      learning_rate_(std::move(learning_rate)),
      options_(std::move(options)) {
  if (!(options_.initial_accumulator_value > 0)) {
    throw ValueError(get_name() + ": initial_accumulator_value must be positive: " +
                     std::to_string(options_.initial_accumulator_value));
  }
}

void ProximalAdagradOptimizer::make_slots(const Variable& var) {
  make_slot(var, "accumulator", options_.initial_accumulator_value);
}

void ProximalAdagradOptimizer::prepare() {
  lr_ = read(learning_rate_, "learning_rate");
  // The op's checks, here so that nothing is created or written first.
  auto check = [this](bool ok, const char* what, double value) {
    if (!ok)
      throw InvalidArgumentError(get_name() + ": " + what + ", got " + std::to_string(value));
  };
  check(lr_ > 0, "learning_rate must be positive", lr_);
  check(options_.l1_regularization_strength >= 0, "l1_regularization_strength must be >= 0",
        options_.l1_regularization_strength);
  check(options_.l2_regularization_strength >= 0, "l2_regularization_strength must be >= 0",
        options_.l2_regularization_strength);
}

void ProximalAdagradOptimizer::apply_dense(const Tensor& grad, Variable& var) {
  apply_proximal_adagrad(
      var, slot(var, "accumulator"), Tensor(lr_), hyper(options_.l1_regularization_strength),
      hyper(options_.l2_regularization_strength), grad, {.use_locking = use_locking()});
}

void ProximalAdagradOptimizer::apply_sparse(const IndexedSlices& grad, Variable& var) {
  sparse_apply_proximal_adagrad(
      var, slot(var, "accumulator"), Tensor(lr_), hyper(options_.l1_regularization_strength),
      hyper(options_.l2_regularization_strength), grad, {.use_locking = use_locking()});
}

// ---------------------------------------------------------------------------
// AdagradDA

AdagradDAOptimizer::AdagradDAOptimizer(Hyperparameter learning_rate, Variable global_step,
                                       AdagradDAOptions options)
    : Optimizer(options.name, options.use_locking),
      learning_rate_(std::move(learning_rate)),
      global_step_(std::move(global_step)),
      options_(std::move(options)) {
  if (!(options_.initial_gradient_squared_accumulator_value > 0)) {
    throw ValueError(get_name() +
                     ": initial_gradient_squared_accumulator_value must be "
                     "positive: " +
                     std::to_string(options_.initial_gradient_squared_accumulator_value));
  }
}

void AdagradDAOptimizer::make_slots(const Variable& var) {
  make_slot(var, "gradient_accumulator", 0.0);
  make_slot(var, "gradient_squared_accumulator",
            options_.initial_gradient_squared_accumulator_value);
}

void AdagradDAOptimizer::prepare() {
  lr_ = read(learning_rate_, "learning_rate");
  const DType dtype = global_step_.dtype();
  if ((dtype != DType::kInt64 && dtype != DType::kInt32) || global_step_.shape().rank() != 0) {
    throw InvalidArgumentError(get_name() + ": global_step " + quoted(global_step_.op_name()) +
                               " must be an integer scalar, got " + std::string(dtype_name(dtype)) +
                               " " + global_step_.shape().to_string());
  }
  step_ = global_step_.value().to_host().cast(DType::kInt64).scalar<int64_t>() + 1;
}

void AdagradDAOptimizer::apply_dense(const Tensor& grad, Variable& var) {
  apply_adagrad_da(
      var, slot(var, "gradient_accumulator"), slot(var, "gradient_squared_accumulator"), grad,
      Tensor(lr_), hyper(options_.l1_regularization_strength),
      hyper(options_.l2_regularization_strength), Tensor(step_), {.use_locking = use_locking()});
}

void AdagradDAOptimizer::apply_sparse(const IndexedSlices& grad, Variable& var) {
  sparse_apply_adagrad_da(
      var, slot(var, "gradient_accumulator"), slot(var, "gradient_squared_accumulator"), grad,
      Tensor(lr_), hyper(options_.l1_regularization_strength),
      hyper(options_.l2_regularization_strength), Tensor(step_), {.use_locking = use_locking()});
}

}  // namespace varstate
