// Build once, run many: the variable updates as Ops.
//
// Variable::assign_add(delta) and the scatter functions update at once, when
// called. A TensorFlow 1 program builds its training step once and runs it
// many times; these functions build that step as an Op that performs the
// update each time a Session runs it:
//
//   Variable v(Tensor(0.f), {.name = "v"});
//   Op train_op = Op::group({assign_add_op(v, 1.f), scatter_add_op(emb, ids, grads)}, "train");
//   for (int step = 0; step < 1000; ++step) sess.run(train_op);  // v ends at 1000
//
// An UpdateValue is read when the Op runs: a Tensor (its current contents),
// a Variable (its value at that moment), a Placeholder (fed to the run:
// sess.run(op, {{ids, batch}})) or a callable returning a Tensor.
// Running an Op validates and updates exactly as the eager function of the
// same name does (same errors, raised by Session::run; a failing run
// changes nothing). Ops hold handles to the variables, so the variables
// live as long as the Ops. Each Op is named "<variable>/<TypeName>".
#pragma once

#include <cstdint>
#include <functional>
#include <type_traits>
#include <utility>
#include <variant>

#include "varstate/partitioned_variable.h"
#include "varstate/placeholder.h"
#include "varstate/scatter.h"
#include "varstate/session.h"
#include "varstate/tensor.h"
#include "varstate/variable.h"

namespace varstate {

// A value read each time an update Op runs: a Tensor (its contents), a
// Variable (its value at that moment), a Placeholder (the value fed to the
// run) or a callable returning a Tensor. Ops whose values are Tensors,
// Variables and Placeholders are written to exported meta graphs and run
// after import_meta_graph; a callable's Op is exported by name only.
class UpdateValue {
 public:
  UpdateValue(Tensor t);                    // NOLINT: implicit
  UpdateValue(Variable v);                  // NOLINT: implicit
  UpdateValue(Placeholder p);               // NOLINT: implicit
  UpdateValue(std::function<Tensor()> fn);  // NOLINT: implicit
  template <typename Fn>
  requires(std::is_invocable_r_v<Tensor, Fn&> &&
           !std::is_same_v<std::decay_t<Fn>, std::function<Tensor()>>) UpdateValue(Fn fn)
      : UpdateValue(std::function<Tensor()>(std::move(fn))) {}  // NOLINT: implicit
  template <typename T>
  requires std::is_arithmetic_v<T> UpdateValue(T value)
      : UpdateValue(Tensor(value)) {}  // NOLINT: implicit
  // The value now (a Placeholder's raises InvalidArgumentError outside a
  // run that feeds it).
  Tensor get() const;

  // What the value is read from: the one that applies, or nullptr (all
  // three are null for a callable).
  const Tensor* as_tensor() const { return std::get_if<Tensor>(&source_); }
  const Variable* as_variable() const { return std::get_if<Variable>(&source_); }
  const Placeholder* as_placeholder() const { return std::get_if<Placeholder>(&source_); }

 private:
  std::variant<Tensor, Variable, Placeholder, std::function<Tensor()>> source_;
};

// Options (varstate/update_options.h) as the eager function's, with its
// default for an unset use_locking (assign_op: true; assign_add_op,
// assign_sub_op: false; scatter_update_op: true, the other scatters: false).
Op assign_op(Variable ref, UpdateValue value, const UpdateOptions& options = {});
Op assign_add_op(Variable ref, UpdateValue delta, const UpdateOptions& options = {});
Op assign_sub_op(Variable ref, UpdateValue delta, const UpdateOptions& options = {});
// Increments an int32/int64 scalar each run; the run that would pass
// `limit` raises OutOfRangeError (read the count with ref.eval()).
Op count_up_to_op(Variable ref, int64_t limit);

Op scatter_update_op(Variable ref, UpdateValue indices, UpdateValue updates,
                     const UpdateOptions& options = {});
Op scatter_add_op(Variable ref, UpdateValue indices, UpdateValue updates,
                  const UpdateOptions& options = {});
Op scatter_sub_op(Variable ref, UpdateValue indices, UpdateValue updates,
                  const UpdateOptions& options = {});
Op scatter_mul_op(Variable ref, UpdateValue indices, UpdateValue updates,
                  const UpdateOptions& options = {});
Op scatter_div_op(Variable ref, UpdateValue indices, UpdateValue updates,
                  const UpdateOptions& options = {});
Op scatter_min_op(Variable ref, UpdateValue indices, UpdateValue updates,
                  const UpdateOptions& options = {});
Op scatter_max_op(Variable ref, UpdateValue indices, UpdateValue updates,
                  const UpdateOptions& options = {});

// The same on a PartitionedVariable (each run routes to the parts; an unset
// use_locking is false for the dense updates, as PartitionedVariable::assign).
Op assign_op(PartitionedVariable ref, UpdateValue value, const UpdateOptions& options = {});
Op assign_add_op(PartitionedVariable ref, UpdateValue delta, const UpdateOptions& options = {});
Op assign_sub_op(PartitionedVariable ref, UpdateValue delta, const UpdateOptions& options = {});
Op scatter_update_op(PartitionedVariable ref, UpdateValue indices, UpdateValue updates,
                     const UpdateOptions& options = {});
Op scatter_add_op(PartitionedVariable ref, UpdateValue indices, UpdateValue updates,
                  const UpdateOptions& options = {});
Op scatter_sub_op(PartitionedVariable ref, UpdateValue indices, UpdateValue updates,
                  const UpdateOptions& options = {});
Op scatter_mul_op(PartitionedVariable ref, UpdateValue indices, UpdateValue updates,
                  const UpdateOptions& options = {});
Op scatter_div_op(PartitionedVariable ref, UpdateValue indices, UpdateValue updates,
                  const UpdateOptions& options = {});
Op scatter_min_op(PartitionedVariable ref, UpdateValue indices, UpdateValue updates,
                  const UpdateOptions& options = {});
Op scatter_max_op(PartitionedVariable ref, UpdateValue indices, UpdateValue updates,
                  const UpdateOptions& options = {});

}  // namespace varstate
