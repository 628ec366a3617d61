// The options of every update, as LevelDB's WriteOptions: one struct for
// the dense updates (assign, assign_add, assign_sub) and the sparse ones
// (scatter_*), on a Tensor, a Variable, a VariableSlice or a
// PartitionedVariable, called at once or built as an Op (state_ops.h):
//
//   assign(v, value, {.validate_shape = false});
//   v.assign_add(delta, {.use_locking = true});
//   scatter_add(emb, ids, grads, {.use_locking = true, .deterministic = true});
//
// Members, in declaration order (designated initializers must follow it):
//   use_locking, validate_shape, deterministic, synchronous, name.
// Each update reads the members that apply to it and ignores the others.
#pragma once

#include <optional>
#include <string_view>

namespace varstate {

struct UpdateOptions {
  // Hold the variable's update lock (Variable::assign and the scatter ops
  // with use_locking=true serialize with each other). nullopt: the
  // TensorFlow default of the function called, which differs per op:
  //   true   assign(Variable&, ...) and assign_op(Variable, ...) (tf.assign);
  //          scatter_update(...), scatter_update_op(...) and
  //          PartitionedVariable::scatter_update (tf.scatter_update);
  //   false  the others: assign_add / assign_sub and their _op forms, the
  //          other scatter ops, the methods of Variable and VariableSlice
  //          (tf.Variable's methods default to False), and
  //          PartitionedVariable's assign / assign_add / assign_sub with
  //          their _op forms.
  // A plain Tensor has no lock: its updates ignore use_locking.
  std::optional<bool> use_locking = std::nullopt;
  // assign only. False (or a Variable created with validate_shape=false):
  // the target takes the value's shape (a new buffer; other handles to the
  // old buffer keep the old contents). A PartitionedVariable cannot change
  // shape (InvalidArgumentError for another shape).
  bool validate_shape = true;
  // Scatter only: the deterministic GPU path; nullopt: deterministic_ops()
  // (varstate/scatter.h).
  std::optional<bool> deterministic = std::nullopt;
  // Scatter only: wait for a GPU's bounds check and raise its error from
  // this call; nullopt: synchronous_scatter_checks() (varstate/scatter.h).
  std::optional<bool> synchronous = std::nullopt;
  // Names the update in error messages: the target of a Tensor update
  // ("w:0"), the operation of a scatter (the variable is always named).
  std::string_view name = {};
};

}  // namespace varstate
