// Training-internal: the shared validation and dispatch of the training ops
// (training/training_call.cc; the ops themselves in training/training_ops.cc),
// also used by the optimizers (training/optimizer.cc) to check every gradient
// before anything changes.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/training_functors.h"
#include "runtime/variable_storage.h"
#include "varstate/indexed_slices.h"
#include "varstate/tensor.h"
#include "varstate/update_options.h"
#include "varstate/variable.h"

namespace varstate::kernels::cuda {
struct IndexCheck;  // kernels/cuda/scatter.h
}  // namespace varstate::kernels::cuda

namespace varstate::internal {

// A training op's kernel call, apart from the variables: the op, its
// hyperparameters, and the name for messages.
struct TrainingKernel {
  kernels::TrainingOp op;
  kernels::TrainingHyper hyper;
  bool deterministic = true;
  std::string who;

  // Runs the kernel on `tables` (the variable's, then the slots'; on one
  // device) with `grad` (and, for a sparse op, `indices`, rows of
  // tables[0]); false when there was nothing to write. On a GPU, `check`
  // (a record the indices were validated into on the device first) makes
  // the sparse kernels write nothing past a bad index.
  bool run(const std::vector<Tensor>& tables, const Tensor& grad, const Tensor* indices,
           const kernels::cuda::IndexCheck* check = nullptr) const;
};

// While one is open on a thread (Optimizer::apply_gradients opens one),
// the training ops that thread calls on variables whose rows move to and
// from their storage (VariableStorage::updates_in_place() false: remote
// variables) are validated at once but run when it is flushed: all of them
// as one VariableStorage::modify_rows, for remote storage one exchange per
// window and owner (the parts of a partitioned variable on one task, and
// the slots created together, share a window) instead of one per variable
// and slot. Closed without flush() (an error on the way), it drops them:
// nothing is written.
class RemoteApplyBatch {
 public:
  RemoteApplyBatch();
  ~RemoteApplyBatch();
  RemoteApplyBatch(const RemoteApplyBatch&) = delete;
  RemoteApplyBatch& operator=(const RemoteApplyBatch&) = delete;
  // The innermost batch open on this thread, or nullptr.
  static RemoteApplyBatch* current();
  // Adds `update` to the thread's open batch, or, with none open, runs it
  // now as a modify_rows of its own.
  static void submit(RowsUpdate update);
  void add(RowsUpdate update);
  void flush();

 private:
  RemoteApplyBatch* outer_;
  std::vector<RowsUpdate> updates_;
};

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
  // Slots are held where their variable is (VariableStorage::holder():
  // both here, or both by one task; InvalidArgumentError naming both
  // otherwise).
  void check_holder(const TrainingSlot& slot) const;
  void check_slot(const TrainingSlot& slot, DType dtype, const TensorShape& shape) const;
  void check_device(const TrainingSlot& slot, const Tensor& table) const;
  TensorShape var_shape() const;
  // Runs the kernel on the local tables, with the update locks when
  // use_locking; false when there was nothing to write.
  bool run_locked(const Tensor& grad, const Tensor* indices);
  // The update locks of the variable and its slots, when use_locking.
  std::vector<std::unique_lock<std::mutex>> update_locks();
  // apply_sparse on a GPU variable with indices on its device: checked
  // there (runtime/deferred_check.h), rows marked there, nothing copied to
  // the host.
  Tensor apply_sparse_on_device(const IndexedSlices& grad);
  // The op on a variable whose rows move (a remote one; grad and indices
  // on the host): one locked read-modify-write of the variable and its
  // slots where they live (VariableStorage::modify_rows), of the batch's
  // distinct rows only, or of the whole values (dense, and sparse Adam,
  // which moves every row); deferred to the thread's RemoteApplyBatch when
  // one is open. Returns the new value for a dense op run now, else an
  // empty tensor.
  Tensor apply_by_rows(const Tensor& grad, const Tensor* indices);
  // The op on a dynamic variable (runtime/keyed_storage.h): the kernel in
  // place on its table's rows of the batch's keys (new keys inserted), as
  // on a dense variable with those rows' ids.
  Tensor apply_keyed(const IndexedSlices& grad);
  // The variable and its slots.
  std::vector<Variable*> written();

  kernels::TrainingOp op_;
  Variable& var_;
  std::vector<TrainingSlot> slots_;
  UpdateOptions options_;
  std::string who_;
  VariableStorage* storage_ = nullptr;
  // storage_->updates_in_place(): the kernel runs here on the buffers.
  bool in_place_ = true;
  DType dtype_ = DType::kInvalid;
  Tensor table_;
  std::vector<Tensor> slot_tables_;
  kernels::TrainingHyper hyper_;
};

// The gradient for `var` converted to its dtype and checked against its
// shape as apply_dense / apply_sparse would (InvalidArgumentError, TypeError
// naming `who`); index values too, unless indices_checked_on_device (the
// op checks those on the device, deferring the error to the variable).
// Nothing is written, but with `marks` (dirty rows of the variable and its
// slots, runtime/dirty_rows.h) each index's row is marked in the pass that
// checks it.
Tensor checked_dense_gradient(const Tensor& grad, const Variable& var, const std::string& who);
void check_sparse_gradient(const IndexedSlices& grad, const Variable& var, const std::string& who,
                           std::span<std::atomic<uint8_t>* const> marks = {});
// Whether a sparse update of `var` by `grad` checks its index values on the
// device: `var`'s rows are on a GPU, updated in place, and `grad`'s indices
// are on that GPU (as a GPU scatter does with such indices).
bool indices_checked_on_device(const IndexedSlices& grad, const Variable& var);

// avg -= (avg - value) * factor in one pass (kernels' kMovingAverage), on
// avg's device, through TrainingCall (locks, remote variables, dirty rows):
// TensorFlow's assign_moving_average, each of its Sub, Mul and AssignSub
// rounded to the dtype as TensorFlow's ops round them. `value` has avg's
// shape; `factor` is 1 - decay in avg's dtype.
Tensor apply_moving_average(Variable& avg, const Tensor& value, double factor,
                            const UpdateOptions& options);

// True for the dtypes the training ops and optimizers update (float16,
// bfloat16, float32, float64).
bool is_training_dtype(DType dtype);

// The distinct values of `indices` (int32 or int64, on the host),
// ascending, and in `compact` each index's position among them (int64):
// the rows a sparse op on a remote variable moves, and the indices its
// kernel takes on them (the order of equal indices is kept).
std::vector<int64_t> distinct_rows(const Tensor& indices, Tensor& compact);

}  // namespace varstate::internal
