// Runtime-internal: the shared validation and dispatch of the training ops
// (runtime/training_ops.cc), also used by the optimizers
// (runtime/optimizer.cc) to check every gradient before anything changes.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/training_functors.h"
#include "varstate/indexed_slices.h"
#include "varstate/tensor.h"
#include "varstate/update_options.h"
#include "varstate/variable.h"

namespace varstate::internal {

// A slot of a training op: the variable and its role in messages ("accum").
struct TrainingSlot {
  Variable* var;
  const char* role;
};

// One training op on a variable, validated in steps: the constructor checks
// the variable and the slots, scalar() each hyperparameter, then
// apply_dense / apply_sparse the gradient and run the kernel. Every check
// precedes every write.
class TrainingCall {
 public:
  // `tf_name`: TensorFlow's op name ("ApplyAdam"), for messages.
  TrainingCall(kernels::TrainingOp op, std::string_view tf_name, Variable& var,
               std::vector<TrainingSlot> slots, const UpdateOptions& options);

  // The scalar `t` (named `what`) as a double; InvalidArgumentError when it
  // is not a scalar, TypeError for a strongly typed tensor of another dtype.
  double scalar(const Tensor& t, std::string_view what) const;

  kernels::TrainingHyper& hyper() { return hyper_; }
  const std::string& who() const { return who_; }

  Tensor apply_dense(const Tensor& grad);
  Tensor apply_sparse(const IndexedSlices& grad);

 private:
  void check_slot(const TrainingSlot& slot, const Tensor& table) const;
  // Runs the kernel; false when there was nothing to write.
  bool run(const Tensor& grad, const Tensor* indices);
  // The variable and its slots.
  std::vector<Variable*> written();

  kernels::TrainingOp op_;
  Variable& var_;
  std::vector<TrainingSlot> slots_;
  UpdateOptions options_;
  std::string who_;
  Tensor table_;
  std::vector<Tensor> slot_tables_;
  kernels::TrainingHyper hyper_;
};

// The gradient for `var` converted to its dtype and checked against its
// shape as apply_dense / apply_sparse would (InvalidArgumentError, TypeError
// naming `who`); index values too. Nothing is written, but with `marks`
// (dirty rows of the variable and its slots, runtime/dirty_rows_internal.h)
// each index's row is marked in the pass that checks it.
Tensor checked_dense_gradient(const Tensor& grad, const Variable& var, const std::string& who);
void check_sparse_gradient(const IndexedSlices& grad, const Variable& var, const std::string& who,
                           std::span<std::atomic<uint8_t>* const> marks = {});

}  // namespace varstate::internal
