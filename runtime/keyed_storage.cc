#include "runtime/keyed_storage.h"

#include <mutex>
#include <utility>

#include "runtime/row_gather.h"
#include "runtime/scatter_validate.h"
#include "runtime/update_options_internal.h"
#include "runtime/variable_access.h"
#include "varstate/error.h"

namespace varstate::internal {

KeyedStorage::KeyedStorage(std::shared_ptr<KeyedTable> table, int member, Tensor absent_row)
    : table_(std::move(table)), member_(member), absent_row_(std::move(absent_row)) {}

const std::string& KeyedStorage::holder() const {
  static const std::string kHere = "this process";
  return kHere;
}

TensorShape KeyedStorage::shape() const {
  return TensorShape({table_->size()}).concatenate(table_->row_shape(member_));
}

Tensor KeyedStorage::read_live(const Variable& self) {
  if (!is_initialized()) throw_uninitialized(self.op_name());
  return table_->export_rows({member_}).values.front().on(table_->device());
}

Tensor KeyedStorage::read_cached(const Variable& self, Device* caching_device) {
  Tensor value = read_live(self);
  if (caching_device == nullptr || caching_device == &value.device()) return value;
  cache_copies_.fetch_add(1);
  return value.on(*caching_device);
}

std::optional<Tensor> KeyedStorage::read_if_initialized(const Variable& self) {
  if (!is_initialized()) return std::nullopt;
  return read_live(self);
}

Tensor KeyedStorage::copy_for_save(const Variable& self, const std::vector<int64_t>* rows) {
  if (!is_initialized()) throw_uninitialized(self.op_name());
  if (rows == nullptr) return table_->export_rows({member_}).values.front();
  return table_->gather(member_, *rows, /*insert=*/false).to_host();
}

void KeyedStorage::throw_whole_value(const Variable& self, const char* op) const {
  throw UnimplementedError(std::string(op) + " on " + quoted(self.op_name()) +
                           ": it is a dynamic variable (rows keyed by id); write its rows by key "
                           "(insert, scatter_update)");
}

Tensor KeyedStorage::assign_value(Variable& self, const Tensor&, bool) {
  throw_whole_value(self, "assign");
}

Tensor KeyedStorage::add_value(Variable& self, const Tensor&, bool negate) {
  throw_whole_value(self, negate ? "assign_sub" : "assign_add");
}

Tensor KeyedStorage::assign_slice(Variable& self, const std::vector<SliceSpec>&, const Tensor&) {
  throw_whole_value(self, "slice assign");
}

Tensor KeyedStorage::count_up(Variable& self, int64_t) { throw_whole_value(self, "count_up_to"); }

void KeyedStorage::replace_rows(Variable& self, const std::vector<RowBytes>&) {
  throw_whole_value(self, "restore by rows");
}

void KeyedStorage::replace_value(Variable& self, const Tensor& value) {
  const TensorShape empty = TensorShape({0}).concatenate(table_->row_shape(member_));
  if (!value.valid() || value.shape() != empty) {
    throw InvalidArgumentError("initializing " + quoted(self.op_name()) +
                               ": a dynamic variable starts as an empty " + empty.to_string() +
                               " table, got a value of shape " +
                               (value.valid() ? value.shape().to_string() : std::string("(none)")) +
                               "; insert rows by key instead");
  }
  if (member_ == 0) {
    table_->clear();
  } else {
    table_->reset_member(member_);
  }
  mark_initialized();
}

bool KeyedStorage::is_initialized() {
  if (initialized_.load()) return true;
  if (!table_->remote() || !table_->initialized(member_)) return false;
  initialized_.store(true);
  return true;
}

void KeyedStorage::mark_initialized() {
  if (table_->remote()) table_->set_initialized(member_);
  initialized_.store(true);
}

// ---------------------------------------------------------------------------
// Sparse ops

std::vector<int64_t> checked_keys(const Tensor& keys, DType key_dtype, const std::string& who) {
  if (!keys.valid()) throw InvalidArgumentError(who + ": empty tensor handle for keys");
  const Tensor k = convert_to_dtype(keys, key_dtype, who + ": keys");
  return host_indices(k);
}

void check_keys(const Tensor& keys, DType key_dtype, const std::string& who) {
  if (!keys.valid()) throw InvalidArgumentError(who + ": empty tensor handle for keys");
  // Every value of the key dtype is a key: nothing to read. (Another dtype
  // converts as checked_keys converts it, or fails as it fails.)
  if (keys.dtype() != key_dtype) convert_to_dtype(keys, key_dtype, who + ": keys");
}

Tensor KeyedStorage::scatter(kernels::ScatterOp op, Variable& self, const Tensor& indices,
                             const Tensor& updates, const UpdateOptions& options,
                             const std::string& who, bool read_back) {
  if (!is_initialized()) throw_uninitialized(self.op_name());
  const TensorShape row_shape = table_->row_shape(member_);
  const ScatterArgs args =
      check_scatter_args(op, self.dtype(), TensorShape({table_->size()}).concatenate(row_shape),
                         indices, updates, who);
  const int64_t n = indices.num_elements();
  // Scalar updates repeat for every key; row updates in key order. Moved
  // to the table's device once, when first needed.
  Tensor moved;
  auto values = [&] {
    if (!moved.valid()) {
      moved = (args.updates_scalar ? args.updates.reshaped({})
                                   : args.updates.reshaped(TensorShape({n}).concatenate(row_shape)))
                  .on(table_->device());
    }
    return moved;
  };
  std::unique_lock<std::mutex> locked;
  auto lock = [&] {
    if (use_locking(options, op, UpdateCaller::kMethod)) {
      locked = std::unique_lock<std::mutex>(update_mutex(self));
    }
  };
  if (on_table_device(indices)) {
    // Keys in the table's device memory, every one present: resolved there.
    lock();
    if (table_->scatter_device_keys(op, member_, indices.reshaped({n}), values(), who)) {
      if (locked.owns_lock()) locked.unlock();
      return read_back ? read_live(self) : Tensor();
    }
    if (locked.owns_lock()) locked.unlock();
  }
  const std::vector<int64_t> keys = checked_keys(indices, table_->key_dtype(), who);
  lock();
  if (!keys.empty()) table_->scatter(op, member_, keys, values(), who);
  if (locked.owns_lock()) locked.unlock();
  return read_back ? read_live(self) : Tensor();
}

bool KeyedStorage::on_table_device(const Tensor& keys) const {
  return keys.valid() && keys.dtype() == DType::kInt64 && table_->key_dtype() == DType::kInt64 &&
         !keys.on_cpu() && &keys.device() == &table_->device();
}

Tensor KeyedStorage::gather(const Variable& self, const std::vector<int64_t>& rows) {
  if (!is_initialized()) throw_uninitialized(self.op_name());
  return table_->gather(member_, rows, /*insert=*/true);
}

void KeyedStorage::scatter_parts(kernels::ScatterOp op, std::vector<StoragePart>& parts,
                                 bool /*updates_scalar: each part's values say*/,
                                 const UpdateOptions& options) {
  for (StoragePart& part : parts) {
    auto& keyed = static_cast<KeyedStorage&>(*part.storage);
    const std::vector<int64_t> keys = host_indices(part.rows);
    std::unique_lock<std::mutex> locked;
    if (use_locking(options, op, UpdateCaller::kPartitioned)) {
      locked = std::unique_lock<std::mutex>(update_mutex(*part.variable));
    }
    keyed.table_->scatter(op, keyed.member_, keys, part.values.on(keyed.table_->device()),
                          scatter_subject(op, options.name, part.variable->op_name()));
  }
}

void KeyedStorage::gather_parts(std::vector<StoragePart>& parts) {
  for (StoragePart& part : parts) {
    auto& keyed = static_cast<KeyedStorage&>(*part.storage);
    part.values = keyed.gather(*part.variable, host_indices(part.rows));
  }
}

void KeyedStorage::modify_rows(std::vector<RowsUpdate>& updates) {
  // The training ops run in place on the table's rows (KeyedTable::
  // update_rows, training/training_call.cc): no rows move.
  throw InternalError(
      "modify_rows on the dynamic variable " + quoted(table_->member_name(member_)) +
      ": dynamic variables train in place (" + std::to_string(updates.size()) + " updates)");
}

std::vector<int64_t> KeyedStorage::take_marked_rows() {
  throw InternalError("take_marked_rows on the dynamic variable " +
                      quoted(table_->member_name(member_)) +
                      ": its changes are keys written and erased, taken from its table");
}

KeyedStorage* keyed_storage(const Variable& v) { return dynamic_cast<KeyedStorage*>(&storage(v)); }

}  // namespace varstate::internal
