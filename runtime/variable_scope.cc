#include "varstate/variable_scope.h"

#include <cmath>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "runtime/dynamic_variable_internal.h"
#include "runtime/remote_storage.h"
#include "runtime/scope_names.h"
#include "runtime/variable_store.h"
#include "varstate/error.h"
#include "varstate/slice.h"

namespace varstate {

// The variable-scope state of one graph: the scope stack, how often each
// scope name was opened (for default names), and get_variable's store.
struct ScopeStore {
  std::recursive_mutex mu;
  std::vector<VariableScope> stack{VariableScope()};
  std::map<std::string, int64_t> counts;
  std::unordered_map<std::string, Variable> vars;
  std::unordered_map<std::string, PartitionedVariable> partitioned;
};

namespace {

ScopeStore& store(Graph& graph) {
  // The graph keeps the store alive as long as itself.
  return *static_cast<ScopeStore*>(
      graph.extension("varstate.variable_scope", [] { return std::make_shared<ScopeStore>(); })
          .get());
}

std::string list_string(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string join_name(const std::string& scope, std::string_view name) {
  return scope.empty() ? std::string(name) : scope + "/" + std::string(name);
}

CustomGetter chain(CustomGetter inner, CustomGetter outer) {
  if (!outer) return inner;
  if (!inner) return outer;
  return [inner = std::move(inner), outer = std::move(outer)](
             const Getter& getter, const std::string& name, const GetVariableOptions& options) {
    // By value: a custom getter may keep the getter it was given.
    Getter next = [outer, getter](const std::string& n, const GetVariableOptions& o) {
      return outer(getter, n, o);
    };
    return inner(next, name, options);
  };
}

Initializer default_initializer(const std::string& name, DType dtype) {
  if (dtype_is_floating(dtype)) return glorot_uniform_initializer({.dtype = dtype});
  if (dtype_is_integer(dtype) || dtype == DType::kBool || dtype == DType::kString) {
    return zeros_initializer(dtype);
  }
  throw ValueError("An initializer for variable " + name + " of " + std::string(dtype_name(dtype)) +
                   " is required");
}

// Variables created under the store's lock whose regularizer runs after it.
using PendingRegularizers = std::vector<std::pair<Variable, Regularizer>>;

// The initial-value Tensor of a get_variable call, in `dtype` if given.
Tensor initial_tensor(const std::string& name, const Tensor& value,
                      const std::optional<DType>& dtype) {
  if (!dtype || value.dtype() == *dtype) return value;
  if (!value.weakly_typed()) {
    throw ValueError("Initializer type '" + std::string(dtype_name(value.dtype())) +
                     "' and explicit dtype '" + std::string(dtype_name(*dtype)) + "' don't match.");
  }
  return convert_to_dtype(value, *dtype, "initializer of " + quoted(name));
}

struct SingleRequest {
  std::optional<TensorShape> shape;
  VariableInitializer initializer;
  std::optional<PartitionInfo> partition_info;
  std::optional<SaveSliceInfo> save_slice_info;
};

// The shape a get_variable call asks for: its initial value's, or its
// shape argument's (unknown when absent).
TensorShape requested_shape(const SingleRequest& req) {
  return req.initializer.is_tensor() ? req.initializer.tensor().shape()
                                     : req.shape.value_or(TensorShape::unknown());
}

// The variable `found` under `name`, when reuse allows it and its shape and
// dtype match the request.
const Variable& reuse_single(const std::string& name, const Variable& found,
                             const SingleRequest& req, const GetVariableOptions& o, Reuse reuse) {
  if (!reuse) {
    throw ValueError("Variable " + name +
                     " already exists, disallowed. Did you mean to set reuse=True in VarScope?");
  }
  const TensorShape want = requested_shape(req);
  if (!want.is_compatible_with(found.shape())) {
    throw ValueError("Trying to share variable " + name + ", but specified shape " +
                     want.to_string() + " and found shape " + found.shape().to_string() + ".");
  }
  if (o.dtype && *o.dtype != found.dtype()) {
    throw ValueError("Trying to share variable " + name + ", but specified dtype " +
                     std::string(dtype_name(*o.dtype)) + " and found dtype " +
                     std::string(dtype_name(found.dtype())) + ".");
  }
  return found;
}

// A new Variable `name`: its collections, trainability and caching device
// from the options, its value from the initial tensor or the initializer
// (the dtype's default when none).
Variable create_single(Graph& graph, const std::string& name, const SingleRequest& req,
                       const GetVariableOptions& o) {
  VariableOptions vo;
  vo.trainable = o.trainable;
  vo.collections = o.collections;
  vo.validate_shape = o.validate_shape;
  if (o.caching_device) vo.caching_device = o.caching_device->resolve(name);
  vo.name = name;
  vo.graph = &graph;
  vo.save_slice_info = req.save_slice_info;
  NameScope root(graph, "");  // get_variable names ignore name scopes
  if (req.initializer.is_tensor()) {
    return Variable(initial_tensor(name, req.initializer.tensor(), o.dtype), vo);
  }
  const DType dtype = o.dtype.value_or(DType::kFloat);
  Initializer init = req.initializer.is_initializer() ? req.initializer.initializer()
                                                      : default_initializer(name, dtype);
  vo.dtype = dtype;
  vo.expected_shape = *req.shape;
  return Variable(varstate::bind(init, *req.shape, dtype, req.partition_info), vo);
}

// _VariableStore._get_single_variable: the variable `name` found (reuse) or
// created, in the store; a new one's regularizer joins `pending`. Caller
// holds st.mu.
Variable get_single(Graph& graph, ScopeStore& st, const std::string& name, const SingleRequest& req,
                    const GetVariableOptions& o, Reuse reuse, PendingRegularizers& pending) {
  const bool from_value = req.initializer.is_tensor();
  if (from_value && req.shape && !req.partition_info) {
    throw ValueError("If initializer is a constant, do not specify shape.");
  }
  if (auto it = st.vars.find(name); it != st.vars.end()) {
    return reuse_single(name, it->second, req, o, reuse);
  }
  if (reuse.mode() == Reuse::kReuse) {
    throw ValueError("Variable " + name +
                     " does not exist, or was not created with tf.get_variable(). Did you mean to "
                     "set reuse=None in VarScope?");
  }
  check_scope_name(name, false);
  if (!from_value && (!req.shape || !req.shape->is_fully_defined())) {
    throw ValueError("Shape of a new variable (" + name +
                     ") must be fully defined, but instead was " +
                     req.shape.value_or(TensorShape::unknown()).to_string() + ".");
  }
  const Variable created = create_single(graph, name, req, o);
  st.vars.emplace(name, created);
  if (o.regularizer) pending.emplace_back(created, o.regularizer);
  return created;
}

// What a partitioned get_variable call asks for once its initial value and
// its partitioner have been applied.
struct PartitionedRequest {
  Tensor value;  // the initial value, when the initializer is a tensor
  TensorShape shape;
  DType dtype;
  std::vector<int64_t> partitions;  // per axis, from the partitioner
};

// ValueError unless the partitions split one axis only, into at most as
// many parts as it has elements (one part for an empty axis), so that no
// part is empty.
void check_part_counts(const std::string& name, const PartitionedRequest& r) {
  int split_axes = 0;
  for (int d = 0; d < r.shape.rank(); ++d) {
    const int64_t p = r.partitions[static_cast<size_t>(d)];
    if (p > 1) ++split_axes;
    if (split_axes > 1) {
      throw ValueError("Can only slice a variable along one dimension: shape: " +
                       r.shape.to_string() + ", partitioning: " + list_string(r.partitions));
    }
    if (p > 1 && p > r.shape.dim(d)) {
      throw ValueError("Partitioner returned " + std::to_string(p) + " partitions for axis " +
                       std::to_string(d) + " of partitioned variable " + name + " of shape " +
                       r.shape.to_string() + ", more than its " + std::to_string(r.shape.dim(d)) +
                       " elements on that axis: " + list_string(r.partitions));
    }
  }
}

// The full shape, dtype and partitions of partitioned variable `name`,
// checked: a fully defined shape of rank >= 1 (an initial value's, which
// must fit the shape argument), one partition count >= 1 per axis.
PartitionedRequest partitioned_request(const std::string& name, const GetVariableOptions& o) {
  PartitionedRequest r{.shape = o.shape, .dtype = o.dtype.value_or(DType::kFloat)};
  if (o.initializer.is_tensor()) {
    r.value = initial_tensor(name, o.initializer.tensor(), o.dtype);
    if (!o.shape.is_compatible_with(r.value.shape())) {
      throw ValueError("Trying to create partitioned variable " + name + " of shape " +
                       o.shape.to_string() + " from an initializer of shape " +
                       r.value.shape().to_string() + ".");
    }
    r.shape = r.value.shape();
    r.dtype = r.value.dtype();
  }
  if (!r.shape.is_fully_defined()) {
    throw ValueError("Shape of a new partitioned variable (" + name +
                     ") must be fully defined, but instead was " + r.shape.to_string() + ".");
  }
  if (r.shape.rank() < 1) {
    throw ValueError("A partitioned Variable must have rank at least 1, shape: " +
                     r.shape.to_string());
  }
  r.partitions = o.partitioner(r.shape, r.dtype);
  if (static_cast<int>(r.partitions.size()) != r.shape.rank()) {
    throw ValueError(
        "Partitioner returned a partition list that does not match the Variable's rank: " +
        list_string(r.partitions) + " vs. " + r.shape.to_string());
  }
  for (int64_t p : r.partitions) {
    if (p < 1)
      throw ValueError("Partitioner returned zero partitions for some axes: " +
                       list_string(r.partitions));
  }
  check_part_counts(name, r);
  return r;
}

// The partitioned variable `existing` under `name`, when reuse allows it
// and its shape, dtype and partitions match the request.
const PartitionedVariable& reuse_partitioned(const std::string& name,
                                             const PartitionedVariable& existing,
                                             const PartitionedRequest& r, Reuse reuse) {
  if (!reuse) {
    throw ValueError("Partitioned variable with name " + name +
                     " already exists. Did you mean to set reuse=True in VarScope?");
  }
  if (!r.shape.is_compatible_with(existing.shape())) {
    throw ValueError("Trying to reuse partitioned variable " + name + ", but specified shape " +
                     r.shape.to_string() + " and found shape " + existing.shape().to_string() +
                     ".");
  }
  if (r.dtype != existing.dtype()) {
    throw ValueError("Trying to reuse partitioned variable " + name + ", but specified dtype " +
                     std::string(dtype_name(r.dtype)) + " and found dtype " +
                     std::string(dtype_name(existing.dtype())) + ".");
  }
  if (existing.partitions() != r.partitions) {
    throw ValueError("Trying to reuse partitioned variable " + name +
                     ", but specified partitions " + list_string(r.partitions) +
                     " and found partitions " + list_string(existing.partitions()) + ".");
  }
  return existing;
}

// The one axis with more than one partition (0 when there is none);
// check_part_counts made sure there is at most one.
int slice_axis(const PartitionedRequest& r) {
  for (int d = 0; d < r.shape.rank(); ++d) {
    if (r.partitions[static_cast<size_t>(d)] > 1) return d;
  }
  return 0;
}

// The request of the part at `offset` of shape `part_shape`: its slice of
// the initial value, or its shape and the call's initializer; and where it
// sits in the full variable, for initializers and checkpoints.
SingleRequest part_request(const std::string& name, const PartitionedRequest& r,
                           const GetVariableOptions& o, int axis,
                           const std::vector<int64_t>& offset,
                           const std::vector<int64_t>& part_shape) {
  SingleRequest req;
  req.partition_info = PartitionInfo{r.shape, offset};
  req.save_slice_info = SaveSliceInfo{
      name, std::vector<int64_t>(r.shape.dims().begin(), r.shape.dims().end()), offset, part_shape};
  if (o.initializer.is_tensor()) {
    const size_t a = static_cast<size_t>(axis);
    std::vector<SliceSpec> specs(a, Slice::all());
    specs.push_back(Slice::range(offset[a], offset[a] + part_shape[a]));
    req.initializer = strided_slice(r.value, specs);
  } else {
    req.shape = TensorShape(part_shape);
    req.initializer = o.initializer;
  }
  return req;
}

// A new partitioned variable `name`: n parts NAME/part_i along `axis`, the
// first dim % n of them one row longer, each created by get_single. Caller
// holds st.mu.
PartitionedVariable create_partitioned(Graph& graph, ScopeStore& st, const std::string& name,
                                       const PartitionedRequest& r, const GetVariableOptions& o,
                                       PendingRegularizers& pending) {
  const int axis = slice_axis(r);
  const size_t a = static_cast<size_t>(axis);
  const int64_t n = r.partitions[a];
  check_scope_name(name + "/part_0", false);
  for (int64_t i = 0; i < n; ++i) {
    const std::string part = name + "/part_" + std::to_string(i);
    if (st.vars.count(part)) {
      throw ValueError("Variable " + part +
                       " already exists, disallowed. Did you mean to set reuse=True in VarScope?");
    }
  }
  const int64_t dim = r.shape.dim(axis);
  const int64_t excess = dim % n;
  std::vector<int64_t> offset(static_cast<size_t>(r.shape.rank()), 0);
  GetVariableOptions part_options = o;
  part_options.dtype = r.dtype;
  std::vector<Variable> parts;
  // Parts on one task share one remote allocation: one exchange per owner.
  internal::RemoteCreationBatch batch;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> part_shape(r.shape.dims().begin(), r.shape.dims().end());
    part_shape[a] = dim / n + (i < excess ? 1 : 0);
    const SingleRequest req = part_request(name, r, o, axis, offset, part_shape);
    parts.push_back(get_single(graph, st, name + "/part_" + std::to_string(i), req, part_options,
                               Reuse(false), pending));
    offset[a] += part_shape[a];
  }
  batch.finish();
  PartitionedVariable pv(name, r.shape, r.dtype, std::move(parts), r.partitions);
  st.partitioned.emplace(name, pv);
  return pv;
}

// _VariableStore._get_partitioned_variable: the partitioned variable `name`
// found (reuse) or created. Caller holds st.mu.
PartitionedVariable get_partitioned(Graph& graph, ScopeStore& st, const std::string& name,
                                    const GetVariableOptions& o, Reuse reuse,
                                    PendingRegularizers& pending) {
  if (st.vars.count(name)) {
    throw ValueError(
        "A partitioner was provided, but an unpartitioned version of the variable was found: " +
        name + ".  Perhaps a variable of the same name was already created without partitioning?");
  }
  const PartitionedRequest r = partitioned_request(name, o);
  if (auto it = st.partitioned.find(name); it != st.partitioned.end()) {
    return reuse_partitioned(name, it->second, r, reuse);
  }
  if (reuse.mode() == Reuse::kReuse) {
    throw ValueError(
        "PartitionedVariable " + name +
        " does not exist, or was not created with tf.get_variable(). Did you mean to set "
        "reuse=None in VarScope?");
  }
  return create_partitioned(graph, st, name, r, o, pending);
}

// TensorFlow's special case: under reuse=True, the partitioned variable
// `existing` is returned to a call without a partitioner, when the shape and
// dtype it asks for (if any) match.
const PartitionedVariable& reuse_partitioned_unasked(const std::string& name,
                                                     const PartitionedVariable& existing,
                                                     const GetVariableOptions& o) {
  const TensorShape want = o.initializer.is_tensor() ? o.initializer.tensor().shape() : o.shape;
  if (!want.is_compatible_with(existing.shape())) {
    throw ValueError("Trying to reuse partitioned variable " + name + ", but specified shape " +
                     want.to_string() + " and found shape " + existing.shape().to_string() + ".");
  }
  if (o.dtype && *o.dtype != existing.dtype()) {
    throw ValueError("Trying to reuse partitioned variable " + name + ", but specified dtype " +
                     std::string(dtype_name(*o.dtype)) + " and found dtype " +
                     std::string(dtype_name(existing.dtype())) + ".");
  }
  return existing;
}

// _VariableStore._true_getter: a partitioned variable when a partitioner
// applies (not to a scalar shape), the existing partitioned one when
// reusing without a partitioner, else a single variable. Caller holds st.mu.
GetVariableResult get_locked(Graph& graph, ScopeStore& st, const std::string& name,
                             const GetVariableOptions& o, Reuse reuse,
                             PendingRegularizers& pending) {
  const bool scalar = !o.shape.unknown_rank() && o.shape.rank() == 0;
  if (o.partitioner && !scalar) return get_partitioned(graph, st, name, o, reuse, pending);
  if (!o.partitioner && reuse.mode() == Reuse::kReuse) {
    if (auto it = st.partitioned.find(name); it != st.partitioned.end()) {
      return reuse_partitioned_unasked(name, it->second, o);
    }
  }
  if (st.vars.count(name + "/part_0")) {
    throw ValueError(
        "No partitioner was provided, but a partitioned version of the variable was "
        "found: " +
        name +
        "/part_0. Perhaps a variable of the same name was already created with "
        "partitioning?");
  }
  std::optional<TensorShape> shape;
  if (!o.shape.unknown_rank()) shape = o.shape;
  SingleRequest req{shape, o.initializer, std::nullopt, std::nullopt};
  return get_single(graph, st, name, req, o, reuse, pending);
}

GetVariableResult true_getter(Graph& graph, const std::string& name, const GetVariableOptions& o,
                              Reuse reuse) {
  ScopeStore& st = store(graph);
  PendingRegularizers pending;
  std::optional<GetVariableResult> result;
  {
    std::lock_guard lock(st.mu);
    result.emplace(get_locked(graph, st, name, o, reuse, pending));
  }
  for (auto& [variable, regularizer] : pending) {
    if (std::optional<Loss> loss = regularizer(variable)) {
      graph.add_to_collection(GraphKeys::REGULARIZATION_LOSSES, *loss);
    }
  }
  return *result;
}

}  // namespace

// ---------------------------------------------------------------------------
// CachingDevice

std::string CachingDevice::resolve(const std::string& name) const {
  if (!fn_) return device_;
  return fn_(PlacementRequest{.name = name + "/read", .type = "Identity"});
}

// ---------------------------------------------------------------------------
// Regularizers

Regularizer make_regularizer(std::function<Tensor(const Tensor&)> fn) {
  return [fn = std::move(fn)](const Variable& v) -> std::optional<Loss> {
    return Loss([fn, v] { return fn(v.value()); });
  };
}

std::optional<Loss> no_regularizer(const Variable&) { return std::nullopt; }

std::vector<Tensor> get_regularization_losses() {
  std::vector<Tensor> out;
  for (const std::any& item :
       get_default_graph().get_collection(GraphKeys::REGULARIZATION_LOSSES)) {
    if (const auto* loss = std::any_cast<Loss>(&item)) out.push_back((*loss)());
  }
  return out;
}

// ---------------------------------------------------------------------------
// GetVariableResult

const Variable& GetVariableResult::variable() const {
  if (const auto* v = std::get_if<Variable>(&value_)) return *v;
  throw ValueError("get_variable: " + quoted(name()) +
                   " is a PartitionedVariable (a partitioner applied), not a Variable");
}

const PartitionedVariable& GetVariableResult::partitioned_variable() const {
  if (const auto* v = std::get_if<PartitionedVariable>(&value_)) return *v;
  throw ValueError("get_variable: " + quoted(name()) +
                   " is a Variable (no partitioner applied), not a PartitionedVariable");
}

std::string GetVariableResult::name() const {
  if (const auto* v = std::get_if<Variable>(&value_)) return v->name();
  return std::get<PartitionedVariable>(value_).name();
}

DType GetVariableResult::dtype() const {
  return std::visit([](const auto& v) { return v.dtype(); }, value_);
}

TensorShape GetVariableResult::shape() const {
  return std::visit([](const auto& v) { return v.shape(); }, value_);
}

Tensor GetVariableResult::value() const {
  return std::visit([](const auto& v) -> Tensor { return v.value(); }, value_);
}

// ---------------------------------------------------------------------------
// VariableScope

VariableScope::VariableScope(VariableScopeProperties properties)
    : state_(std::make_shared<VariableScopeProperties>(std::move(properties))) {}

const std::string& VariableScope::name() const { return state_->name; }
const std::string& VariableScope::original_name_scope() const { return state_->name_scope; }
Reuse VariableScope::reuse() const { return state_->reuse; }
const Initializer& VariableScope::initializer() const { return state_->initializer; }
const Regularizer& VariableScope::regularizer() const { return state_->regularizer; }
const CachingDevice& VariableScope::caching_device() const { return state_->caching_device; }
const Partitioner& VariableScope::partitioner() const { return state_->partitioner; }
const CustomGetter& VariableScope::custom_getter() const { return state_->custom_getter; }
DType VariableScope::dtype() const { return state_->dtype; }
VariableScopeProperties VariableScope::properties() const { return *state_; }

void VariableScope::reuse_variables() { state_->reuse = true; }
void VariableScope::set_initializer(Initializer initializer) {
  state_->initializer = std::move(initializer);
}
void VariableScope::set_regularizer(Regularizer regularizer) {
  state_->regularizer = std::move(regularizer);
}
void VariableScope::set_caching_device(CachingDevice device) {
  state_->caching_device = std::move(device);
}
void VariableScope::set_partitioner(Partitioner partitioner) {
  state_->partitioner = std::move(partitioner);
}
void VariableScope::set_custom_getter(CustomGetter getter) {
  state_->custom_getter = std::move(getter);
}
void VariableScope::set_dtype(DType dtype) { state_->dtype = dtype; }

GetVariableResult VariableScope::get_variable(Graph& graph, std::string_view name,
                                              const GetVariableOptions& options) const {
  const VariableScopeProperties& s = *state_;
  if (name.empty()) {
    throw ValueError("get_variable: the variable name is empty (in variable scope " +
                     quoted(s.name) + ")");
  }
  const std::string full_name = join_name(s.name, name);
  GetVariableOptions o = options;
  if (!o.initializer && s.initializer) o.initializer = s.initializer;
  if (!o.regularizer && s.regularizer) o.regularizer = s.regularizer;
  if (!o.caching_device && !s.caching_device.empty()) o.caching_device = s.caching_device;
  if (!o.partitioner && s.partitioner) o.partitioner = s.partitioner;
  if (!o.dtype && !o.initializer.is_tensor()) o.dtype = s.dtype;
  // TensorFlow calls only the call's getter when there is one.
  CustomGetter custom = o.custom_getter ? std::move(o.custom_getter) : s.custom_getter;
  o.custom_getter = nullptr;
  const Reuse reuse = s.reuse;
  Getter getter = [&graph, reuse](const std::string& n, const GetVariableOptions& opts) {
    return true_getter(graph, n, opts, reuse);
  };
  if (custom) return custom(getter, full_name, o);
  return getter(full_name, o);
}

// ---------------------------------------------------------------------------
// variable_scope

struct VariableScopeGuard::Frame {
  std::optional<NameScope> name_scope;
  bool captured = false;
  std::string name;
  std::map<std::string, int64_t> saved_counts;
};

VariableScopeGuard::VariableScopeGuard(Graph& graph, std::optional<std::string_view> name,
                                       const VariableScope* captured,
                                       const VariableScopeOptions& options, bool open_name_scope)
    : graph_(graph), frame_(std::make_unique<Frame>()) {
  if (open_name_scope && !captured) {
    const std::string_view opened = name && !name->empty() ? *name : options.default_name;
    if (!opened.empty()) check_scope_name(opened, !graph.name_scope().empty());
  }
  ScopeStore& st = store(graph);
  std::lock_guard lock(st.mu);
  const VariableScope old = st.stack.back();
  VariableScopeProperties p;
  if (captured) {
    p = captured->properties();
    if (options.reuse) p.reuse = options.reuse;
    if (open_name_scope) {
      const std::string& n = p.name;
      const std::string last = n.substr(n.rfind('/') == std::string::npos ? 0 : n.rfind('/') + 1);
      if (!last.empty()) frame_->name_scope.emplace(graph, last);
    }
    frame_->captured = true;
  } else {
    std::string base(name.value_or(""));
    if (base.empty()) {
      if (options.default_name.empty()) {
        throw TypeError("variable_scope: If default_name is None then name_or_scope is required");
      }
      if (options.reuse) throw ValueError("reuse=True cannot be used without a name_or_scope");
      // _get_unique_variable_scope: the first suffix whose scope was not opened.
      const std::string prefix = join_name(old.name(), options.default_name);
      auto opened = [&](const std::string& n) {
        auto it = st.counts.find(n);
        return it != st.counts.end() && it->second > 0;
      };
      base = options.default_name;
      if (opened(prefix)) {
        int64_t i = 1;
        while (opened(prefix + "_" + std::to_string(i))) ++i;
        base += "_" + std::to_string(i);
      }
      if (open_name_scope) frame_->name_scope.emplace(graph, options.default_name);
    } else if (open_name_scope) {
      frame_->name_scope.emplace(graph, base);
    }
    p.name = join_name(old.name(), base);
    p.name_scope = frame_->name_scope ? frame_->name_scope->name() : p.name + "/";
    p.reuse = options.reuse ? options.reuse : old.reuse();
    p.initializer = old.initializer();
    p.regularizer = old.regularizer();
    p.caching_device = old.caching_device();
    p.partitioner = old.partitioner();
    p.custom_getter = old.custom_getter();
    p.dtype = old.dtype();
  }
  if (options.initializer) p.initializer = options.initializer;
  if (options.regularizer) p.regularizer = options.regularizer;
  if (options.caching_device) p.caching_device = *options.caching_device;
  if (options.partitioner) p.partitioner = options.partitioner;
  if (options.custom_getter) p.custom_getter = chain(options.custom_getter, p.custom_getter);
  if (options.dtype) p.dtype = *options.dtype;
  frame_->name = p.name;
  ++st.counts[p.name];
  if (captured) frame_->saved_counts = st.counts;
  scope_ = VariableScope(std::move(p));
  st.stack.push_back(scope_);
}

VariableScopeGuard::~VariableScopeGuard() {
  ScopeStore& st = store(graph_);
  std::lock_guard lock(st.mu);
  st.stack.pop_back();
  if (frame_->captured) {
    st.counts = std::move(frame_->saved_counts);
  } else {
    // close_variable_subscopes: default names restart inside a re-opened scope.
    const std::string& n = frame_->name;
    if (n.empty()) {
      for (auto& [key, count] : st.counts) count = 0;
    } else {
      const std::string prefix = n + "/";
      for (auto it = st.counts.lower_bound(prefix);
           it != st.counts.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
        it->second = 0;
      }
    }
  }
}

VariableScopeGuard variable_scope(std::string_view name_or_default,
                                  const VariableScopeOptions& options) {
  return VariableScopeGuard(get_default_graph(), name_or_default, nullptr, options, true);
}

VariableScopeGuard variable_scope(const VariableScope& scope, const VariableScopeOptions& options) {
  return VariableScopeGuard(get_default_graph(), std::nullopt, &scope, options, true);
}

VariableScopeGuard variable_op_scope(const std::vector<Tensor>& /*values*/,
                                     std::string_view name_or_default,
                                     const VariableScopeOptions& options) {
  return variable_scope(name_or_default, options);
}

VariableScope get_variable_scope() {
  ScopeStore& st = store(get_default_graph());
  std::lock_guard lock(st.mu);
  return st.stack.back();
}

GetVariableResult get_variable(std::string_view name, const GetVariableOptions& options) {
  Graph& graph = get_default_graph();
  return get_variable_scope().get_variable(graph, name, options);
}

DynamicVariable get_dynamic_variable(std::string_view name, const DynamicVariableOptions& options) {
  Graph& graph = get_default_graph();
  const VariableScope scope = get_variable_scope();
  if (name.empty()) {
    throw ValueError("get_dynamic_variable: the variable name is empty (in variable scope " +
                     quoted(scope.name()) + ")");
  }
  const std::string full_name = join_name(scope.name(), name);
  const std::string what = "dynamic variable " + quoted(full_name);
  const DType dtype = options.dtype.value_or(scope.dtype());
  if (options.dim < 1) {
    throw ValueError(what + ": dim must be at least 1, got " + std::to_string(options.dim));
  }
  if (!dtype_is_floating(dtype)) {
    throw ValueError(what + ": rows must be float16, bfloat16, float32 or float64, got " +
                     std::string(dtype_name(dtype)));
  }
  if (options.admit_after < 1 || options.max_rows < 0 || options.expire_after < 0) {
    throw ValueError(what + ": admit_after must be >= 1, max_rows and expire_after >= 0; got " +
                     std::to_string(options.admit_after) + ", " + std::to_string(options.max_rows) +
                     ", " + std::to_string(options.expire_after));
  }
  if (options.initial_capacity < 0) {
    throw ValueError(what + ": initial_capacity must be >= 0, got " +
                     std::to_string(options.initial_capacity));
  }
  if (options.key_dtype != DType::kInt64 && options.key_dtype != DType::kInt32) {
    throw ValueError(what + ": keys must be int64 or int32, got " +
                     std::string(dtype_name(options.key_dtype)));
  }
  internal::check_shard_devices(what, options.devices);
  ScopeStore& st = store(graph);
  std::lock_guard lock(st.mu);
  if (auto it = st.vars.find(full_name); it != st.vars.end()) {
    if (!scope.reuse()) {
      throw ValueError("Variable " + full_name +
                       " already exists, disallowed. Did you mean to set reuse=True in VarScope?");
    }
    std::optional<DynamicVariable> found = DynamicVariable::from_variable(it->second);
    if (!found) {
      throw ValueError("Trying to share variable " + full_name +
                       " as a dynamic variable, but it is a dense variable of shape " +
                       it->second.shape().to_string() + ".");
    }
    auto mismatch = [&](const std::string& field, std::string_view asked, std::string_view held) {
      throw ValueError("Trying to share dynamic variable " + full_name + ", but specified " +
                       field + " " + std::string(asked) + " and found " + field + " " +
                       std::string(held) + ".");
    };
    if (found->dim() != options.dim) {
      mismatch("dim", std::to_string(options.dim), std::to_string(found->dim()));
    }
    if (options.dtype && *options.dtype != found->dtype()) {
      mismatch("dtype", dtype_name(*options.dtype), dtype_name(found->dtype()));
    }
    if (options.key_dtype != found->key_dtype()) {
      mismatch("key dtype", dtype_name(options.key_dtype), dtype_name(found->key_dtype()));
    }
    if (!options.devices.empty()) {
      // Asked to shard: over the devices it is sharded over, in order.
      const std::string asked = internal::shard_device_names(options.devices);
      const std::string held = internal::shard_device_names(*found);
      if (asked != held) mismatch("devices", asked, held);
    }
    return *found;
  }
  if (scope.reuse().mode() == Reuse::kReuse) {
    throw ValueError("Variable " + full_name +
                     " does not exist, or was not created with get_dynamic_variable(). Did you "
                     "mean to set reuse=None in VarScope?");
  }
  check_scope_name(full_name, false);
  Initializer init = options.initializer;
  if (!init && internal::draws_rows_from_keys(scope.initializer())) init = scope.initializer();
  if (!init) {
    init = truncated_normal_initializer(
        {.stddev = 1.0 / std::sqrt(static_cast<double>(options.dim)), .dtype = dtype});
  }
  const Variable created =
      internal::create_dynamic_variable(graph, full_name, options, dtype, init);
  st.vars.emplace(full_name, created);
  return internal::as_dynamic(created);
}

GetVariableResult get_local_variable(std::string_view name, GetVariableOptions options) {
  std::vector<std::string> collections = options.collections.value_or(std::vector<std::string>{});
  collections.push_back(GraphKeys::LOCAL_VARIABLES);
  options.collections = std::move(collections);
  options.trainable = false;
  return get_variable(name, options);
}

namespace internal {

std::map<std::string, Variable> store_variables(Graph& graph) {
  ScopeStore& st = store(graph);
  std::lock_guard lock(st.mu);
  return {st.vars.begin(), st.vars.end()};
}

std::map<std::string, PartitionedVariable> store_partitioned_variables(Graph& graph) {
  ScopeStore& st = store(graph);
  std::lock_guard lock(st.mu);
  return {st.partitioned.begin(), st.partitioned.end()};
}

}  // namespace internal

}  // namespace varstate
