#include "runtime/local_storage.h"

#include <algorithm>
#include <cstring>

#include "runtime/dense_update_internal.h"
#include "runtime/row_gather.h"
#include "runtime/scatter_by_op.h"
#include "runtime/scatter_validate.h"
#include "runtime/variable_access.h"
#include "varstate/dense_update.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

namespace varstate::internal {

using kernels::DenseUpdateOp;
using kernels::ScatterOp;

const std::string& LocalStorage::holder() const {
  static const std::string kHere = "this process";
  return kHere;
}

bool LocalStorage::is_initialized() {
  std::lock_guard lock(mu_);
  return initialized_;
}

TensorShape LocalStorage::shape() const {
  std::lock_guard lock(mu_);
  return shape_;
}

// ---------------------------------------------------------------------------
// Reads

Tensor LocalStorage::read_live(const Variable& self) {
  std::lock_guard lock(mu_);
  if (!initialized_) throw_uninitialized(self.op_name());
  return value_;
}

Tensor LocalStorage::read_cached(const Variable& self, Device* caching_device) {
  Tensor live = read_live(self);
  if (caching_device == nullptr) return live;
  std::lock_guard lock(cache_mu_);
  // Read the version before copying: an update racing with the copy leaves
  // cached_version_ behind, so the next read copies again.
  const uint64_t v = version_.load();
  if (cached_version_ != v || !cached_.valid()) {
    if (cached_.sole_owner() && cached_.shape() == live.shape()) {
      // Nobody holds the previous snapshot: refresh it in place.
      copy_bytes(*caching_device, cached_.raw_data(), live.device(), live.raw_data(),
                 live.nbytes());
    } else {
      cached_ = live.to(*caching_device);
    }
    cached_version_ = v;
    cache_copies_.fetch_add(1);
  }
  return cached_;
}

std::optional<Tensor> LocalStorage::read_if_initialized(const Variable&) {
  std::lock_guard lock(mu_);
  if (initialized_) return value_;
  return std::nullopt;
}

Tensor LocalStorage::copy_for_save(const Variable& self, const std::vector<int64_t>* rows) {
  std::lock_guard lock(update_mutex(self));
  return rows != nullptr ? gather_rows(self.ref(), *rows) : self.ref().clone();
}

// ---------------------------------------------------------------------------
// Whole-value writes

Tensor LocalStorage::assign_value(Variable& self, const Tensor& value, bool validate_shape) {
  const std::string& who = self.op_name();
  const std::string subject = dense_update_subject(DenseUpdateOp::kAssign, who);
  bool initialized;
  Tensor target;
  TensorShape shape;
  {
    std::lock_guard lock(mu_);
    initialized = initialized_;
    target = value_;
    shape = shape_;
  }
  const bool keep_shape = validate_shape && validate_shape_;
  Tensor v = convert_to_dtype(value, dtype_, subject);
  if (keep_shape) check_dense_update_shape(subject, shape, v.shape(), false);
  if (!initialized || v.shape() != shape) {
    // A fresh buffer: first assignment, or a new shape.
    Tensor fresh(dtype_, v.shape(), device_);
    varstate::assign(fresh, v, {.name = who});
    replace_value(self, fresh);
    return fresh;
  }
  varstate::assign(target, v, {.validate_shape = true, .name = who});
  note_write(/*all_rows=*/true);
  return target;
}

void LocalStorage::replace_value(Variable&, const Tensor& value) {
  std::lock_guard lock(mu_);
  value_ = value;
  shape_ = value.shape();
  initialized_ = true;
  version_.fetch_add(1);
  dirty_.mark_all();
}

void LocalStorage::replace_rows(Variable& self, const std::vector<RowBytes>& runs) {
  const TensorShape full = shape();
  Tensor host(dtype_, full, DeviceManager::instance().cpu());
  const int64_t rows = full.rank() > 0 ? full.dim(0) : 1;
  const int64_t row_bytes = rows == 0 ? 0 : static_cast<int64_t>(host.nbytes()) / rows;
  for (const RowBytes& run : runs) {
    std::memcpy(static_cast<std::byte*>(host.raw_data()) + run.row * row_bytes, run.data,
                run.bytes);
  }
  replace_value(self, host.on(device_));
}

Tensor LocalStorage::add_value(Variable& self, const Tensor& delta, bool negate) {
  Tensor target = read_live(self);
  if (negate) {
    varstate::assign_sub(target, delta, {.name = self.op_name()});
  } else {
    varstate::assign_add(target, delta, {.name = self.op_name()});
  }
  note_write(/*all_rows=*/true);
  return target;
}

void LocalStorage::mark_slice_rows(const std::vector<SliceSpec>& specs, const TensorShape& shape) {
  // One row for an index, the span of a forward range, else every row.
  const SliceSpec* first = specs.empty() ? nullptr : &specs.front();
  if (shape.rank() == 0 || first == nullptr || first->is_ellipsis || first->is_newaxis ||
      first->step.value_or(1) <= 0) {
    note_write(/*all_rows=*/true);
    return;
  }
  const int64_t rows = shape.dim(0);
  auto normalize = [rows](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + rows : i, 0, rows); };
  const int64_t begin = normalize(first->begin.value_or(0));
  const int64_t end = first->is_index ? begin + 1 : normalize(first->end.value_or(rows));
  dirty_.mark_range(rows, begin, end);
  note_write(/*all_rows=*/false);
}

