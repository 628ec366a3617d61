#include "varstate/variable.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <ostream>

#include "kernels/scatter_ops.h"
#include "proto/variable.pb.h"
#include "runtime/dense_update_internal.h"
#include "runtime/dirty_rows.h"
#include "runtime/local_storage.h"
#include "runtime/remote_storage.h"
#include "runtime/update_options_internal.h"
#include "runtime/variable_access.h"
#include "varstate/dense_update.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/indexed_slices.h"
#include "varstate/placement.h"
#include "varstate/scatter.h"

namespace varstate {

using internal::UpdateCaller;
using kernels::DenseUpdateOp;
using kernels::ScatterOp;

struct Variable::State {
  Graph* graph = nullptr;
  std::string op_name;
  std::string name;
  DType dtype = DType::kInvalid;
  Device* device = nullptr;
  std::string placement;
  Device* caching_device = nullptr;
  bool trainable = true;
  bool validate_shape = true;
  std::optional<SaveSliceInfo> slice_info;
  Op initializer;

  // The initial value's recipe, not its value (TensorFlow keeps the
  // initializer op, not its output): the Tensor as given (converted to the
  // dtype, on the device it came on) or the callable, run by each run of
  // the initializer. `pending` holds a value the callable gave before the
  // variable was initialized (initial_value(), or at construction to learn
  // the shape) until the initializer consumes it, as one TensorFlow step
  // shares the output of the op.
  std::mutex init_mu;
  std::optional<Tensor> initial;
  InitialValueFn initial_fn;
  std::optional<Tensor> pending;

  std::mutex update_mu;  // use_locking

  // Kept by update ops (scatter) across calls; set once, then read-only.
  mutable std::mutex update_state_mu;
  std::shared_ptr<internal::VariableUpdateState> update_state;

