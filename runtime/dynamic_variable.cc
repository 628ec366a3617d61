#include "varstate/dynamic_variable.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "runtime/dynamic_variable_internal.h"
#include "runtime/initializer_recipe.h"
#include "runtime/keyed_storage.h"
#include "runtime/remote_storage.h"
#include "runtime/row_gather.h"
#include "runtime/scatter_validate.h"
#include "runtime/variable_access.h"
#include "varstate/device_manager.h"
#include "varstate/device_spec.h"
#include "varstate/error.h"
#include "varstate/graph.h"
#include "varstate/indexed_slices.h"
#include "varstate/random_seed.h"
#include "varstate/variable_scope.h"

namespace varstate {
namespace internal {

struct DynamicVariableAccess {
  static DynamicVariable make(Variable v) { return DynamicVariable(std::move(v)); }
};

namespace {

// A scalar of `dtype` on the host.
Tensor host_scalar(const Tensor& value, DType dtype, const std::string& what) {
  return convert_to_dtype(value.to_host(), dtype, what).cast(dtype);
}

}  // namespace

bool draws_rows_from_keys(const Initializer& init) {
  if (!init) return false;
  switch (recipe_of(init)->kind) {
    case InitializerKind::kZeros:
    case InitializerKind::kOnes:
    case InitializerKind::kRandomUniform:
    case InitializerKind::kRandomNormal:
    case InitializerKind::kTruncatedNormal:
      return true;
    case InitializerKind::kConstant:
      return recipe_of(init)->value.num_elements() == 1;
    default:
      return false;
  }
}

KeyedRowInit keyed_row_init(const Initializer& init, DType dtype, const std::string& name) {
  const InitializerRecipe& r = *recipe_of(init);
  KeyedRowInit out;
  const std::string what = "initializer of " + quoted(name);
  switch (r.kind) {
    case InitializerKind::kZeros:
      out.a = Tensor::zeros(dtype, {});
      return out;
    case InitializerKind::kOnes:
      out.a = Tensor::filled(dtype, {}, Tensor(1), DeviceManager::instance().cpu());
      return out;
    case InitializerKind::kConstant:
      if (r.value.num_elements() != 1) {
        throw ValueError(what +
                         ": a dynamic variable's constant initializer must be a scalar, "
                         "got shape " +
                         r.value.shape().to_string());
      }
      out.a = host_scalar(r.value.reshaped({}), dtype, what);
      return out;
    case InitializerKind::kRandomUniform:
    case InitializerKind::kRandomNormal:
    case InitializerKind::kTruncatedNormal: {
      const RandomOpForm form = random_op_form(r, TensorShape({1, 1}), dtype);
      out.kind = form.distribution == RandomDistribution::kUniform ? KeyedRowInit::Kind::kUniform
                 : form.distribution == RandomDistribution::kNormal
                     ? KeyedRowInit::Kind::kNormal
                     : KeyedRowInit::Kind::kTruncatedNormal;
      out.a = form.a;
      out.b = form.b;
      const SeedPair seeds = r.seeds ? *r.seeds : resolve_seed(r.op_seed);
      out.seed = static_cast<uint64_t>(seeds.seed);
      out.seed2 = static_cast<uint64_t>(seeds.seed2);
      return out;
    }
    default:
      throw ValueError(what +
                       ": a dynamic variable draws each row from its key, so its "
                       "initializer must be zeros, ones, a scalar constant, random_uniform, "
                       "random_normal or truncated_normal (this one depends on the table's shape "
                       "or is a custom function)");
  }
}

namespace {

// The device `name` names, or null when this process has none such (no
// soft placement: a shard never moves).
Device* shard_device(const std::string& name) {
  return DeviceManager::instance().find(DeviceSpec::parse(name));
}

std::vector<Device*> shard_devices(const std::vector<std::string>& names) {
  std::vector<Device*> out;
  for (const std::string& name : names) out.push_back(shard_device(name));
  return out;
}

}  // namespace

void check_shard_devices(const std::string& what, const std::vector<std::string>& devices) {
  if (devices.empty()) return;
  if (devices.size() == 1) {
    throw ValueError(what + ": devices must name two or more devices to shard over, got one (" +
                     quoted(devices.front()) + "); leave it empty and use a device scope instead");
  }
  // Cluster tasks (every name a job's task): a Cluster holds the shards.
  size_t on_tasks = 0;
  for (const std::string& name : devices) on_tasks += DeviceSpec::parse(name).job ? 1 : 0;
  if (on_tasks > 0) {
    if (on_tasks != devices.size()) {
      throw ValueError(what + ": devices mixes cluster tasks and devices of this process (" +
                       quoted(devices.front()) + ", ...); shard over one kind");
    }
    if (!remote_storage_installed()) {
      throw ValueError(what + ": devices names cluster tasks (" + quoted(devices.front()) +
                       ", ...) but no Cluster is active in this process");
    }
    std::vector<std::string> tasks;
    for (const std::string& name : devices) {
      const DeviceSpec spec = DeviceSpec::parse(name);
      const std::string task =
          "/job:" + *spec.job + "/task:" + std::to_string(spec.task.value_or(0));
      if (std::find(tasks.begin(), tasks.end(), task) != tasks.end()) {
        throw ValueError(what + ": devices names " + task +
                         " twice; each shard needs a task of its own");
      }
      tasks.push_back(task);
    }
    return;
  }
  std::vector<Device*> seen;
  for (const std::string& name : devices) {
    Device* device = nullptr;
    try {
      device = shard_device(name);
    } catch (const Error& e) {
      throw ValueError(what + ": cannot shard over device " + quoted(name) + ": " + e.what());
    }
    if (device == nullptr) {
      throw ValueError(what + ": cannot shard over device " + quoted(name) +
                       ": this process has no such device (it has " +
                       DeviceManager::instance().device_list() + ")");
    }
    if (std::find(seen.begin(), seen.end(), device) != seen.end()) {
      throw ValueError(what + ": devices names " + device->name() +
                       " twice; each shard needs a device of its own");
    }
    seen.push_back(device);
  }
}

namespace {

std::string listed(const std::vector<Device*>& devices) {
  std::string out = "[";
  for (Device* d : devices) out += (out.size() > 1 ? ", " : "") + d->name();
  return out + "]";
}

}  // namespace

std::string shard_device_names(const std::vector<std::string>& devices) {
  return listed(shard_devices(devices));
}

std::string shard_device_names(const DynamicVariable& v) {
  return listed(keyed_storage(v.variable())->table().devices());
}

// Creates the dynamic variable `name` (full name) in `graph`. The caller
// holds the variable store's lock and has checked the name is free.
Variable create_dynamic_variable(Graph& graph, const std::string& name,
                                 const DynamicVariableOptions& o, DType dtype,
                                 const Initializer& initializer) {
  const int64_t dim = o.dim;
  const KeyedRowInit init = keyed_row_init(initializer, dtype, name);
  Tensor absent_row;
  if (o.default_value) {
    const Tensor d =
        convert_to_dtype(o.default_value->to_host(), dtype, "default_value of " + quoted(name));
    if (d.num_elements() != 1 && d.shape() != TensorShape({dim})) {
      throw ValueError("default_value of " + quoted(name) + " must be a scalar or a [" +
                       std::to_string(dim) + "] row, got shape " + d.shape().to_string());
    }
    absent_row = d.num_elements() == 1 ? d.reshaped({}).clone() : d.clone();
  }
  ScopedStorageFactory factory([&](const std::string& op_name, DType, Device& device,
                                   const std::string& placement) {
    KeyedPolicy policy;
    policy.admit_after = o.admit_after;
    policy.max_rows = o.max_rows;
    policy.evict = o.eviction == DynamicVariableOptions::Eviction::kNone ? KeyedPolicy::Evict::kNone
                   : o.eviction == DynamicVariableOptions::Eviction::kLeastFrequentlyUpdated
                       ? KeyedPolicy::Evict::kLeastFrequentlyUpdated
                       : KeyedPolicy::Evict::kLeastRecentlyUpdated;
    policy.expire_after = o.expire_after;
    // On cluster tasks when its placement (or every shard's) names one.
    std::shared_ptr<KeyedTable> table;
    if (remote_storage_installed()) {
      table = make_remote_keyed_table(
          op_name, o.key_dtype, o.devices.empty() ? std::vector<std::string>{placement} : o.devices,
          policy);
    }
    if (!table) {
      std::vector<Device*> devices = {&device};
      if (!o.devices.empty()) devices = shard_devices(o.devices);
      table = make_keyed_table(op_name, o.key_dtype, devices, policy);
    }
    table->add_member(op_name, dtype, TensorShape({dim}), init);
    if (o.initial_capacity > 0) table->reserve(o.initial_capacity);
    return std::make_shared<KeyedStorage>(std::move(table), 0, absent_row);
  });
  VariableOptions vo;
  vo.trainable = o.trainable;
  vo.collections = o.collections;
  vo.validate_shape = false;  // the row count follows the keys
  vo.name = name;
  vo.graph = &graph;
  NameScope root(graph, "");  // get_variable names ignore name scopes
  // A sharded table's variable is on its first shard's device.
  std::optional<DeviceScope> first;
  if (!o.devices.empty()) first.emplace(o.devices.front());
  // The initial value is the empty table (a constant a meta graph stores).
  return Variable(Tensor::zeros(dtype, {0, dim}), vo);
}

DynamicVariable as_dynamic(const Variable& v) { return DynamicVariableAccess::make(v); }

}  // namespace internal

namespace {

using internal::KeyedStorage;
using internal::KeyedTable;

KeyedStorage& keyed(const Variable& v) { return *internal::keyed_storage(v); }

void check_initialized(const Variable& v) {
  if (!v.is_initialized()) internal::throw_uninitialized(v.op_name());
}

TensorShape rows_of(const TensorShape& keys_shape, int64_t dim) {
  return keys_shape.concatenate(TensorShape({dim}));
}

}  // namespace

std::optional<DynamicVariable> DynamicVariable::from_variable(const Variable& variable) {
  const KeyedStorage* k = internal::keyed_storage(variable);
  if (k == nullptr || k->member() != 0) return std::nullopt;
  return DynamicVariable(variable);
}

const std::string& DynamicVariable::name() const { return variable_.name(); }
const std::string& DynamicVariable::op_name() const { return variable_.op_name(); }
DType DynamicVariable::dtype() const { return variable_.dtype(); }
DType DynamicVariable::key_dtype() const { return keyed(variable_).table().key_dtype(); }
int64_t DynamicVariable::dim() const { return keyed(variable_).table().row_shape(0).dim(0); }
Device& DynamicVariable::device() const { return variable_.device(); }
const Variable& DynamicVariable::variable() const { return variable_; }
Variable& DynamicVariable::variable() { return variable_; }
const Op& DynamicVariable::initializer() const { return variable_.initializer(); }
bool DynamicVariable::is_initialized() const { return variable_.is_initialized(); }
int64_t DynamicVariable::size() const { return keyed(variable_).table().size(); }
int64_t DynamicVariable::memory_bytes() const { return keyed(variable_).table().memory_bytes(); }

Tensor DynamicVariable::gather(const Tensor& keys, const DynamicGatherOptions& options) {
  const std::string who = "gather on " + quoted(op_name());
  check_initialized(variable_);
  KeyedStorage& k = keyed(variable_);
  if (k.on_table_device(keys)) {
    // Keys in the table's device memory: resolved there (in training, when
    // every one is present).
    if (std::optional<Tensor> rows = k.table().gather_device_keys(
            0, keys.reshaped({keys.num_elements()}), options.training, k.absent_row())) {
      return rows->reshaped(rows_of(keys.shape(), dim()));
    }
  }
  const std::vector<int64_t> ids = internal::checked_keys(keys, key_dtype(), who);
  return k.table()
      .gather(0, ids, options.training, k.absent_row())
      .reshaped(rows_of(keys.shape(), dim()));
}

void DynamicVariable::insert(const Tensor& keys, const Tensor& values) {
  const std::string who = "insert into " + quoted(op_name());
  check_initialized(variable_);
  const std::vector<int64_t> ids = internal::checked_keys(keys, key_dtype(), who);
  if (!values.valid()) throw InvalidArgumentError(who + ": empty tensor handle for values");
  const Tensor v = convert_to_dtype(values, dtype(), who + ": values");
  const TensorShape expected = rows_of(keys.shape(), dim());
  if (v.shape() != expected) {
    throw InvalidArgumentError(who + ": values must have shape " + expected.to_string() +
                               " (the keys' shape, then the row's), got " + v.shape().to_string());
  }
  KeyedTable& table = keyed(variable_).table();
  // A table on one GPU takes its rows there (they may be there already);
  // the others on the host.
  const bool one_gpu = table.devices().size() == 1 && !table.device().is_cpu();
  const Tensor flat = v.reshaped(TensorShape({static_cast<int64_t>(ids.size()), dim()}));
  const Tensor rows = one_gpu ? flat.on(table.device()) : flat.to_host();
  std::lock_guard lock(internal::update_mutex(variable_));
  table.insert(ids, rows);
}

int64_t DynamicVariable::expire() {
  check_initialized(variable_);
  std::lock_guard lock(internal::update_mutex(variable_));
  return keyed(variable_).table().expire();
}

int64_t DynamicVariable::step() const { return keyed(variable_).table().step(); }

int64_t DynamicVariable::erase(const Tensor& keys) {
  const std::string who = "erase from " + quoted(op_name());
  check_initialized(variable_);
  const std::vector<int64_t> ids = internal::checked_keys(keys, key_dtype(), who);
  std::lock_guard lock(internal::update_mutex(variable_));
  return keyed(variable_).table().erase(ids);
}

KeysAndValues DynamicVariable::export_rows() const {
  check_initialized(variable_);
  KeyedTable::Export e = keyed(variable_).table().export_rows({0});
  Tensor k = key_dtype() == DType::kInt64 ? e.keys : e.keys.cast(key_dtype());
  return {k, e.values.front()};
}

#define VARSTATE_DYNAMIC_SCATTER(kind, fn)                                                    \
  void DynamicVariable::fn(const Tensor& keys, const Tensor& updates,                         \
                           const UpdateOptions& options) {                                    \
    internal::storage(variable_).scatter(                                                     \
        kernels::ScatterOp::kind, variable_, keys, updates, options,                          \
        internal::scatter_subject(kernels::ScatterOp::kind, options.name, op_name()), false); \
  }
VARSTATE_DYNAMIC_SCATTER(kUpdate, scatter_update)
VARSTATE_DYNAMIC_SCATTER(kAdd, scatter_add)
VARSTATE_DYNAMIC_SCATTER(kSub, scatter_sub)
VARSTATE_DYNAMIC_SCATTER(kMul, scatter_mul)
VARSTATE_DYNAMIC_SCATTER(kDiv, scatter_div)
VARSTATE_DYNAMIC_SCATTER(kMin, scatter_min)
VARSTATE_DYNAMIC_SCATTER(kMax, scatter_max)
#undef VARSTATE_DYNAMIC_SCATTER

GradientAndVariable DynamicVariable::gradient(const Tensor& keys, const Tensor& grads) const {
  const std::string who = "gradient of " + quoted(op_name());
  internal::check_keys(keys, key_dtype(), who);
  if (!grads.valid()) throw InvalidArgumentError(who + ": empty tensor handle for grads");
  const TensorShape expected = rows_of(keys.shape(), dim());
  if (grads.shape() != expected) {
    throw InvalidArgumentError(who + ": grads must have shape " + expected.to_string() +
                               " (the keys' shape, then the row's), got " +
                               grads.shape().to_string());
  }
  const int64_t n = keys.num_elements();
  return {IndexedSlices(grads.reshaped(TensorShape({n, dim()})), keys.reshaped({n})), variable_};
}

}  // namespace varstate
