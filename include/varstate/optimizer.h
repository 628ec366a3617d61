// Optimizer: the base of TensorFlow 1.x's optimizers
// (tf.compat.v1.train.Optimizer) — applies gradients the caller computed
// (there is no autodiff) to variables, keeping per-variable state in slot
// variables. The optimizers themselves are in varstate/optimizers.h.
//
//   AdamOptimizer opt({.learning_rate = 0.001});
//   opt.apply_gradients({{grad_w, w}, {IndexedSlices(rows, ids), emb}}, &global_step);
//   Variable m = *opt.get_slot(w, "m");   // "w/Adam", on w's device
//
// Slots are created on the first apply_gradients (or create_slots) for a
// variable, colocated with it (same device), named as TensorFlow names them
// ("<var>/<optimizer name>", then "_1", "_2" for the next slots of that
// variable, outside any name scope), initialized at once, not trainable and
// in GLOBAL_VARIABLES, so a Saver built afterwards saves them. A slot of a
// partition ("emb/part_1") is a partition of the slot of the whole variable
// ("emb/part_1/Adam" is a slice of "emb/Adam"), as in TensorFlow, so
// checkpoints restore into either library and across repartitioning.
// Non-slot state (Adam's beta1_power / beta2_power) are variables too,
// created in the current name scope and colocated with the variable whose
// name sorts first: everything needed to continue training bit-exactly
// after a restore is a variable.
//
// Parameter-server variables (varstate/cluster.h): the slots are created
// on the variable's task (create_slots is then collective, as any remote
// creation: every task makes the same calls), and apply_gradients
// validates every update before it runs the remote ones together, one
// locked exchange per window and owner (varstate/training_ops.h).
//
// Thread safety: an Optimizer serializes its own apply_gradients and
// create_slots calls; the updates follow the training ops' rules
// (varstate/training_ops.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "varstate/gradient.h"
#include "varstate/indexed_slices.h"
#include "varstate/tensor.h"
#include "varstate/tensor_shape.h"
#include "varstate/variable.h"

namespace varstate {

// apply_gradients takes GradientAndVariable pairs (a dense or IndexedSlices
// Gradient and its Variable): varstate/gradient.h, included here.

// A hyperparameter: a number, a Variable read at every apply (a program
// may assign it; checkpoints save it), or a schedule: a function computing
// the value at every read, such as the learning rate decays of
// varstate/learning_rate_decay.h (exponential_decay(0.1, global_step, ...)).
class Hyperparameter {
 public:
  using Schedule = std::function<Tensor()>;
  Hyperparameter(double value) : value_(value) {}                    // NOLINT: implicit
  Hyperparameter(const Variable& variable) : variable_(variable) {}  // NOLINT: implicit
  // `name` names the schedule in errors.
  Hyperparameter(Schedule schedule, std::string name)
      : schedule_(std::move(schedule)), name_(std::move(name)) {}
  // The current value as a double. A Variable or a schedule must give a
  // real scalar (InvalidArgumentError naming it otherwise).
  double value() const;
  // The current value as TensorFlow would convert it to a tensor: a
  // number is a float32 scalar (a Python float's conversion), a Variable
  // its value, a schedule what it computes (a real scalar, checked as
  // value()).
  Tensor tensor() const;
  // True for a number (a Python float in TensorFlow's terms).
  bool is_number() const { return !variable_ && !schedule_; }

 private:
  double value_ = 0;
  std::optional<Variable> variable_;
  Schedule schedule_;
  std::string name_;
};

class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // "Adam", or the name given.
  const std::string& get_name() const;

