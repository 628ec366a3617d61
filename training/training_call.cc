#include "training/training_ops_internal.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "kernels/cpu/training_ops.h"
#include "runtime/dirty_rows.h"
#include "runtime/distinct_rows.h"
#include "runtime/keyed_storage.h"
#include "runtime/row_gather.h"
#include "runtime/scatter_validate.h"
#include "runtime/variable_access.h"
#include "runtime/variable_storage.h"
#include "training/keyed_training.h"
#include "varstate/device.h"
#include "varstate/error.h"
#ifdef VARSTATE_HAVE_CUDA
#include "kernels/cuda/dirty_marks.h"
#include "kernels/cuda/scatter.h"
#include "kernels/cuda/training_ops.h"
#include "runtime/deferred_check.h"
#include "varstate/scatter.h"
#endif

namespace varstate::internal {
namespace {

using kernels::TrainingOp;

bool training_dtype(DType dtype) {
  switch (dtype) {
#define VARSTATE_CASE(E, T) case DType::E:
    VARSTATE_FOR_EACH_TRAINING_TYPE(VARSTATE_CASE)
#undef VARSTATE_CASE
    return true;
    default:
      return false;
  }
}

// fn(T{}) for the storage type T of a training dtype.
template <typename Fn>
void dispatch_training_dtype(DType dtype, const std::string& who, Fn&& fn) {
  switch (dtype) {
#define VARSTATE_CASE(E, T) \
  case DType::E:            \
    return fn(T{});
    VARSTATE_FOR_EACH_TRAINING_TYPE(VARSTATE_CASE)
#undef VARSTATE_CASE
    default:
      throw_unsupported_dtype(dtype, who);
  }
}

// Checks `grad` (named `what`) against `dtype` and converts a weakly typed
// one.
Tensor converted(const Tensor& grad, DType dtype, std::string_view what, const std::string& who) {
  if (!grad.valid()) throw InvalidArgumentError(who + ": " + std::string(what) + " is empty");
  if (grad.dtype() == dtype) return grad;
  if (grad.weakly_typed()) return grad.cast(dtype);
  throw TypeError(who + ": " + std::string(what) + " is " + std::string(dtype_name(grad.dtype())) +
                  ", expected " + std::string(dtype_name(dtype)) + " (the variable's dtype)");
}

int64_t row_width(const TensorShape& shape) {
  return shape.rank() > 0 ? shape.tail(1).num_elements() : 1;
}

std::string subject(std::string_view tf_name, std::string_view name, const Variable& var) {
  std::string s(tf_name);
  if (!name.empty()) s += " " + quoted(name);
  return s + " on " + quoted(var.op_name());
}

}  // namespace

bool is_training_dtype(DType dtype) { return training_dtype(dtype); }

std::vector<int64_t> distinct_rows(const Tensor& indices, Tensor& compact) {
  DistinctRows d = distinct_rows(host_indices(indices), true);
  compact = Tensor::from_vector<int64_t>(d.local);
  return std::move(d.unique);
}

Tensor checked_dense_gradient(const Tensor& grad, const Variable& var, const std::string& who) {
  if (keyed_storage(var) != nullptr) {
    throw InvalidArgumentError(who + ": " + quoted(var.op_name()) +
                               " is a dynamic variable: it takes sparse gradients (IndexedSlices "
                               "of keys, DynamicVariable::gradient), not a dense one");
  }
  Tensor g = converted(grad, var.dtype(), "grad", who);
  if (g.shape() != var.shape()) {
    throw InvalidArgumentError(who + ": var and grad do not have the same shape: " +
                               var.shape().to_string() + " vs " + g.shape().to_string());
  }
  return g;
}

void check_sparse_gradient(const IndexedSlices& grad, const Variable& var, const std::string& who,
                           std::span<std::atomic<uint8_t>* const> marks) {
  if (const KeyedStorage* keyed = keyed_storage(var)) {
    // Indices are keys: any value of the key dtype; rows of the row shape.
    const TensorShape row = keyed->table().row_shape(keyed->member());
    const Tensor values = converted(grad.values(), var.dtype(), "grad.values", who);
    const TensorShape expected = grad.indices().shape().concatenate(row);
    if (values.shape() != expected) {
      throw InvalidArgumentError(who + ": grad.values must have shape " + expected.to_string() +
                                 " (the keys' shape, then the row's), got " +
                                 values.shape().to_string());
    }
    check_keys(grad.indices(), keyed->table().key_dtype(), who);
    return;
  }
  const TensorShape shape = var.shape();
  if (shape.rank() < 1) {
    throw InvalidArgumentError(who + ": var must be at least 1 dimensional, got shape " +
                               shape.to_string());
  }
  check_dense_shape(grad, shape, who);
  const Tensor values = converted(grad.values(), var.dtype(), "grad.values", who);
  if (values.rank() != shape.rank() || values.shape().tail(1) != shape.tail(1)) {
    throw InvalidArgumentError(who + ": var and grad.values do not match beyond dimension 0: " +
                               shape.to_string() + " vs " + values.shape().to_string());
  }
  // (IndexedSlices holds int32 or int64 indices.)
  const Tensor& indices = grad.indices();
  if (indices_checked_on_device(grad, var)) return;
  check_index_values(indices.on_cpu() ? indices : indices.to_host(), shape.dim(0), who, marks);
}

bool indices_checked_on_device(const IndexedSlices& grad, const Variable& var) {
#ifdef VARSTATE_HAVE_CUDA
  const Tensor& indices = grad.indices();
  if (indices.on_cpu() || keyed_storage(var) != nullptr) return false;
  return storage(var).updates_in_place() && &var.device() == &indices.device();
#else
  (void)grad, (void)var;
  return false;
#endif
}

bool TrainingKernel::run(const std::vector<Tensor>& tables, const Tensor& grad,
                         const Tensor* indices, const kernels::cuda::IndexCheck* check) const {
  const Tensor& table = tables[0];
  const int64_t width = row_width(table.shape());
  const int64_t rows = table.shape().rank() > 0 ? table.shape().dim(0) : 1;
  const int64_t n = indices ? indices->num_elements() : table.num_elements();
  // compat.v1 sparse Adam decays every row, even for a batch without rows.
  const bool updates_all_rows = indices != nullptr && op == TrainingOp::kAdam;
  if (table.num_elements() == 0 || (n == 0 && !updates_all_rows)) return false;
  dispatch_training_dtype(table.dtype(), who, [&](auto t) {
    using T = decltype(t);
    kernels::TrainingSlots<T> s{static_cast<T*>(table.raw_data())};
    T** slot_ptrs[3] = {&s.s0, &s.s1, &s.s2};
    for (size_t k = 1; k < tables.size(); ++k) {
      *slot_ptrs[k - 1] = static_cast<T*>(tables[k].raw_data());
    }
    const T* g = static_cast<const T*>(grad.raw_data());
    auto with_index = [&](auto run_with) {
      if (indices->dtype() == DType::kInt32) {
        run_with(static_cast<const int32_t*>(indices->raw_data()));
      } else {
        run_with(static_cast<const int64_t*>(indices->raw_data()));
      }
    };
    if (table.on_cpu()) {
      if (indices == nullptr) {
        kernels::cpu::apply_dense<T>(op, hyper, s, g, n, width);
      } else {
        with_index([&](auto* ids) {
          kernels::cpu::apply_sparse(op, hyper, s, rows, width, ids, n, g, deterministic);
        });
      }
      return;
    }
#ifdef VARSTATE_HAVE_CUDA
    Device& device = table.device();
    DeviceGuard guard(device);
    if (indices == nullptr) {
      kernels::cuda::apply_dense<T>(op, hyper, s, g, n, width, device.stream());
    } else {
      const kernels::cuda::ScratchAllocator scratch{
          [&device](size_t bytes) { return device.allocate(bytes); },
          [&device](void* ptr) { device.deallocate(ptr); }};
      with_index([&](auto* ids) {
        kernels::cuda::apply_sparse(op, hyper, s, rows, width, ids, n, g, deterministic, scratch,
                                    device.stream(), check);
      });
    }
#else
    (void)check;
    throw InternalError(who + ": a GPU variable in a build without CUDA");
#endif
  });
  return true;
}

TrainingCall::TrainingCall(TrainingOp op, std::string_view tf_name, Variable& var,
                           std::vector<TrainingSlot> slots, const UpdateOptions& options)
    : op_(op),
      var_(var),
      slots_(std::move(slots)),
      options_(options),
      who_(subject(tf_name, options.name, var)),
      storage_(&storage(var)),
      in_place_(storage_->updates_in_place()) {
  // Rows that move (a remote variable's) stay where they are until the op
  // runs: only the metadata here.
  if (in_place_) table_ = var_.ref();
  dtype_ = in_place_ ? table_.dtype() : var_.dtype();
  if (!training_dtype(dtype_)) {
    throw TypeError(who_ + ": variables of float16, bfloat16, float32 or float64 only, got " +
                    std::string(dtype_name(dtype_)));
  }
  if (!in_place_ && !storage_->is_initialized()) throw_uninitialized(var_.op_name());
  for (size_t k = 0; k < slots_.size(); ++k) {
    const TrainingSlot& slot = slots_[k];
    for (size_t j = 0; j <= k; ++j) {
      const bool is_var = j == k;
      if ((is_var ? var_ : *slots_[j].var).same_as(*slot.var)) {
        throw InvalidArgumentError(who_ + ": " + slot.role + " is the same variable as " +
                                   (is_var ? "var" : slots_[j].role));
      }
    }
    check_holder(slot);
    if (in_place_) {
      slot_tables_.push_back(slot.var->ref());
      check_slot(slot, slot_tables_.back().dtype(), slot_tables_.back().shape());
      check_device(slot, slot_tables_.back());
    } else {
      check_slot(slot, slot.var->dtype(), slot.var->shape());
      if (!storage(*slot.var).is_initialized()) throw_uninitialized(slot.var->op_name());
    }
  }
}

void TrainingCall::check_holder(const TrainingSlot& slot) const {
  const std::string& holder = storage(*slot.var).holder();
  if (holder == storage_->holder()) return;
  throw InvalidArgumentError(who_ + ": " + slot.role + " (" + quoted(slot.var->op_name()) +
                             ") is held by " + holder + ", the variable " + quoted(var_.op_name()) +
                             " by " + storage_->holder() + " (slots live with their variable)");
}

void TrainingCall::check_slot(const TrainingSlot& slot, DType dtype,
                              const TensorShape& shape) const {
  const std::string name = std::string(slot.role) + " (" + quoted(slot.var->op_name()) + ")";
  if (dtype != dtype_) {
    throw TypeError(who_ + ": " + name + " is " + std::string(dtype_name(dtype)) + ", expected " +
                    std::string(dtype_name(dtype_)));
  }
  // A dynamic variable's slots are members of its table (apply_keyed checks
  // that): their row counts are its own, read at another moment.
  if (keyed_storage(var_) != nullptr) return;
  TensorShape expected = var_shape();
  if (op_ == TrainingOp::kRowwiseAdagrad) {
    if (expected.rank() < 1) {
      throw InvalidArgumentError(who_ + ": var must be at least 1 dimensional, got shape " +
                                 expected.to_string());
    }
    expected = TensorShape({expected.dim(0)});
  }
  if (shape != expected) {
    throw InvalidArgumentError(who_ + ": var and " + slot.role + " do not have the same shape" +
                               (op_ == TrainingOp::kRowwiseAdagrad ? "[0]" : "") + ": " +
                               expected.to_string() + " vs " + shape.to_string());
  }
}

void TrainingCall::check_device(const TrainingSlot& slot, const Tensor& table) const {
  if (&table.device() != &table_.device()) {
    throw InvalidArgumentError(who_ + ": " + std::string(slot.role) + " (" +
                               quoted(slot.var->op_name()) + ") is on " + table.device().name() +
                               ", the variable on " + table_.device().name() +
                               " (slots live on their variable's device)");
  }
}

TensorShape TrainingCall::var_shape() const { return in_place_ ? table_.shape() : var_.shape(); }

double TrainingCall::scalar(const Tensor& t, std::string_view what) const {
  const std::string name(what);
  if (!t.valid()) throw InvalidArgumentError(who_ + ": " + name + " is empty");
  if (t.rank() != 0) {
    throw InvalidArgumentError(who_ + ": " + name + " is not a scalar: " + t.shape().to_string());
  }
  if (!t.weakly_typed() && t.dtype() != dtype_) {
    throw TypeError(who_ + ": " + name + " is " + std::string(dtype_name(t.dtype())) +
                    ", expected " + std::string(dtype_name(dtype_)));
  }
  return t.to_host().cast(DType::kDouble).scalar<double>();
}

Tensor TrainingCall::apply_dense(const Tensor& grad) {
  Tensor g = checked_dense_gradient(grad, var_, who_);
  if (!in_place_) return apply_by_rows(g.to_host(), nullptr);
  g = g.on(table_.device());
  run_locked(g, nullptr);
  for (Variable* v : written()) mark_updated(*v);
  return table_;
}

Tensor TrainingCall::apply_sparse(const IndexedSlices& grad) {
  if (keyed_storage(var_) != nullptr) return apply_keyed(grad);
  if (in_place_ && indices_checked_on_device(grad, var_)) return apply_sparse_on_device(grad);
  if (!in_place_) {
    check_sparse_gradient(grad, var_, who_);
    const Tensor values = converted(grad.values(), dtype_, "grad.values", who_).to_host();
    const Tensor indices = grad.indices().to_host();
    return apply_by_rows(values, &indices);
  }
  // The batch's rows of the variable and of each slot (all of them row
  // shaped, row-wise Adagrad's [rows] accumulator too) are recorded as a
  // scatter records them: on the host, logged after the kernel's
  // (synchronous) write; elsewhere marked as the indices are checked,
  // before the write. The compat.v1 sparse Adam decays m and v of every row
  // and so moves every row of the variable: it marks everything after the
  // write instead.
  const bool every_row = op_ == TrainingOp::kAdam;
  const bool logs_after_write = table_.on_cpu();
  std::deque<DirtyRows::Writing> writing;
  std::vector<DirtyRows::Marks> held;
  std::vector<std::atomic<uint8_t>*> marks;
  auto hold = [&](const Variable& v, const Tensor& table) {
    DirtyRows& dirty = dirty_rows(v);
    writing.emplace_back(dirty);
    held.push_back(dirty.marks(table.shape().rank() > 0 ? table.shape().dim(0) : 0));
    if (held.back()) marks.push_back(held.back().get());  // null: not tracked yet
  };
  if (!every_row && !logs_after_write) {
    hold(var_, table_);
    for (size_t k = 0; k < slots_.size(); ++k) hold(*slots_[k].var, slot_tables_[k]);
  }
  check_sparse_gradient(grad, var_, who_, marks);
  Tensor values = converted(grad.values(), var_.dtype(), "grad.values", who_);
  Tensor indices = grad.indices();
  Device& device = table_.device();
  values = values.on(device);
  indices = indices.on(device);
  if (!run_locked(values, &indices)) return table_;
  if (logs_after_write && !every_row) {
    dirty_rows(var_).record(table_.shape().dim(0), indices);
    for (size_t k = 0; k < slots_.size(); ++k) {
      dirty_rows(*slots_[k].var).record(slot_tables_[k].shape().dim(0), indices);
    }
  }
  for (Variable* v : written()) {
    if (every_row) {
      mark_updated(*v);
    } else {
      mark_rows_updated(*v);
    }
  }
  return table_;
}

Tensor TrainingCall::apply_keyed(const IndexedSlices& grad) {
  check_sparse_gradient(grad, var_, who_);
  KeyedStorage& keyed = *keyed_storage(var_);
  std::vector<int> members = {keyed.member()};
  for (const TrainingSlot& slot : slots_) {
    const KeyedStorage* s = keyed_storage(*slot.var);
    if (s == nullptr || &s->table() != &keyed.table()) {
      throw InvalidArgumentError(who_ + ": " + slot.role + " (" + quoted(slot.var->op_name()) +
                                 ") is not a slot of the dynamic variable " +
                                 quoted(var_.op_name()) + " (its slots share its keys)");
    }
    members.push_back(s->member());
  }
  const int64_t n = grad.indices().num_elements();
  Device& device = keyed.table().device();
  const Tensor values =
      converted(grad.values(), dtype_, "grad.values", who_)
          .on(device)
          .reshaped(TensorShape({n}).concatenate(keyed.table().row_shape(keyed.member())));
  std::vector<std::unique_lock<std::mutex>> locks;
  if (options_.use_locking.value_or(false)) {
    for (Variable* v : written()) locks.emplace_back(update_mutex(*v));
  }
  // compat.v1 sparse Adam decays every row, as on a dense variable.
  const bool all_rows = op_ == TrainingOp::kAdam;
  if (n == 0 && !all_rows) return Tensor();
  const KeyedTrainingStep step{op_, hyper_, options_.deterministic.value_or(true), who_, values};
  KeyedTable& table = keyed.table();
  // Held by cluster tasks: the step travels to them as data.
  if (table.remote()) {
    table.train(members, host_indices(grad.indices()), all_rows, step);
    return Tensor();
  }
  const KeyedTable::RowsFn fn = keyed_training_fn(step);
  // Keys in the table's device memory, every one present: resolved there.
  if (keyed.on_table_device(grad.indices()) &&
      table.update_rows_device_keys(members, grad.indices().reshaped({n}), all_rows, fn)) {
    return Tensor();
  }
  table.update_rows(members, host_indices(grad.indices()), all_rows, fn);
  return Tensor();
}

Tensor TrainingCall::apply_by_rows(const Tensor& grad, const Tensor* indices) {
  RowsUpdate update;
  update.storages = {storage_};
  for (const TrainingSlot& slot : slots_) update.storages.push_back(&storage(*slot.var));
  const int64_t n = indices ? indices->num_elements() : var_shape().num_elements();
  // compat.v1 sparse Adam decays every row, even for a batch without rows:
  // it moves the whole values, as a dense op does.
  const bool whole = indices == nullptr || op_ == TrainingOp::kAdam;
  if (var_shape().num_elements() == 0 || (n == 0 && !whole)) return Tensor();
  const TrainingKernel kernel{op_, hyper_, options_.deterministic.value_or(true), who_};
  auto result = std::make_shared<Tensor>();
  if (whole) {
    const std::optional<Tensor> ids = indices ? std::optional<Tensor>(*indices) : std::nullopt;
    update.fn = [kernel, grad, ids, result](std::vector<Tensor>& tables) {
      kernel.run(tables, grad, ids ? &*ids : nullptr);
      *result = tables[0];
    };
  } else {
    // Only the distinct rows travel; the kernel runs on them re-indexed
    // 0..k-1 in ascending order, which keeps its stable sort by index, and
    // so the summation order of duplicates, the local op's.
    Tensor compact;
    update.rows = distinct_rows(*indices, compact);
    update.fn = [kernel, grad, compact](std::vector<Tensor>& tables) {
      kernel.run(tables, grad, &compact);
    };
  }
  const bool deferred = RemoteApplyBatch::current() != nullptr;
  RemoteApplyBatch::submit(std::move(update));
  return deferred || indices ? Tensor() : *result;
}

namespace {
thread_local RemoteApplyBatch* t_batch = nullptr;
}  // namespace

RemoteApplyBatch::RemoteApplyBatch() : outer_(t_batch) { t_batch = this; }

RemoteApplyBatch::~RemoteApplyBatch() { t_batch = outer_; }

RemoteApplyBatch* RemoteApplyBatch::current() { return t_batch; }

void RemoteApplyBatch::add(RowsUpdate update) { updates_.push_back(std::move(update)); }

void RemoteApplyBatch::submit(RowsUpdate update) {
  if (RemoteApplyBatch* batch = current()) {
    batch->add(std::move(update));
    return;
  }
  std::vector<RowsUpdate> one;
  one.push_back(std::move(update));
  one[0].storages[0]->modify_rows(one);
}

void RemoteApplyBatch::flush() {
  std::vector<RowsUpdate> updates = std::move(updates_);
  updates_.clear();
  if (!updates.empty()) updates[0].storages[0]->modify_rows(updates);
}

std::vector<Variable*> TrainingCall::written() {
  std::vector<Variable*> out = {&var_};
  for (const TrainingSlot& slot : slots_) out.push_back(slot.var);
  return out;
}

std::vector<std::unique_lock<std::mutex>> TrainingCall::update_locks() {
  std::vector<std::unique_lock<std::mutex>> locks;
  if (options_.use_locking.value_or(false)) {
    locks.emplace_back(update_mutex(var_));
    for (const TrainingSlot& slot : slots_) locks.emplace_back(update_mutex(*slot.var));
  }
  return locks;
}

Tensor TrainingCall::apply_sparse_on_device(const IndexedSlices& grad) {
#ifdef VARSTATE_HAVE_CUDA
  check_sparse_gradient(grad, var_, who_);  // everything but the index values
  Device& device = table_.device();
  const Tensor values = converted(grad.values(), dtype_, "grad.values", who_).on(device);
  const Tensor& indices = grad.indices();
  const int64_t n = indices.num_elements();
  // compat.v1 sparse Adam decays m and v of every row, even for a batch
  // without rows, and so writes (and marks) every row.
  const bool every_row = op_ == TrainingOp::kAdam;
  if (n == 0 && !every_row) return table_;
  // Locks as a scatter takes them: the update locks, then the variable's
  // scatter lock (held by the check until commit).
  std::vector<std::unique_lock<std::mutex>> locks = update_locks();
  DeferredIndexCheck check(var_, device);
  // The rows are marked on the device, the variable's by the index check,
  // each slot's by a pass of its own, under each one's Writing guard.
  std::vector<Variable*> targets = written();
  std::deque<DirtyRows::Writing> writing;
  std::vector<uint8_t*> marks(targets.size(), nullptr);
  std::vector<Tensor> tables = {table_};
  tables.insert(tables.end(), slot_tables_.begin(), slot_tables_.end());
  if (!every_row) {
    for (size_t k = 0; k < targets.size(); ++k) {
      DirtyRows& dirty = dirty_rows(*targets[k]);
      writing.emplace_back(dirty);
      marks[k] = dirty.device_marks(device, tables[k].shape().dim(0));
    }
  }
  const int64_t rows = table_.shape().dim(0);
  {
    DeviceGuard guard(device);
    cudaStream_t stream = device.stream();
    kernels::cuda::reset_index_check(check.record(), stream);
    auto validate_and_mark = [&](const auto* ids) {
      kernels::cuda::validate_indices(ids, n, rows, check.record(), stream, marks[0]);
      for (size_t k = 1; k < targets.size(); ++k) {
        if (marks[k] != nullptr) {
          kernels::cuda::mark_rows(ids, n, tables[k].shape().dim(0), marks[k], stream);
        }
      }
    };
    if (n == 0) {
      // Nothing to check (sparse Adam's decay of every row alone).
    } else if (indices.dtype() == DType::kInt32) {
      validate_and_mark(static_cast<const int32_t*>(indices.raw_data()));
    } else {
      validate_and_mark(static_cast<const int64_t*>(indices.raw_data()));
    }
  }
  TrainingKernel{op_, hyper_, options_.deterministic.value_or(true), who_}.run(
      tables, values, &indices, check.record());
  for (size_t k = 0; k < targets.size(); ++k) {
    // Rows marked on the device (or, untracked so far, every row).
    if (every_row || marks[k] == nullptr) {
      mark_updated(*targets[k]);
    } else {
      mark_rows_updated(*targets[k]);
    }
  }
  writing.clear();
  check.commit(who_, indices.shape(), values.shape(), rows,
               options_.synchronous.value_or(synchronous_scatter_checks()));
  return table_;
#else
  (void)grad;
  throw InternalError(who_ + ": a GPU variable in a build without CUDA");
#endif
}

bool TrainingCall::run_locked(const Tensor& grad, const Tensor* indices) {
  std::vector<std::unique_lock<std::mutex>> locks = update_locks();
  std::vector<Tensor> tables = {table_};
  tables.insert(tables.end(), slot_tables_.begin(), slot_tables_.end());
  return TrainingKernel{op_, hyper_, options_.deterministic.value_or(true), who_}.run(tables, grad,
                                                                                      indices);
}

}  // namespace varstate::internal
