#include "varstate/partitioned_variable.h"

#include <algorithm>
#include <atomic>
#include <span>

#include "kernels/cpu/scatter.h"
#include "runtime/gather_internal.h"
#include "runtime/remote_storage_internal.h"
#include "runtime/scatter_internal.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/math_ops.h"
#include "varstate/slice.h"

namespace varstate {

struct PartitionedVariable::State {
  std::string name;
  TensorShape shape;
  DType dtype = DType::kInvalid;
  std::vector<Variable> parts;
  std::vector<int64_t> partitions;
  int axis = 0;
  std::vector<int64_t> offsets;  // along axis, one per part, plus the total
};

namespace {

std::string shape_string(const std::vector<int64_t>& dims) { return TensorShape(dims).to_string(); }

// The specs selecting rows [begin, end) of dimension `axis`.
std::vector<SliceSpec> axis_range(int axis, int64_t begin, int64_t end) {
  std::vector<SliceSpec> specs(static_cast<size_t>(axis), Slice::all());
  specs.push_back(Slice::range(begin, end));
  return specs;
}

void check_initialized(const std::vector<Variable>& parts) {
  for (const Variable& part : parts) {
    if (!part.is_initialized()) {
      throw FailedPreconditionError("Attempting to use uninitialized value " + part.op_name());
    }
  }
}

}  // namespace

PartitionedVariable::PartitionedVariable(std::string name, const TensorShape& shape, DType dtype,
                                         std::vector<Variable> parts,
                                         std::vector<int64_t> partitions) {
  auto s = std::make_shared<State>();
  const std::string who = "PartitionedVariable " + quoted(name);
  if (parts.empty()) throw ValueError(who + ": no parts");
  if (!shape.is_fully_defined() || shape.rank() < 1) {
    throw ValueError(who + ": shape must be fully defined with rank >= 1, got " +
                     shape.to_string());
  }
  if (static_cast<int>(partitions.size()) != shape.rank()) {
    throw ValueError(who + ": partitions " + shape_string(partitions) +
                     " do not match the variable's rank " + std::to_string(shape.rank()));
  }
  int axis = 0;
  int sliced = 0;
  int64_t total = 1;
  for (int d = 0; d < shape.rank(); ++d) {
    if (partitions[static_cast<size_t>(d)] != 1) {
      axis = d;
      ++sliced;
    }
    total *= partitions[static_cast<size_t>(d)];
  }
  if (sliced > 1 || total != static_cast<int64_t>(parts.size())) {
    throw ValueError(who + ": partitions " + shape_string(partitions) + " do not describe " +
                     std::to_string(parts.size()) + " parts along one axis");
  }
  int64_t offset = 0;
  for (const Variable& part : parts) {
    if (part.dtype() != dtype) {
      throw ValueError(who + ": part " + quoted(part.op_name()) + " has dtype " +
                       std::string(dtype_name(part.dtype())) + ", expected " +
                       std::string(dtype_name(dtype)));
    }
    const TensorShape ps = part.shape();
    bool fits = ps.rank() == shape.rank();
    for (int d = 0; fits && d < shape.rank(); ++d) {
      if (d != axis && ps.dim(d) != shape.dim(d)) fits = false;
    }
    if (!fits) {
      throw ValueError(who + ": part " + quoted(part.op_name()) + " of shape " + ps.to_string() +
                       " is not a slice of " + shape.to_string() + " along axis " +
                       std::to_string(axis));
    }
    s->offsets.push_back(offset);
    offset += ps.dim(axis);
  }
  if (offset != shape.dim(axis)) {
    throw ValueError(who + ": parts cover " + std::to_string(offset) + " of the " +
                     std::to_string(shape.dim(axis)) + " entries of axis " + std::to_string(axis));
  }
  s->offsets.push_back(offset);
  s->name = std::move(name);
  s->shape = shape;
  s->dtype = dtype;
  s->parts = std::move(parts);
  s->partitions = std::move(partitions);
  s->axis = axis;
  state_ = std::move(s);
}

const std::string& PartitionedVariable::name() const { return state_->name; }
DType PartitionedVariable::dtype() const { return state_->dtype; }
TensorShape PartitionedVariable::shape() const { return state_->shape; }
const std::vector<int64_t>& PartitionedVariable::partitions() const { return state_->partitions; }
int PartitionedVariable::axis() const { return state_->axis; }
const std::vector<Variable>& PartitionedVariable::variables() const { return state_->parts; }
const std::vector<int64_t>& PartitionedVariable::offsets() const { return state_->offsets; }

Op PartitionedVariable::initializer() const {
  std::vector<Op> ops;
  for (const Variable& part : state_->parts) ops.push_back(part.initializer());
  return Op::group(std::move(ops), state_->name + "/init");
}

Tensor PartitionedVariable::as_tensor(Device& device) const {
  const State& s = *state_;
  check_initialized(s.parts);
  if (s.parts.size() == 1) return s.parts[0].read_value().to(device);
  Tensor out(s.dtype, s.shape, device);
  for (size_t i = 0; i < s.parts.size(); ++i) {
    Tensor part = s.parts[i].value();
    if (&part.device() != &device) part = part.to(device);
    strided_slice_assign(out, axis_range(s.axis, s.offsets[i], s.offsets[i + 1]), part, s.name);
  }
  return out;
}

Tensor PartitionedVariable::as_tensor() const {
  return as_tensor(place({state_->name + "/ConcatPartitions/concat", "ConcatV2"}));
}

Tensor PartitionedVariable::eval(const Session&) const {
  for (const Variable& part : state_->parts) part.sync();
  return as_tensor(DeviceManager::instance().cpu());
}

Tensor PartitionedVariable::eval() const {
  const Session* session = Session::default_session();
  if (!session) {
    throw FailedPreconditionError(
        "Cannot evaluate " + quoted(state_->name) +
        ": no session given and no default session is set (Session::as_default())");
  }
  return eval(*session);
}

// kind: 0 assign, 1 assign_add, 2 assign_sub.
void PartitionedVariable::dense_update(int kind, const Tensor& value,
                                       const UpdateOptions& options) {
  const State& s = *state_;
  static const char* const kNames[] = {"assign", "assign_add", "assign_sub"};
  const std::string what = std::string(kNames[kind]) + " on " + quoted(s.name);
  Tensor v = convert_to_dtype(value, s.dtype, what);
  const bool scalar = v.rank() == 0 && kind != 0;
  if (!scalar && v.shape() != s.shape) {
    throw InvalidArgumentError(what + ": value has shape " + v.shape().to_string() +
                               ", expected the variable's shape " + s.shape.to_string() +
                               (kind == 0 ? "" : " or a scalar"));
  }
  if (kind != 0) check_initialized(s.parts);
  std::vector<Tensor> pieces;
  for (size_t i = 0; i < s.parts.size(); ++i) {
    pieces.push_back(scalar || s.parts.size() == 1
                         ? v
                         : strided_slice(v, axis_range(s.axis, s.offsets[i], s.offsets[i + 1])));
  }
  // Each part keeps its shape (the whole shape was checked above).
  const UpdateOptions part_options{.use_locking = options.use_locking.value_or(false)};
  for (size_t i = 0; i < s.parts.size(); ++i) {
    Variable part = s.parts[i];
    if (kind == 0) part.assign(pieces[i], part_options);
    if (kind == 1) part.assign_add(pieces[i], part_options);
    if (kind == 2) part.assign_sub(pieces[i], part_options);
  }
}

void PartitionedVariable::assign(const Tensor& value, const UpdateOptions& options) {
  dense_update(0, value, options);
}
void PartitionedVariable::assign_add(const Tensor& delta, const UpdateOptions& options) {
  dense_update(1, delta, options);
}
void PartitionedVariable::assign_sub(const Tensor& delta, const UpdateOptions& options) {
  dense_update(2, delta, options);
}

namespace {

kernels::ScatterOp scatter_kind(PartitionedVariable::PartScatter op) {
  using P = PartitionedVariable::PartScatter;
  if (op == static_cast<P>(&varstate::scatter_update)) return kernels::ScatterOp::kUpdate;
  if (op == static_cast<P>(&varstate::scatter_add)) return kernels::ScatterOp::kAdd;
  if (op == static_cast<P>(&varstate::scatter_sub)) return kernels::ScatterOp::kSub;
  if (op == static_cast<P>(&varstate::scatter_mul)) return kernels::ScatterOp::kMul;
  if (op == static_cast<P>(&varstate::scatter_div)) return kernels::ScatterOp::kDiv;
  if (op == static_cast<P>(&varstate::scatter_min)) return kernels::ScatterOp::kMin;
  return kernels::ScatterOp::kMax;
}

}  // namespace

void PartitionedVariable::scatter(PartScatter op, const char* op_name, const Tensor& indices,
                                  const Tensor& updates, const UpdateOptions& options) {
  const State& s = *state_;
  if (s.parts.size() == 1) {
    Variable part = s.parts[0];
    if (!internal::scatter_if_remote(scatter_kind(op), part, indices, updates, options)) {
      op(part, indices, updates, options);
    }
    return;
  }
  const std::string what = std::string(op_name) + " on " + quoted(s.name);
  if (s.axis != 0) {
    throw InvalidArgumentError(what +
                               ": a partitioned variable takes sparse updates only when "
                               "partitioned along axis 0, this one is partitioned along axis " +
                               std::to_string(s.axis));
  }
  if (indices.dtype() != DType::kInt32 && indices.dtype() != DType::kInt64) {
    throw TypeError(what + ": indices must be int32 or int64, got " +
                    std::string(dtype_name(indices.dtype())));
  }
  Tensor upd = convert_to_dtype(updates, s.dtype, what);
  const TensorShape row_shape = s.shape.tail(1);
  const bool scalar_update = upd.rank() == 0;
  if (!scalar_update && upd.shape() != indices.shape().concatenate(row_shape)) {
    throw InvalidArgumentError(what + ": updates has shape " + upd.shape().to_string() +
                               ", expected indices.shape + variable.shape[1:] = " +
                               indices.shape().concatenate(row_shape).to_string() + " or a scalar");
  }
  check_initialized(s.parts);
  // The indices as int64 on the host: the caller's own buffer when it is one.
  std::vector<int64_t> converted;
  std::span<const int64_t> idx;
  if (indices.dtype() == DType::kInt64 && indices.on_cpu()) {
    idx = {indices.data<int64_t>(), static_cast<size_t>(indices.num_elements())};
  } else {
    converted = internal::host_indices(indices);
    idx = converted;
  }
  const int64_t rows = s.shape.dim(0);
  const int64_t bad =
      kernels::cpu::validate_indices<int64_t>(idx.data(), static_cast<int64_t>(idx.size()), rows);
  if (bad >= 0) {
    throw InvalidArgumentError(what + ": indices[" + std::to_string(bad) +
                               "] = " + std::to_string(idx[static_cast<size_t>(bad)]) +
                               " is not in [0, " + std::to_string(rows) + ")");
  }
  if (op == static_cast<PartScatter>(&varstate::scatter_div) && dtype_is_integer(s.dtype)) {
    // Checked here so that a zero divisor for a later part cannot leave the
    // earlier parts updated.
    Tensor zero = equal(upd, Tensor::zeros(s.dtype, {}, upd.device())).to_host();
    const bool* z = zero.data<bool>();
    for (int64_t i = 0; i < zero.num_elements(); ++i) {
      if (z[i]) {
        throw InvalidArgumentError(what + ": updates[" + std::to_string(i) +
                                   "] is 0 (integer division by zero)");
      }
    }
  }

  if (std::all_of(s.parts.begin(), s.parts.end(), [](const Variable& v) {
        return v.device().is_cpu() && internal::remote_storage(v) == nullptr;
      })) {
    // Every part reads the caller's indices and update rows in place.
    std::vector<Variable> parts = s.parts;
    internal::scatter_cpu_parts(scatter_kind(op), parts, s.offsets, idx,
                                upd.on_cpu() ? upd : upd.to_host(), scalar_update, options);
    return;
  }

  // Route: part k holds rows [offsets[k], offsets[k+1]); TensorFlow's split
  // gives the first `extra` parts one more row, so the owner is arithmetic.
  const int64_t n_parts = static_cast<int64_t>(s.parts.size());
  const int64_t base = rows / n_parts;
  const int64_t extra = rows % n_parts;
  const int64_t big_rows = extra * (base + 1);
  auto owner = [&](int64_t row) -> int64_t {
    return row < big_rows ? row / (base + 1) : extra + (row - big_rows) / base;
  };
  std::vector<std::vector<int64_t>> part_rows(s.parts.size());
  std::vector<std::vector<int64_t>> positions(s.parts.size());
  for (auto& v : part_rows) v.reserve(idx.size() / s.parts.size() + 16);
  for (auto& v : positions) v.reserve(idx.size() / s.parts.size() + 16);
  for (size_t p = 0; p < idx.size(); ++p) {
    const int64_t k = owner(idx[p]);
    part_rows[static_cast<size_t>(k)].push_back(idx[p] - s.offsets[static_cast<size_t>(k)]);
    positions[static_cast<size_t>(k)].push_back(static_cast<int64_t>(p));
  }
  const int64_t n = static_cast<int64_t>(idx.size());
  Tensor flat_updates = scalar_update ? upd : upd.reshaped(TensorShape({n}).concatenate(row_shape));
  for (size_t k = 0; k < s.parts.size(); ++k) {
    if (part_rows[k].empty()) continue;
    Tensor part_indices = Tensor::from_vector<int64_t>(part_rows[k]);
    Tensor part_updates;
    if (scalar_update) {
      part_updates = upd;
    } else if (static_cast<int64_t>(positions[k].size()) == n) {
      part_updates = flat_updates;  // every index is in this part: no copy
    } else {
      part_updates = internal::gather_rows(flat_updates, positions[k]);
    }
    Variable part = s.parts[k];
    // A part on another task: one batched exchange with its owner.
    if (!internal::scatter_if_remote(scatter_kind(op), part, part_indices, part_updates, options)) {
      op(part, part_indices, part_updates, options);
    }
  }
}

#define VARSTATE_PARTITIONED_SCATTER(OP)                                              \
  void PartitionedVariable::OP(const Tensor& indices, const Tensor& updates,          \
                               const UpdateOptions& options) {                        \
    scatter(static_cast<PartScatter>(&varstate::OP), #OP, indices, updates, options); \
  }
VARSTATE_PARTITIONED_SCATTER(scatter_update)
VARSTATE_PARTITIONED_SCATTER(scatter_add)
VARSTATE_PARTITIONED_SCATTER(scatter_sub)
VARSTATE_PARTITIONED_SCATTER(scatter_mul)
VARSTATE_PARTITIONED_SCATTER(scatter_div)
VARSTATE_PARTITIONED_SCATTER(scatter_min)
VARSTATE_PARTITIONED_SCATTER(scatter_max)
#undef VARSTATE_PARTITIONED_SCATTER

void PartitionedVariable::scatter_update(const IndexedSlices& d, const UpdateOptions& o) {
  scatter_update(d.indices(), d.values(), o);
}
void PartitionedVariable::scatter_add(const IndexedSlices& d, const UpdateOptions& o) {
  scatter_add(d.indices(), d.values(), o);
}
void PartitionedVariable::scatter_sub(const IndexedSlices& d, const UpdateOptions& o) {
  scatter_sub(d.indices(), d.values(), o);
}

DeviceFunction round_robin_gpus() {
  auto next = std::make_shared<std::atomic<int64_t>>(0);
  // Fields set by scopes inside this one (a job, an explicit device) win,
  // as with replica_device_setter's merge.
  return [next](const PlacementRequest& request) -> std::string {
    const int gpus = DeviceManager::instance().num_gpus();
    const DeviceSpec device =
        gpus == 0 ? DeviceSpec::of("CPU", 0) : DeviceSpec::of("GPU", next->fetch_add(1) % gpus);
    return device.merged_with(request.current).to_string();
  };
}

}  // namespace varstate
