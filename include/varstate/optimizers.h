// TensorFlow 1.x's optimizers (tf.compat.v1.train.*Optimizer) on the
// training ops of varstate/training_ops.h, and two that are not
// TensorFlow's (marked below). The shared behaviour — apply_gradients,
// slots, names, checkpoints — is Optimizer's (varstate/optimizer.h).
//
//   GradientDescentOptimizer sgd(0.1);
//   MomentumOptimizer momentum(0.1, 0.9, {.use_nesterov = true});
//   AdamOptimizer adam({.learning_rate = 0.001});
//   AdagradOptimizer adagrad(lr_variable);  // a Variable: read at each apply
//
// Each takes its arguments in TensorFlow's order, with TensorFlow's
// defaults; a number given as a hyperparameter is float32, as TensorFlow
// converts a Python float, and is cast to each variable's dtype.
// Slots, in creation order (so their names: "w/<name>", "w/<name>_1", ...):
//   GradientDescent  none
//   Momentum         momentum                 zeros
//   Adagrad          accumulator              initial_accumulator_value
//   Adam             m, v                     zeros; plus beta1_power and
//                                             beta2_power (initial beta1,
//                                             beta2; multiplied by them after
//                                             each apply_gradients)
//   RMSProp          rms, (mg if centered,) momentum   ones, zeros, zeros
//   Ftrl             accum, linear            initial_accumulator_value, zeros
//   Adadelta         accum, accum_update      zeros, zeros
//   ProximalGradientDescent  none
//   ProximalAdagrad  accumulator              initial_accumulator_value
//   AdagradDA        gradient_accumulator, gradient_squared_accumulator
//                                             zeros,
//                                             initial_gradient_squared_accumulator_value
#pragma once

#include <optional>
#include <string>

#include "varstate/optimizer.h"

namespace varstate {

struct GradientDescentOptions {
  bool use_locking = false;
  std::string name = "GradientDescent";
};

// var -= learning_rate * grad (sparse: per duplicate, as TensorFlow).
class GradientDescentOptimizer : public Optimizer {
 public:
  explicit GradientDescentOptimizer(Hyperparameter learning_rate,
                                    GradientDescentOptions options = {});

 protected:
  void make_slots(const Variable&) override {}
  void prepare() override;
  void apply_dense(const Tensor& grad, Variable& var) override;
  void apply_sparse(const IndexedSlices& grad, Variable& var) override;

 private:
  Hyperparameter learning_rate_;
  double lr_ = 0;
};

struct MomentumOptions {
  bool use_locking = false;
  std::string name = "Momentum";
  bool use_nesterov = false;
};

class MomentumOptimizer : public Optimizer {
 public:
  MomentumOptimizer(Hyperparameter learning_rate, Hyperparameter momentum,
                    MomentumOptions options = {});

 protected:
  void make_slots(const Variable& var) override;
  void prepare() override;
  void apply_dense(const Tensor& grad, Variable& var) override;
  void apply_sparse(const IndexedSlices& grad, Variable& var) override;

 private:
  Hyperparameter learning_rate_, momentum_;
  bool use_nesterov_;
  double lr_ = 0, momentum_value_ = 0;
};

struct AdagradOptions {
  double initial_accumulator_value = 0.1;
  bool use_locking = false;
  std::string name = "Adagrad";
};

class AdagradOptimizer : public Optimizer {
 public:
  explicit AdagradOptimizer(Hyperparameter learning_rate, AdagradOptions options = {});

 protected:
  void make_slots(const Variable& var) override;
  void prepare() override;
  void apply_dense(const Tensor& grad, Variable& var) override;
  void apply_sparse(const IndexedSlices& grad, Variable& var) override;

  Hyperparameter learning_rate_;
  double initial_accumulator_value_;
  double lr_ = 0;
};

// Not TensorFlow's: row-wise Adagrad (varstate/training_ops.h), one
// accumulator per row ("w/RowwiseAdagrad", shape [rows]) — the memory of
// an embedding table's Adagrad state divided by its width. Variables of
// rank >= 1.
class RowwiseAdagradOptimizer : public AdagradOptimizer {
 public:
  explicit RowwiseAdagradOptimizer(Hyperparameter learning_rate,
                                   AdagradOptions options = {.name = "RowwiseAdagrad"});

