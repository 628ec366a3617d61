#include "runtime/remote_storage.h"

#include <mutex>

#include "runtime/dense_update_internal.h"
#include "runtime/row_gather.h"
#include "runtime/scatter_by_op.h"
#include "runtime/variable_access.h"
#include "varstate/dense_update.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

namespace varstate::internal {

using kernels::DenseUpdateOp;
using kernels::ScatterOp;

// ---------------------------------------------------------------------------
// The factory

namespace {
struct Hooks {
  RemoteStorageFactory make;
  std::function<void()> begin_batch, end_batch;
  RemoteKeyedTableFactory make_keyed;
};
std::mutex& factory_mutex() {
  static std::mutex mu;
  return mu;
}
Hooks& hooks() {
  static Hooks h;
  return h;
}
Hooks current_hooks() {
  std::lock_guard lock(factory_mutex());
  return hooks();
}
}  // namespace

void set_remote_storage_factory(RemoteStorageFactory f, std::function<void()> begin_batch,
                                std::function<void()> end_batch) {
  std::lock_guard lock(factory_mutex());
  hooks().make = std::move(f);
  hooks().begin_batch = std::move(begin_batch);
  hooks().end_batch = std::move(end_batch);
}

void set_remote_keyed_table_factory(RemoteKeyedTableFactory f) {
  std::lock_guard lock(factory_mutex());
  hooks().make_keyed = std::move(f);
}

std::shared_ptr<KeyedTable> make_remote_keyed_table(const std::string& name, DType key_dtype,
                                                    const std::vector<std::string>& placements,
                                                    const KeyedPolicy& policy) {
  const RemoteKeyedTableFactory f = current_hooks().make_keyed;
  return f ? f(name, key_dtype, placements, policy) : nullptr;
}

std::shared_ptr<RemoteStorage> make_remote_storage(const std::string& op_name,
                                                   const std::string& placement, DType dtype,
                                                   const TensorShape& shape) {
  const RemoteStorageFactory f = current_hooks().make;
  return f ? f(op_name, placement, dtype, shape) : nullptr;
}

bool remote_storage_installed() { return static_cast<bool>(current_hooks().make); }

RemoteCreationBatch::RemoteCreationBatch() {
  Hooks h = current_hooks();
  if (h.begin_batch && h.end_batch) {
    h.begin_batch();
    end_ = std::move(h.end_batch);
  }
}

RemoteCreationBatch::~RemoteCreationBatch() {
  try {
    if (end_) end_();
  } catch (const std::exception&) {
    // The creation that failed is already propagating its own error.
  }
}

void RemoteCreationBatch::finish() {
  std::function<void()> end = std::move(end_);
  end_ = nullptr;
  if (end) end();
}

RemoteStorage* remote_storage(const Variable& v) {
  return dynamic_cast<RemoteStorage*>(&storage(v));
}

// ---------------------------------------------------------------------------
// Reads

Tensor RemoteStorage::read_live(const Variable&) {
  // No live buffer here: a snapshot of the owner's.
  return read(/*cached=*/false);
}

Tensor RemoteStorage::read_copy(const Variable&) { return read(/*cached=*/false); }

Tensor RemoteStorage::read_cached(const Variable&, Device* caching_device) {
  // Cached (refreshed when the owner's version moved) when the variable
  // has a caching device. The cache is on the host; a GPU caching device
  // gets a copy of it.
  Tensor v = read(/*cached=*/caching_device != nullptr);
  return caching_device == nullptr || caching_device->is_cpu() ? v : v.to(*caching_device);
}

std::optional<Tensor> RemoteStorage::read_if_initialized(const Variable&) {
  if (!is_initialized()) return std::nullopt;
  return read(/*cached=*/false);
}

Tensor RemoteStorage::copy_for_save(const Variable& self, const std::vector<int64_t>* rows) {
  return rows != nullptr ? gather_from_owner(*rows) : self.read_value();
}

// ---------------------------------------------------------------------------
// Whole-value writes

Tensor RemoteStorage::assign_value(Variable& self, const Tensor& value, bool validate_shape) {
  const std::string& name = self.op_name();
  const std::string subject = dense_update_subject(DenseUpdateOp::kAssign, name);
  const TensorShape shape = this->shape();
  Tensor v = convert_to_dtype(value, self.dtype(), subject).to_host();
  if (!validate_shape && v.shape() != shape) {
    // Its bytes are a fixed-size window on the owner, allocated with every
    // task's agreement when the variable was created.
    throw UnimplementedError(subject + ": variable " + quoted(name) + " on " + task() +
                             " cannot change shape (validate_shape=False): a remote "
                             "variable keeps the shape it was created with, " +
                             shape.to_string() + ", got a value of shape " + v.shape().to_string());
  }
  check_dense_update_shape(subject, shape, v.shape(), /*scalar_ok=*/false);
  write(v);
  return v;
}

void RemoteStorage::replace_value(Variable& self, const Tensor& value) {
  const TensorShape shape = this->shape();
  const DType dtype = self.dtype();
  if (value.shape() != shape || value.dtype() != dtype) {
    throw InvalidArgumentError("Assign to " + quoted(self.op_name()) + " on " + task() +
                               ": a remote variable keeps its dtype and shape " +
                               std::string(dtype_name(dtype)) + shape.to_string() + ", got " +
                               std::string(dtype_name(value.dtype())) + value.shape().to_string());
  }
  write(value.to_host());
}

void RemoteStorage::replace_rows(Variable&, const std::vector<RowBytes>& runs) { write_rows(runs); }

Tensor RemoteStorage::add_value(Variable& self, const Tensor& delta, bool negate) {
  // Validated here against a host tensor of the variable's shape (the same
  // checks and messages as the local update), then one atomic accumulate
  // at the owner.
  if (!is_initialized()) throw_uninitialized(self.op_name());
  Tensor full = Tensor::zeros(self.dtype(), shape(), DeviceManager::instance().cpu());
  // Validates dtype, arithmetic and shape; broadcasts a scalar.
  varstate::assign_add(full, delta.to_host(), {.name = self.op_name()});
  return add(full, negate);
}

Tensor RemoteStorage::assign_slice(Variable& self, const std::vector<SliceSpec>& specs,
                                   const Tensor& value) {
  const std::string& name = self.op_name();
  if (!is_initialized()) throw_uninitialized(name);
  // Validate on a local copy first (throws before anything is sent), then
  // write the region under the owner's exclusive lock.
  Tensor probe = Tensor::zeros(self.dtype(), shape(), DeviceManager::instance().cpu());
  strided_slice_assign(probe, specs, value, name);
  return modify([&](Tensor& whole) { strided_slice_assign(whole, specs, value, name); });
}

Tensor RemoteStorage::count_up(Variable& self, int64_t limit) {
  const std::string& name = self.op_name();
  const TensorShape shape = this->shape();
  if (!shape.is_scalar()) {
    throw InvalidArgumentError("CountUpTo on \"" + name +
                               "\": the variable must be a scalar, has shape " + shape.to_string());
  }
  if (!is_initialized()) throw_uninitialized(name);
  const int64_t before = count_up_to(limit, name);
  const TensorShape scalar(std::vector<int64_t>{});
  return self.dtype() == DType::kInt32
             ? Tensor::from_vector<int32_t>({static_cast<int32_t>(before)}, scalar)
             : Tensor::from_vector<int64_t>({before}, scalar);
}

// ---------------------------------------------------------------------------
// Sparse ops

Tensor RemoteStorage::scatter(ScatterOp op, Variable& self, const Tensor& indices,
                              const Tensor& updates, const UpdateOptions&, const std::string& who,
                              bool read_back) {
  scatter_remote(op, self, *this, indices, updates, who);
  return read_back ? read(/*cached=*/false) : Tensor();
}

Tensor RemoteStorage::gather(const Variable& self, const std::vector<int64_t>& rows) {
  // Only the distinct indexed rows travel.
  if (!is_initialized()) throw_uninitialized(self.op_name());
  return gather_from_owner(rows);
}

void RemoteStorage::scatter_parts(ScatterOp op, std::vector<StoragePart>& parts,
                                  bool updates_scalar, const UpdateOptions&) {
  if (parts.empty() || parts[0].variable->shape().tail(1).num_elements() == 0) return;
  std::vector<RemotePart> remote;
  remote.reserve(parts.size());
  for (StoragePart& part : parts) {
    remote.push_back({static_cast<RemoteStorage*>(part.storage), host_indices(part.rows),
                      part.values.to_host()});
  }
  scatter_at_owners(op, remote, updates_scalar);
}

void RemoteStorage::gather_parts(std::vector<StoragePart>& parts) {
  std::vector<RemotePart> remote;
  remote.reserve(parts.size());
  for (StoragePart& part : parts) {
    remote.push_back(
        {static_cast<RemoteStorage*>(part.storage), host_indices(part.rows), Tensor()});
  }
  if (remote.empty()) return;
  gather_from_owners(remote);
  for (size_t k = 0; k < parts.size(); ++k) parts[k].values = std::move(remote[k].values);
}

}  // namespace varstate::internal
