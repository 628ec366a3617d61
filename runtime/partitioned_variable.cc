#include "varstate/partitioned_variable.h"

#include <algorithm>
#include <atomic>
#include <span>

#include "kernels/scatter_ops.h"
#include "runtime/dense_update_internal.h"
#include "runtime/partitioned_variable_internal.h"
#include "runtime/row_gather.h"
#include "runtime/scatter_by_op.h"
#include "runtime/scatter_validate.h"
#include "runtime/update_options_internal.h"
#include "runtime/variable_access.h"
#include "runtime/variable_storage.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/slice.h"

namespace varstate {

namespace internal {

PartRoutes::PartRoutes(std::span<const int64_t> offsets, std::span<const int64_t> idx)
    : positions_(idx.size()), begin_(offsets.size(), 0) {
  struct PartOfTag;
  const size_t num_parts = offsets.size() - 1;
  const size_t n = idx.size();
  kernels::cpu::ThreadScratch<uint32_t, PartOfTag> part_of_scratch(n);
  uint32_t* part_of = part_of_scratch.data();
  // Counted into four interleaved tallies: one tally per part made every id
  // wait for the store of the last id of its part.
  constexpr size_t kTallies = 4;
  std::vector<int64_t> tallies(kTallies * num_parts, 0);
  for (size_t i = 0; i < n; ++i) {
    const auto k = static_cast<uint32_t>(locate_row(offsets, idx[i]).part);
    part_of[i] = k;
    ++tallies[(i % kTallies) * num_parts + k];
  }
  // Each part's lists are filled at one cursor (the same for both): the
  // positions at their place in the one shared array, the local rows at
  // the same offset into the part's tensor.
  std::vector<int64_t*> positions(num_parts), local(num_parts);
  std::vector<int64_t> cursor(num_parts, 0);
  local_.reserve(num_parts);
  for (size_t k = 0; k < num_parts; ++k) {
    int64_t count = 0;
    for (size_t t = 0; t < kTallies; ++t) count += tallies[t * num_parts + k];
    begin_[k + 1] = begin_[k] + count;
    local_.emplace_back(DType::kInt64, TensorShape{count});
    positions[k] = positions_.data() + begin_[k];
    local[k] = local_[k].data<int64_t>();
  }
  for (size_t i = 0; i < n; ++i) {
    const uint32_t k = part_of[i];
    const int64_t at = cursor[k];
    local[k][at] = idx[i] - offsets[k];
    positions[k][at] = static_cast<int64_t>(i);
    cursor[k] = at + 1;
  }
}

}  // namespace internal

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
  // A variable twice would be updated twice, and a scatter would take its
  // lock twice.
  for (size_t i = 0; i < parts.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (parts[i].same_as(parts[j])) {
        throw ValueError(who + ": part " + quoted(parts[i].op_name()) + " is given twice (parts " +
                         std::to_string(j) + " and " + std::to_string(i) + ")");
      }
    }
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
  internal::check_initialized(s.parts);
  if (s.parts.size() == 1) return s.parts[0].read_value().to(device);
  Tensor out(s.dtype, s.shape, device);
  for (size_t i = 0; i < s.parts.size(); ++i) {
    Tensor part = s.parts[i].value();
    part = part.on(device);
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

namespace {

using kernels::DenseUpdateOp;
using kernels::ScatterOp;

void dense_update(const PartitionedVariable& var, DenseUpdateOp op, const Tensor& value,
                  const UpdateOptions& options) {
  const std::vector<Variable>& parts = var.variables();
  const std::vector<int64_t>& offsets = var.offsets();
  // The checks and messages of Variable::assign and friends.
  const std::string what = internal::dense_update_subject(op, var.name());
  Tensor v = convert_to_dtype(value, var.dtype(), what);
  const bool arithmetic = op != DenseUpdateOp::kAssign;
  internal::check_dense_update_shape(what, var.shape(), v.shape(), /*scalar_ok=*/arithmetic);
  const bool scalar = v.shape() != var.shape();
  if (arithmetic) internal::check_initialized(parts);
  std::vector<Tensor> pieces;
  for (size_t i = 0; i < parts.size(); ++i) {
    pieces.push_back(scalar || parts.size() == 1
                         ? v
                         : strided_slice(v, axis_range(var.axis(), offsets[i], offsets[i + 1])));
  }
  // Each part keeps its shape (the whole shape was checked above).
  const UpdateOptions part_options{
      .use_locking = internal::use_locking(options, op, internal::UpdateCaller::kPartitioned)};
  for (size_t i = 0; i < parts.size(); ++i) {
    Variable part = parts[i];
    switch (op) {
      case DenseUpdateOp::kAssign:
        part.assign(pieces[i], part_options);
        break;
      case DenseUpdateOp::kAdd:
        part.assign_add(pieces[i], part_options);
        break;
      case DenseUpdateOp::kSub:
        part.assign_sub(pieces[i], part_options);
        break;
    }
  }
}

}  // namespace

void PartitionedVariable::assign(const Tensor& value, const UpdateOptions& options) {
  dense_update(*this, DenseUpdateOp::kAssign, value, options);
}
void PartitionedVariable::assign_add(const Tensor& delta, const UpdateOptions& options) {
  dense_update(*this, DenseUpdateOp::kAdd, delta, options);
}
void PartitionedVariable::assign_sub(const Tensor& delta, const UpdateOptions& options) {
  dense_update(*this, DenseUpdateOp::kSub, delta, options);
}

namespace {

bool all_local_cpu(const std::vector<Variable>& parts) {
  return std::all_of(parts.begin(), parts.end(), [](const Variable& v) {
    return v.device().is_cpu() && internal::storage(v).updates_in_place();
  });
}

// Parts on a GPU or on another task: each part receives its own indices
// (re-based to the part) and update rows, through its kind of storage's
// batch entry: one scatter per local part, one exchange per task holding
// remote parts.
void scatter_routed(const PartitionedVariable& var, ScatterOp op, std::span<const int64_t> idx,
                    const internal::ScatterArgs& args, const UpdateOptions& options) {
  const std::vector<Variable>& parts = var.variables();
  // Part k holds rows [offsets[k], offsets[k+1]), whatever the sizes.
  const internal::PartRoutes routes(var.offsets(), idx);
  const int64_t n = args.n;
  const Tensor& upd = args.updates;
  Tensor flat_updates =
      args.updates_scalar ? upd : upd.reshaped(TensorShape({n}).concatenate(var.shape().tail(1)));
  std::vector<Variable> handles = parts;
  std::vector<internal::StoragePart> batch;
  for (size_t k = 0; k < parts.size(); ++k) {
    const Tensor& local = routes.local()[k];
    if (local.num_elements() == 0) continue;
    const std::span<const int64_t> positions = routes.positions(k);
    Tensor part_updates;
    if (args.updates_scalar) {
      part_updates = upd;
    } else if (static_cast<int64_t>(positions.size()) == n) {
      part_updates = flat_updates;  // every index is in this part: no copy
    } else {
      part_updates = internal::gather_rows(flat_updates, positions);
    }
    batch.push_back({&internal::storage(parts[k]), &handles[k], local, part_updates});
  }
  internal::for_each_kind(batch, [&](std::vector<internal::StoragePart>& group) {
    group[0].storage->scatter_parts(op, group, args.updates_scalar, options);
  });
}

// The scatter `op` on the whole variable: validated as a scatter on one
// variable (the same checks and messages, naming the partitioned variable),
// then applied to the parts.
void scatter(const PartitionedVariable& var, ScatterOp op, const Tensor& indices,
             const Tensor& updates, const UpdateOptions& options) {
  const std::string who = internal::scatter_subject(op, options.name, var.name());
  const std::vector<Variable>& parts = var.variables();
  if (parts.size() == 1) {
    Variable part = parts[0];
    internal::scatter_into(op, part, indices, updates, options, who);
    return;
  }
  if (var.axis() != 0) {
    throw InvalidArgumentError(who +
                               ": a partitioned variable takes sparse updates only when "
                               "partitioned along axis 0, this one is partitioned along axis " +
                               std::to_string(var.axis()));
  }
  // As a scatter on one variable: initialization first, then the arguments.
  internal::check_initialized(parts);
  const internal::ScatterArgs args =
      internal::check_scatter_args(op, var.dtype(), var.shape(), indices, updates, who);
  const internal::HostIndices idx(indices);
  // Divisors are checked here so that a zero for a later part cannot leave
  // the earlier parts updated.
  if (internal::integer_division(op, var.dtype())) {
    internal::check_divisors(op, args.updates.to_host(), who);
  }
  if (all_local_cpu(parts)) {
    // Every part reads the caller's indices and update rows in place; the
    // kernel checks the indices in its first pass and then writes, or not.
    std::vector<Variable> local = parts;
    internal::scatter_cpu_parts(op, local, var.offsets(), idx.view(), indices.shape(),
                                args.updates.to_host(), args.updates_scalar, options, who);
    return;
  }
  // Parts on GPUs or other tasks are written one after another: every index
  // is checked before the first.
  internal::check_index_values(idx.view(), indices.shape(), args.rows, who);
  scatter_routed(var, op, idx.view(), args, options);
}

// The scatter of IndexedSlices: their dense_shape checked as for a
// Variable, then the scatter of their rows.
void scatter_slices(const PartitionedVariable& var, ScatterOp op, const IndexedSlices& delta,
                    const UpdateOptions& options) {
  internal::check_dense_shape(delta, var.shape(),
                              internal::scatter_subject(op, options.name, var.name()));
  scatter(var, op, delta.indices(), delta.values(), options);
}

}  // namespace

#define VARSTATE_PARTITIONED_SCATTER(KIND, FN, NODE, ARITHMETIC, ORDERED)                         \
  void PartitionedVariable::FN(const Tensor& indices, const Tensor& updates,                      \
                               const UpdateOptions& options) {                                    \
    scatter(*this, ScatterOp::KIND, indices, updates, options);                                   \
  }                                                                                               \
  void PartitionedVariable::FN(const IndexedSlices& sparse_delta, const UpdateOptions& options) { \
    scatter_slices(*this, ScatterOp::KIND, sparse_delta, options);                                \
  }
VARSTATE_SCATTER_OPS(VARSTATE_PARTITIONED_SCATTER)
#undef VARSTATE_PARTITIONED_SCATTER

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