 protected:
  void check_variable(const Variable& var) const override;
  void make_slots(const Variable& var) override;
  void apply_dense(const Tensor& grad, Variable& var) override;
  void apply_sparse(const IndexedSlices& grad, Variable& var) override;
};

struct AdamOptions {
  Hyperparameter learning_rate = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  bool use_locking = false;
  std::string name = "Adam";
};

// Dense gradients: ApplyAdam. IndexedSlices: as TensorFlow's compat.v1
// AdamOptimizer, m and v of every row decay and every row moves
// (sparse_apply_adam) — use LazyAdamOptimizer to touch only the batch.
class AdamOptimizer : public Optimizer {
 public:
  explicit AdamOptimizer(AdamOptions options = {});

 protected:
  void make_slots(const Variable& var) override;
  void make_non_slot_variables(const Variable& first) override;
  void prepare() override;
  void read_state() override;
  void apply_dense(const Tensor& grad, Variable& var) override;
  void apply_sparse(const IndexedSlices& grad, Variable& var) override;
  void finish() override;

  AdamOptions options_;
  double lr_ = 0, beta1_power_ = 0, beta2_power_ = 0;

 private:
  // Each beta power as finish() last wrote it and its variable's version
  // then: read_state() reads the variable only when something else has
  // changed it since (an assign, a restore), so that a step on a GPU does
  // not wait to read the powers back.
  struct KnownPower {
    bool valid = false;
    std::optional<Variable> variable;  // which one (a new graph makes new ones)
    uint64_t version = 0;              // its version when read or written here
    double value = 0;
    // True when this still is `power`'s value: `power` is the variable
    // read or written here, held in this process, and unchanged since.
    bool holds(const Variable& power) const;
  };
  KnownPower known_[2];
};

// Not TensorFlow's (TensorFlow Addons' LazyAdam): IndexedSlices gradients
// update m, v and var on the batch's rows only (sparse_apply_lazy_adam);
// dense gradients as AdamOptimizer.
class LazyAdamOptimizer : public AdamOptimizer {
 public:
  explicit LazyAdamOptimizer(AdamOptions options = {.name = "LazyAdam"});

 protected:
  void apply_sparse(const IndexedSlices& grad, Variable& var) override;
};

struct RMSPropOptions {
  double decay = 0.9;
  double momentum = 0.0;
  double epsilon = 1e-10;
  bool use_locking = false;
  bool centered = false;
  std::string name = "RMSProp";
};

class RMSPropOptimizer : public Optimizer {
 public:
  explicit RMSPropOptimizer(Hyperparameter learning_rate, RMSPropOptions options = {});

 protected:
  void make_slots(const Variable& var) override;
  void prepare() override;
  void apply_dense(const Tensor& grad, Variable& var) override;
  void apply_sparse(const IndexedSlices& grad, Variable& var) override;

 private:
  Hyperparameter learning_rate_;
  RMSPropOptions options_;
  double lr_ = 0;
};

struct FtrlOptions {
  double learning_rate_power = -0.5;
  double initial_accumulator_value = 0.1;
  double l1_regularization_strength = 0.0;
  double l2_regularization_strength = 0.0;
  bool use_locking = false;
  std::string name = "Ftrl";
  double l2_shrinkage_regularization_strength = 0.0;
};

class FtrlOptimizer : public Optimizer {
 public:
  // ValueError (as TensorFlow) for a negative
  // initial_accumulator_value, l1, l2 or l2_shrinkage, or a positive
  // learning_rate_power.
  explicit FtrlOptimizer(Hyperparameter learning_rate, FtrlOptions options = {});

 protected:
  void make_slots(const Variable& var) override;
  void prepare() override;
  void apply_dense(const Tensor& grad, Variable& var) override;
  void apply_sparse(const IndexedSlices& grad, Variable& var) override;