  // Applies each gradient to its variable, then (when global_step is
  // given) adds 1 to global_step. IndexedSlices gradients update only their
  // rows (Adam: see AdamOptimizer), their duplicate indices summed first.
  // Everything is checked before anything is created or written, so a call
  // that throws leaves the graph (no new slot or non-slot variable, no
  // collection changed), every variable, slot and global_step as it was:
  // ValueError for an empty list, no gradient at all, a variable given
  // twice, a variable whose dtype the optimizer cannot train (float16,
  // bfloat16, float32 and float64 only, as TensorFlow's optimizers) or a
  // variable or global_step outside the default graph (TensorFlow: "must be
  // from the same graph"); FailedPreconditionError for an uninitialized
  // variable; TypeError and InvalidArgumentError for gradients as
  // varstate/training_ops.h, for a hyperparameter that is not a numeric
  // scalar, and for a global_step that is not an integer scalar.
  void apply_gradients(const std::vector<GradientAndVariable>& grads_and_vars,
                       Variable* global_step = nullptr);

  // Creates the slots and non-slot variables of `var_list` now, as building
  // TensorFlow's train op does, so that a Saver built next can restore them
  // before the first step. Variables that have them are skipped. Every
  // variable is checked first (ValueError for a dtype the optimizer cannot
  // train, and the optimizer's own checks), so a call that throws creates
  // nothing.
  void create_slots(const std::vector<Variable>& var_list);

  // The slot `name` ("m") of `var`; nullopt if there is none (yet).
  std::optional<Variable> get_slot(const Variable& var, std::string_view name) const;
  // The slot names this optimizer uses, sorted ({"m", "v"}).
  std::vector<std::string> get_slot_names() const;
  // The optimizer's variables (slots and non-slot variables) in the
  // default graph, sorted by name.
  std::vector<Variable> variables() const;

 protected:
  Optimizer(std::string name, bool use_locking);

  // TensorFlow's hooks: checking a variable before any slot is created
  // (throw there: nothing is created for a variable the optimizer cannot
  // train; the base has checked its dtype and graph already); the slots of
  // one variable; reading the hyperparameters once per apply, before any
  // slot is created (throw there); reading the optimizer's own variables
  // (Adam's beta powers) once the slots exist; one update; the work after
  // all updates.
  virtual void check_variable(const Variable& var) const {}
  virtual void make_slots(const Variable& var) = 0;
  virtual void prepare() {}
  virtual void read_state() {}
  virtual void apply_dense(const Tensor& grad, Variable& var) = 0;
  virtual void apply_sparse(const IndexedSlices& grad, Variable& var) = 0;
  virtual void finish() {}
  // Non-slot variables, created for the first variable of a create_slots
  // call (`first`: the one whose name sorts first).
  virtual void make_non_slot_variables(const Variable& first) {}

  // Slot helpers: a slot of `var` filled with `value` (shape: var's, or
  // `shape` for per-row slots whose partitions follow var's rows), and the
  // slot itself.
  Variable& make_slot(const Variable& var, const std::string& slot_name, double value,
                      std::optional<TensorShape> shape = std::nullopt);
  Variable& slot(const Variable& var, const std::string& slot_name);
  // A non-slot variable `name` of `dtype` (created once per graph, in the
  // current name scope, colocated with `colocate_with`) and its lookup.
  Variable& make_non_slot_variable(const std::string& name, double value, DType dtype,
                                   const Variable& colocate_with);
  Variable& non_slot_variable(const std::string& name);
  // A hyperparameter's value, checked in prepare(): a finite number. A
  // number is rounded to float32 first (hyper()); a Variable's value is
  // taken as it is.
  double read(const Hyperparameter& h, std::string_view what) const;
  // A number given as a hyperparameter, as TensorFlow's optimizers take
  // it: a Python float becomes a float32 tensor, cast to each variable's
  // dtype when applied. So a float64 variable trains with
  // double(float(0.1)), as in TensorFlow, not with 0.1.
  static Tensor hyper(double value) {
    return Tensor(static_cast<double>(static_cast<float>(value)));
  }
  bool use_locking() const;

 private:
  void create_slots_locked(const std::vector<Variable>& var_list);

  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace varstate