  // The value (runtime/variable_storage.h): remote when the placement names
  // a task of an active Cluster, else a local buffer. Set at construction.
  std::shared_ptr<internal::VariableStorage> storage;
};

namespace {

std::string strip_output(const std::string& tensor_name) {
  auto pos = tensor_name.rfind(':');
  return pos == std::string::npos ? tensor_name : tensor_name.substr(0, pos);
}

// The variable's op name, unique in `graph`: `name` as given when
// `absolute` (a VariableDef's), else under the current name scope
// ("Variable" when empty).
std::string unique_op_name(Graph& graph, const std::string& name, bool absolute) {
  if (absolute) {
    NameScope root(graph, "");
    return graph.unique_name(name);
  }
  std::string base = name.empty() ? "Variable" : name;
  if (base.back() == '/') base.pop_back();
  return graph.unique_name(base);
}

// The size for load-balancing device functions; -1 when unknown (or past
// int64: the allocation would fail later with ResourceExhaustedError).
int64_t size_for_placement(const std::optional<Tensor>& value, const VariableOptions& options,
                           DType dtype) {
  int64_t elements = -1;
  if (value) {
    elements = value->num_elements();
  } else if (options.dtype && options.expected_shape &&
             options.expected_shape->is_fully_defined()) {
    elements = options.expected_shape->num_elements();
  }
  int64_t bytes = -1;
  if (elements < 0 ||
      __builtin_mul_overflow(elements, static_cast<int64_t>(dtype_size(dtype)), &bytes)) {
    return -1;
  }
  return bytes;
}

// Throws ValueError unless `shape`, the initial value's, is what the
// options ask for.
void check_initial_shape(const std::string& op_name, const TensorShape& shape,
                         const VariableOptions& options) {
  if (options.expected_shape && options.validate_shape && shape != *options.expected_shape) {
    throw ValueError("initial value of " + quoted(op_name) + " has shape " + shape.to_string() +
                     ", expected shape " + options.expected_shape->to_string());
  }
  if (options.validate_shape && !shape.is_fully_defined()) {
    throw ValueError("initial value of " + quoted(op_name) + " must have a known shape, got " +
                     shape.to_string() + " (or set validate_shape=false)");
  }
}

// The initial value converted to options.dtype, as TensorFlow's
// convert_to_tensor(initial_value, dtype): TypeError for a literal that does
// not convert (1.5 to int32), ValueError for a tensor of another dtype
// ("Tensor conversion requested dtype ...") and for an integer literal out
// of the dtype's range.
Tensor initial_value_as(const Tensor& value, DType dtype, const std::string& op_name) {
  try {
    return convert_to_dtype(value, dtype, "initial value of " + quoted(op_name));
  } catch (const TypeError& e) {
    if (value.weakly_typed()) throw;
    throw ValueError(e.what());
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// VariableDef

std::string VariableDef::serialize() const {
  tf::VariableDef def;
  def.set_variable_name(variable_name);
  def.set_initializer_name(initializer_name);
  def.set_snapshot_name(snapshot_name);
  def.set_initial_value_name(initial_value_name);
  def.set_is_resource(is_resource);
  def.set_trainable(trainable);
  if (save_slice_info) {
    auto* s = def.mutable_save_slice_info_def();
    s->set_full_name(save_slice_info->full_name);
    for (int64_t d : save_slice_info->full_shape) s->add_full_shape(d);
    for (int64_t d : save_slice_info->var_offset) s->add_var_offset(d);
    for (int64_t d : save_slice_info->var_shape) s->add_var_shape(d);
  }
  return def.SerializeAsString();
}

VariableDef VariableDef::parse(const std::string& bytes) {
  tf::VariableDef def;
  if (!def.ParseFromString(bytes)) {
    throw InvalidArgumentError("cannot parse a VariableDef from " + std::to_string(bytes.size()) +
                               " bytes");
  }
  VariableDef out;
  out.variable_name = def.variable_name();
  out.initializer_name = def.initializer_name();
  out.snapshot_name = def.snapshot_name();
  out.initial_value_name = def.initial_value_name();
  out.is_resource = def.is_resource();
  out.trainable = def.trainable();
  if (def.has_save_slice_info_def()) {
    const auto& s = def.save_slice_info_def();
    out.save_slice_info = SaveSliceInfo{s.full_name(),
                                        {s.full_shape().begin(), s.full_shape().end()},
                                        {s.var_offset().begin(), s.var_offset().end()},
                                        {s.var_shape().begin(), s.var_shape().end()}};
  }
  return out;
}

// ---------------------------------------------------------------------------
// Construction

Variable::Variable(const Tensor& initial_value, VariableOptions options)
    : state_(std::make_shared<State>()) {
  if (options.variable_def) {
    throw ValueError("variable_def and initial_value are mutually exclusive");
  }
  if (!initial_value.valid()) throw ValueError("initial_value must be specified");
  init(initial_value, nullptr, std::move(options));
}

Variable::Variable(InitialValueFn initial_value, VariableOptions options)
    : state_(std::make_shared<State>()) {
  if (options.variable_def) {
    throw ValueError("variable_def and initial_value are mutually exclusive");
  }
  if (!initial_value) throw ValueError("initial_value must be specified");
  if (!options.dtype) {
    throw ValueError("a callable initial_value requires dtype to be specified");
  }
  init(std::nullopt, std::move(initial_value), std::move(options));
}

Variable::Variable(VariableOptions options) {
  if (!options.variable_def) throw ValueError("initial_value must be specified");
  Graph& graph = options.graph ? *options.graph : get_default_graph();
  std::string op = strip_output(options.variable_def->variable_name);
  if (auto existing = graph.find_variable(op)) {
    state_ = existing->state_;
    return;
  }
  if (!options.dtype || !options.expected_shape || !options.expected_shape->is_fully_defined()) {
    throw ValueError("recreating variable " + quoted(op) +
                     " from a VariableDef: it is not in the graph, so dtype and a fully "
                     "defined expected_shape are required");
  }
  state_ = std::make_shared<State>();
  // Keep the def's exact name (no name-scope prefix): it was unique in the
  // graph it came from.
  options.name = op;
  options.trainable = options.variable_def->trainable;
  if (options.variable_def->save_slice_info)
    options.save_slice_info = options.variable_def->save_slice_info;
  init(std::nullopt, nullptr, std::move(options), /*absolute_name=*/true);
}

void Variable::init(std::optional<Tensor> value, InitialValueFn fn, VariableOptions options,
                    bool absolute_name) {
  State& s = *state_;
  s.graph = options.graph ? options.graph : &get_default_graph();
  s.op_name = unique_op_name(*s.graph, options.name, absolute_name);
  s.name = s.op_name + ":0";
  s.trainable = options.trainable;
  s.validate_shape = options.validate_shape;
  s.slice_info = options.save_slice_info;
  // The element type decides where the variable can live (a string
  // variable goes to the CPU); a deferred value has options.dtype.
  const DType dtype = options.dtype ? *options.dtype : value ? value->dtype() : DType::kInvalid;
  const int64_t bytes = size_for_placement(value, options, dtype);
  // One call of current_device_spec: a device function's counter advances per call.
  const DeviceSpec requested = current_device_spec({s.op_name, "VariableV2", {}, bytes});
  s.device = &resolve_device(requested, dtype, s.op_name);
  s.placement = requested.merged_with(s.device->spec()).to_string();
  if (!options.caching_device.empty()) {
    s.caching_device = &resolve_device(DeviceSpec::parse(options.caching_device), dtype, s.op_name);
  }

  TensorShape shape;
  if (value) {
    Tensor v = *value;
    if (options.dtype) v = initial_value_as(v, *options.dtype, s.op_name);
    s.dtype = v.dtype();
    shape = v.shape();
    s.initial = v.strongly_typed();
  } else if (fn) {
    s.dtype = *options.dtype;
    s.initial_fn = std::move(fn);
    if (options.expected_shape && options.expected_shape->is_fully_defined()) {
      shape = *options.expected_shape;
    } else {
      // The shape must be known: evaluate now, as TensorFlow 1 does; the
      // value is the first run's, kept until it is used.
      shape = run_initial_value(/*keep=*/true).shape();
    }
  } else {
    s.dtype = *options.dtype;
    shape = *options.expected_shape;
  }
  check_initial_shape(s.op_name, shape, options);

  if (value || s.initial_fn) make_initializer_op();

  if (const internal::StorageFactory* factory = internal::ScopedStorageFactory::current()) {
    s.storage = (*factory)(s.op_name, s.dtype, *s.device, s.placement);
  } else {
    s.storage = internal::make_remote_storage(s.op_name, s.placement, s.dtype, shape);
  }
  if (!s.storage) {
    s.storage =
        std::make_shared<internal::LocalStorage>(s.dtype, shape, *s.device, s.validate_shape);
  }

  std::vector<std::string> keys =
      options.collections.value_or(std::vector<std::string>{GraphKeys::GLOBAL_VARIABLES});
  if (s.trainable) keys.push_back(GraphKeys::TRAINABLE_VARIABLES);
  s.graph->register_variable(*this);
  s.graph->add_to_collections(keys, *this);
}

// ---------------------------------------------------------------------------
// Properties

const std::string& Variable::name() const { return state_->name; }
const std::string& Variable::op_name() const { return state_->op_name; }
DType Variable::dtype() const { return state_->dtype; }
TensorShape Variable::shape() const { return state_->storage->shape(); }
Device& Variable::device() const { return *state_->device; }
const std::string& Variable::placement() const { return state_->placement; }
Graph& Variable::graph() const { return *state_->graph; }
bool Variable::trainable() const { return state_->trainable; }
const Op& Variable::initializer() const { return state_->initializer; }
const std::optional<SaveSliceInfo>& Variable::save_slice_info() const { return state_->slice_info; }
bool Variable::is_initialized() const { return state_->storage->is_initialized(); }
uint64_t Variable::version() const { return state_->storage->version(); }
uint64_t Variable::cache_copies() const { return state_->storage->cache_copies(); }

void Variable::raise_pending_errors(bool wait) const {
  std::shared_ptr<internal::VariableUpdateState> updates;
  {
    std::lock_guard lock(state_->update_state_mu);
    updates = state_->update_state;
  }
  if (updates) updates->raise_pending_errors(wait);
}

void Variable::sync() const { raise_pending_errors(/*wait=*/true); }

// ---------------------------------------------------------------------------
// Internals (variable_access.h)

namespace internal {

struct VariableAccess {
  static Variable::State& state(const Variable& v) { return *v.state_; }
  static const std::shared_ptr<Variable::State>& handle(const Variable& v) { return v.state_; }
  static void make_initializer_op(Variable& v) { v.make_initializer_op(); }
  static void raise_pending_errors(const Variable& v, bool wait) { v.raise_pending_errors(wait); }
  static Variable from_handle(const std::shared_ptr<void>& state) {
    return Variable(std::static_pointer_cast<Variable::State>(state));
  }
};

namespace {
thread_local const StorageFactory* t_storage_factory = nullptr;
}  // namespace

ScopedStorageFactory::ScopedStorageFactory(StorageFactory factory)
    : factory_(std::move(factory)), outer_(t_storage_factory) {
  t_storage_factory = &factory_;
}

ScopedStorageFactory::~ScopedStorageFactory() { t_storage_factory = outer_; }

const StorageFactory* ScopedStorageFactory::current() { return t_storage_factory; }

void throw_uninitialized(const std::string& op_name) {
  throw FailedPreconditionError("Attempting to use uninitialized value " + op_name);
}

void raise_finished_errors(const Variable& variable) {
  VariableAccess::raise_pending_errors(variable, /*wait=*/false);
}

void check_initialized(const std::vector<Variable>& parts) {
  for (const Variable& part : parts) {
    if (!part.is_initialized()) throw_uninitialized(part.op_name());
  }
}

std::mutex& update_mutex(const Variable& variable) {
  return VariableAccess::state(variable).update_mu;
}

VariableStorage& storage(const Variable& v) { return *VariableAccess::state(v).storage; }

const void* identity(const Variable& variable) { return &VariableAccess::state(variable); }

void set_value(Variable& variable, const Tensor& value) {
  storage(variable).replace_value(variable, value);
}

void mark_updated(Variable& variable) { storage(variable).note_write(/*all_rows=*/true); }

void mark_rows_updated(Variable& variable) { storage(variable).note_write(/*all_rows=*/false); }

DirtyRows& dirty_rows(const Variable& variable) { return storage(variable).dirty_rows(); }

std::shared_ptr<VariableUpdateState> update_state(
    const Variable& variable, const std::function<std::shared_ptr<VariableUpdateState>()>& make) {
  auto& s = VariableAccess::state(variable);
  std::lock_guard lock(s.update_state_mu);
  if (!s.update_state) s.update_state = make();
  return s.update_state;
}

std::optional<Tensor> initial_tensor(const Variable& variable) {
  auto& s = VariableAccess::state(variable);
  std::lock_guard lock(s.init_mu);
  return s.initial;
}

InitialValueFn initial_value_fn(const Variable& variable) {
  auto& s = VariableAccess::state(variable);
  std::lock_guard lock(s.init_mu);
  return s.initial_fn;
}

void set_initial_value_fn(Variable& variable, InitialValueFn fn) {
  auto& s = VariableAccess::state(variable);
  {
    std::lock_guard lock(s.init_mu);
    if (s.initial || s.initial_fn) {
      throw FailedPreconditionError("variable " + quoted(s.op_name) +
                                    " already has an initial value");
    }
    s.initial_fn = std::move(fn);
  }
  VariableAccess::make_initializer_op(variable);
}

void replace_initial_value_fn(Variable& variable, InitialValueFn fn) {
  auto& s = VariableAccess::state(variable);
  {
    std::lock_guard lock(s.init_mu);
    s.initial.reset();
    s.pending.reset();
    s.initial_fn = std::move(fn);
  }
}

int64_t retained_initial_value_bytes(const Variable& variable) {
  auto& s = VariableAccess::state(variable);
  std::lock_guard lock(s.init_mu);
  return s.pending ? static_cast<int64_t>(s.pending->nbytes()) : 0;
}

std::shared_ptr<void> state_handle(const Variable& variable) {
  return VariableAccess::handle(variable);
}

Variable from_state_handle(const std::shared_ptr<void>& state) {
  return VariableAccess::from_handle(state);
}

}  // namespace internal

// ---------------------------------------------------------------------------
// Reads

Tensor Variable::live_value() const { return state_->storage->read_live(*this); }

Tensor Variable::ref() const {
  raise_pending_errors(/*wait=*/false);
  return live_value();
}

Tensor Variable::value() const {
  raise_pending_errors(/*wait=*/false);
  return state_->storage->read_cached(*this, state_->caching_device);
}

Tensor Variable::read_value() const {
  raise_pending_errors(/*wait=*/false);
  return state_->storage->read_copy(*this);
}

Tensor Variable::eval(const Session& session) const {
  raise_pending_errors(/*wait=*/true);
  return live_value().to_host().clone();
}

Tensor Variable::eval() const {
  const Session* s = Session::default_session();
  if (s == nullptr) {
    throw ValueError("Cannot evaluate " + quoted(state_->name) +
                     ": no session given and no default session is set (Session::as_default())");
  }
  return eval(*s);
}

Tensor Variable::initial_value() const { return run_initial_value(/*keep=*/!is_initialized()); }

Tensor Variable::run_initial_value(bool keep) const {
  State& s = *state_;
  std::lock_guard lock(s.init_mu);
  if (s.initial) return &s.initial->device() == s.device ? *s.initial : s.initial->to(*s.device);
  if (!s.initial_fn) {
    throw FailedPreconditionError("variable " + quoted(s.op_name) +
                                  " has no initial value (it was recreated from a VariableDef)");
  }
  if (s.pending) {
    Tensor v = *s.pending;
    if (!keep) s.pending.reset();
    return v;
  }
  Tensor v;
  {
    DeviceScope scope(s.device->name());
    v = s.initial_fn();
  }
  if (!v.valid())
    throw ValueError("the initial value callable of " + quoted(s.op_name) + " returned no tensor");
  v = convert_to_dtype(v, s.dtype, "initial value of " + quoted(s.op_name));
  // (While the constructor runs the callable to learn the shape, there is
  // no storage and nothing to compare with.)
  const TensorShape shape = s.storage ? s.storage->shape() : TensorShape::unknown();
  if (s.validate_shape && shape.is_fully_defined() && v.shape() != shape) {
    throw ValueError("the initial value callable of " + quoted(s.op_name) + " returned shape " +
                     v.shape().to_string() + ", expected " + shape.to_string());
  }
  v = v.on(*s.device);
  v = v.strongly_typed();
  if (keep) s.pending = v;
  return v;
}

// The initializer Op: one run of the initial value, assigned as the new
// buffer. A freshly computed value becomes the buffer itself (no copy); a
// value someone else holds (the Tensor given, or one a callable returns
// again) is copied first.
void Variable::make_initializer_op() {
  std::weak_ptr<State> weak = state_;
  state_->initializer = Op(state_->op_name + "/Assign", "Assign", [weak] {
    auto st = weak.lock();
    if (!st) return;
    Variable v(st);
    Tensor value = v.run_initial_value(/*keep=*/false);
    if (!value.sole_owner()) value = value.clone();
    internal::set_value(v, value);
  });
}

Tensor Variable::initialized_value() const {
  if (std::optional<Tensor> value = state_->storage->read_if_initialized(*this)) return *value;
  return initial_value();
}

// ---------------------------------------------------------------------------
// Updates

Tensor Variable::assign(const Tensor& value, const UpdateOptions& options) {
  State& s = *state_;
  std::unique_lock<std::mutex> update;
  if (internal::use_locking(options, DenseUpdateOp::kAssign, UpdateCaller::kMethod)) {
    update = std::unique_lock(s.update_mu);
  }
  return s.storage->assign_value(*this, value, options.validate_shape);
}

Tensor Variable::assign_add(const Tensor& delta, const UpdateOptions& options) {
  std::unique_lock<std::mutex> update;
  if (internal::use_locking(options, DenseUpdateOp::kAdd, UpdateCaller::kMethod)) {
    update = std::unique_lock(state_->update_mu);
  }
  return state_->storage->add_value(*this, delta, /*negate=*/false);
}

Tensor Variable::assign_sub(const Tensor& delta, const UpdateOptions& options) {
  std::unique_lock<std::mutex> update;
  if (internal::use_locking(options, DenseUpdateOp::kSub, UpdateCaller::kMethod)) {
    update = std::unique_lock(state_->update_mu);
  }
  return state_->storage->add_value(*this, delta, /*negate=*/true);
}

namespace {
// The options of a scatter method, for the scatter function it calls.
UpdateOptions method_options(const UpdateOptions& options, ScatterOp op) {
  UpdateOptions o = options;
  o.use_locking = internal::use_locking(options, op, UpdateCaller::kMethod);
  return o;
}
}  // namespace

#define VARSTATE_SCATTER_METHOD(KIND, FN, NODE, ARITHMETIC, ORDERED)                     \
  Tensor Variable::FN(const IndexedSlices& sparse_delta, const UpdateOptions& options) { \
    return varstate::FN(*this, sparse_delta, method_options(options, ScatterOp::KIND));  \
  }
VARSTATE_SCATTER_OPS(VARSTATE_SCATTER_METHOD)
#undef VARSTATE_SCATTER_METHOD

Tensor Variable::count_up_to(int64_t limit) {
  State& s = *state_;
  if (s.dtype != DType::kInt32 && s.dtype != DType::kInt64) {
    throw TypeError("CountUpTo on " + quoted(s.op_name) + ": dtype must be int32 or int64, got " +
                    std::string(dtype_name(s.dtype)));
  }
  std::lock_guard update(s.update_mu);
  return s.storage->count_up(*this, limit);
}

// ---------------------------------------------------------------------------
// Slices

VariableSlice Variable::slice(std::vector<SliceSpec> specs) const {
  return VariableSlice(*this, std::move(specs));
}

Tensor VariableSlice::value() const { return strided_slice(variable_.value(), specs_); }

TensorShape VariableSlice::shape() const { return slice_shape(variable_.shape(), specs_); }

Tensor VariableSlice::assign(const Tensor& value, const UpdateOptions& options) {
  std::unique_lock<std::mutex> update;
  if (internal::use_locking(options, DenseUpdateOp::kAssign, UpdateCaller::kMethod)) {
    update = std::unique_lock(internal::update_mutex(variable_));
  }
  return internal::storage(variable_).assign_slice(variable_, specs_, value);
}

// ---------------------------------------------------------------------------
// Serialization

VariableDef Variable::to_proto() const {
  VariableDef def;
  def.variable_name = state_->name;
  def.initializer_name = state_->op_name + "/Assign";
  def.snapshot_name = state_->op_name + "/read:0";
  def.initial_value_name = state_->op_name + "/initial_value:0";
  def.trainable = state_->trainable;
  def.save_slice_info = state_->slice_info;
  return def;
}

Variable Variable::from_proto(const VariableDef& def, Graph* graph) {
  Graph& g = graph ? *graph : get_default_graph();
  std::string op = strip_output(def.variable_name);
  if (auto v = g.find_variable(op)) return *v;
  throw NotFoundError("from_proto: the graph has no variable " + quoted(op));
}

// ---------------------------------------------------------------------------
// Free functions

Tensor assign(Variable& ref, const Tensor& value, const UpdateOptions& options) {
  UpdateOptions o = options;
  o.use_locking = internal::use_locking(options, DenseUpdateOp::kAssign, UpdateCaller::kFunction);
  return ref.assign(value, o);
}
Tensor assign_add(Variable& ref, const Tensor& value, const UpdateOptions& options) {
  return ref.assign_add(value, options);
}
Tensor assign_sub(Variable& ref, const Tensor& value, const UpdateOptions& options) {
  return ref.assign_sub(value, options);
}
Tensor count_up_to(Variable& ref, int64_t limit) { return ref.count_up_to(limit); }

std::ostream& operator<<(std::ostream& os, const Variable& v) {
  os << "<Variable '" << v.name() << "' shape=" << v.shape() << " dtype=" << dtype_name(v.dtype())
     << " device=" << v.device().name() << ">";
  return os;
}

}  // namespace varstate