 private:
  Hyperparameter learning_rate_;
  FtrlOptions options_;
  double lr_ = 0;
};

struct AdadeltaOptions {
  Hyperparameter learning_rate = 0.001;
  double rho = 0.95;
  double epsilon = 1e-8;
  bool use_locking = false;
  std::string name = "Adadelta";
};

// Adadelta (apply_adadelta / sparse_apply_adadelta).
class AdadeltaOptimizer : public Optimizer {
 public:
  explicit AdadeltaOptimizer(AdadeltaOptions options = {});

 protected:
  void make_slots(const Variable& var) override;
  void prepare() override;
  void apply_dense(const Tensor& grad, Variable& var) override;
  void apply_sparse(const IndexedSlices& grad, Variable& var) override;

 private:
  AdadeltaOptions options_;
  double lr_ = 0;
};

struct ProximalGradientDescentOptions {
  double l1_regularization_strength = 0.0;
  double l2_regularization_strength = 0.0;
  bool use_locking = false;
  std::string name = "ProximalGradientDescent";
};

// Gradient descent with TensorFlow's proximal (Fobos) l1/l2 step
// (apply_proximal_gradient_descent); IndexedSlices gradients have their
// duplicate indices summed first, as TensorFlow's optimizer does.
class ProximalGradientDescentOptimizer : public Optimizer {
 public:
  explicit ProximalGradientDescentOptimizer(Hyperparameter learning_rate,
                                            ProximalGradientDescentOptions options = {});

 protected:
  void make_slots(const Variable&) override {}
  void prepare() override;
  void apply_dense(const Tensor& grad, Variable& var) override;
  void apply_sparse(const IndexedSlices& grad, Variable& var) override;

 private:
  Hyperparameter learning_rate_;
  ProximalGradientDescentOptions options_;
  double lr_ = 0;
};

struct ProximalAdagradOptions {
  double initial_accumulator_value = 0.1;
  double l1_regularization_strength = 0.0;
  double l2_regularization_strength = 0.0;
  bool use_locking = false;
  std::string name = "ProximalAdagrad";
};

// Adagrad's learning rate with the proximal step (apply_proximal_adagrad).
// ValueError (as TensorFlow) for an initial_accumulator_value that is not
// positive; InvalidArgumentError from apply_gradients, before anything is
// created or written, for a learning rate that is not positive or a
// negative l1 or l2 (TensorFlow's kernel checks).
class ProximalAdagradOptimizer : public Optimizer {
 public:
  explicit ProximalAdagradOptimizer(Hyperparameter learning_rate,
                                    ProximalAdagradOptions options = {});

 protected:
  void make_slots(const Variable& var) override;
  void prepare() override;
  void apply_dense(const Tensor& grad, Variable& var) override;
  void apply_sparse(const IndexedSlices& grad, Variable& var) override;

 private:
  Hyperparameter learning_rate_;
  ProximalAdagradOptions options_;
  double lr_ = 0;
};

struct AdagradDAOptions {
  double initial_gradient_squared_accumulator_value = 0.1;
  double l1_regularization_strength = 0.0;
  double l2_regularization_strength = 0.0;
  bool use_locking = false;
  std::string name = "AdagradDA";
};

// Adagrad dual averaging (apply_adagrad_da), for sparse linear models:
// `global_step` (an integer scalar variable, the one apply_gradients
// increments) is read at every apply, and the update is for step
// global_step + 1, as TensorFlow's. ValueError (as TensorFlow) for an
// initial_gradient_squared_accumulator_value that is not positive.
class AdagradDAOptimizer : public Optimizer {
 public:
  AdagradDAOptimizer(Hyperparameter learning_rate, Variable global_step,
                     AdagradDAOptions options = {});

 protected:
  void make_slots(const Variable& var) override;
  void prepare() override;
  void apply_dense(const Tensor& grad, Variable& var) override;
  void apply_sparse(const IndexedSlices& grad, Variable& var) override;

 private:
  Hyperparameter learning_rate_;
  Variable global_step_;
  AdagradDAOptions options_;
  double lr_ = 0;
  int64_t step_ = 0;  // global_step + 1, read by prepare()
};

}  // namespace varstate