Tensor LocalStorage::assign_slice(Variable& self, const std::vector<SliceSpec>& specs,
                                  const Tensor& value) {
  Tensor target = self.ref();
  strided_slice_assign(target, specs, value, self.op_name());
  mark_slice_rows(specs, target.shape());
  return target;
}

Tensor LocalStorage::count_up(Variable& self, int64_t limit) {
  const std::string& name = self.op_name();
  Tensor target = read_live(self);
  if (!target.shape().is_scalar()) {
    throw InvalidArgumentError("CountUpTo on " + quoted(name) +
                               ": the variable must be a scalar, has shape " +
                               target.shape().to_string());
  }
  Tensor host = target.to_host().clone();
  const int64_t before =
      dtype_ == DType::kInt32 ? host.data<int32_t>()[0] : host.data<int64_t>()[0];
  if (before >= limit) {
    throw OutOfRangeError("CountUpTo on " + quoted(name) + ": Reached limit of " +
                          std::to_string(limit));
  }
  Tensor old = host.clone();
  if (dtype_ == DType::kInt32) {
    host.data<int32_t>()[0] = static_cast<int32_t>(before + 1);
  } else {
    host.data<int64_t>()[0] = before + 1;
  }
  copy_bytes(target.device(), target.raw_data(), host.device(), host.raw_data(), host.nbytes());
  note_write(/*all_rows=*/true);
  return old;
}

// ---------------------------------------------------------------------------
// Sparse ops

Tensor LocalStorage::scatter(ScatterOp op, Variable& self, const Tensor& indices,
                             const Tensor& updates, const UpdateOptions& options,
                             const std::string& who, bool /*read_back: the buffer itself*/) {
  return scatter_local(op, self, *this, indices, updates, options, who);
}

Tensor LocalStorage::gather(const Variable& self, const std::vector<int64_t>& rows) {
  return gather_rows(self.value(), rows);
}

void LocalStorage::scatter_parts(ScatterOp op, std::vector<StoragePart>& parts,
                                 bool /*updates_scalar: each part's values say*/,
                                 const UpdateOptions& options) {
  for (StoragePart& part : parts) {
    Variable& v = *part.variable;
    scatter_local(op, v, static_cast<LocalStorage&>(*part.storage), part.rows, part.values, options,
                  scatter_subject(op, options.name, v.op_name()));
  }
}

void LocalStorage::gather_parts(std::vector<StoragePart>& parts) {
  for (StoragePart& part : parts) {
    const Tensor& rows = part.rows;
    part.values = gather_rows(part.variable->value(),
                              {rows.data<int64_t>(), static_cast<size_t>(rows.num_elements())});
  }
}

void LocalStorage::modify_rows(std::vector<RowsUpdate>& updates) {
  // Every update's rows are read and every `fn` run before anything is
  // written back, so a throwing `fn` leaves every buffer as it was.
  struct Staged {
    std::vector<LocalStorage*> storages;
    std::vector<Tensor> live;
    std::vector<Tensor> values;
    Tensor ids;
  };
  std::vector<Staged> staged(updates.size());
  for (size_t i = 0; i < updates.size(); ++i) {
    const RowsUpdate& u = updates[i];
    Staged& s = staged[i];
    if (u.rows) s.ids = Tensor::from_vector<int64_t>(*u.rows);
    for (VariableStorage* storage : u.storages) {
      auto* local = static_cast<LocalStorage*>(storage);
      Tensor live;
      {
        std::lock_guard lock(local->mu_);
        if (!local->initialized_) {
          throw FailedPreconditionError("modify_rows: a variable of this process is uninitialized");
        }
        live = local->value_;
      }
      s.values.push_back(u.rows ? gather_rows(live, *u.rows).to_host() : live.to_host().clone());
      s.storages.push_back(local);
      s.live.push_back(std::move(live));
    }
  }
  for (size_t i = 0; i < updates.size(); ++i) updates[i].fn(staged[i].values);
  for (Staged& s : staged) {
    for (size_t k = 0; k < s.live.size(); ++k) {
      Tensor& live = s.live[k];
      const Tensor& values = s.values[k];
      if (s.ids.valid()) {
        scatter_tensor(ScatterOp::kUpdate, live, s.ids, values.on(live.device()), {});
        s.storages[k]->dirty_.record(live.shape().dim(0), s.ids);
      } else {
        copy_bytes(live.device(), live.raw_data(), values.device(), values.raw_data(),
                   values.nbytes());
      }
      s.storages[k]->note_write(/*all_rows=*/!s.ids.valid());
    }
  }
}

std::vector<int64_t> LocalStorage::take_marked_rows() {
  const TensorShape full = shape();
  const int64_t rows = full.rank() > 0 ? full.dim(0) : 1;
  DirtyRows::Taken taken = dirty_.take(rows, marked_generation_);
  marked_generation_ = taken.generation;
  if (!taken.all) return std::move(taken.rows);
  std::vector<int64_t> all(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) all[static_cast<size_t>(r)] = r;
  return all;
}

}  // namespace varstate::internal
