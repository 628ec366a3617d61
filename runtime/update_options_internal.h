// Runtime-internal: the effective use_locking of an update, decided in one
// place for every entry (varstate/update_options.h has the table this
// follows, TensorFlow's defaults for an unset use_locking).
#pragma once

#include "kernels/common.h"
#include "varstate/update_options.h"

namespace varstate::internal {

// How an update was called; TensorFlow's defaults differ between them.
enum class UpdateCaller {
  kFunction,     // assign(Variable&, ...), scatter_*(Variable&, ...), their _op forms
  kMethod,       // the methods of Variable and VariableSlice (tf.Variable's)
  kPartitioned,  // PartitionedVariable's methods and their _op forms
};

// options.use_locking, or when unset: true for tf.assign (a kFunction
// assign), false for the other dense updates.
inline bool use_locking(const UpdateOptions& options, kernels::DenseUpdateOp op,
                        UpdateCaller caller) {
  return options.use_locking.value_or(op == kernels::DenseUpdateOp::kAssign &&
                                      caller == UpdateCaller::kFunction);
}

// options.use_locking, or when unset: true for tf.scatter_update (a
// kFunction or kPartitioned scatter_update), false for the other scatters.
inline bool use_locking(const UpdateOptions& options, kernels::ScatterOp op, UpdateCaller caller) {
  return options.use_locking.value_or(op == kernels::ScatterOp::kUpdate &&
                                      caller != UpdateCaller::kMethod);
}

}  // namespace varstate::internal
