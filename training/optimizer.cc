#include "varstate/optimizer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <utility>

#include "runtime/keyed_storage.h"
#include "runtime/remote_storage.h"
#include "runtime/variable_access.h"
#include "training/slot_creator.h"
#include "training/training_ops_internal.h"
#include "varstate/error.h"
#include "varstate/graph.h"
#include "varstate/initializers.h"
#include "varstate/placement.h"
#include "varstate/session.h"

namespace varstate {
namespace {

// Slots and non-slot variables are keyed by graph and name, as TensorFlow
// keys them.
using Key = std::pair<const Graph*, std::string>;

Key key_of(const Variable& var) { return {&var.graph(), var.op_name()}; }

// TensorFlow's Optimizer._assert_valid_dtypes: ValueError naming the
// variable and the dtypes an optimizer trains.
void check_trainable_dtype(const std::string& optimizer, const Variable& var) {
  if (!internal::is_training_dtype(var.dtype())) {
    throw ValueError(optimizer + ": invalid type " + std::string(dtype_name(var.dtype())) +
                     " for variable " + quoted(var.op_name()) +
                     ", expected: [float16, bfloat16, float32, float64]");
  }
}

// TensorFlow builds the update ops in the default graph, and raises for a
// variable of another graph ("must be from the same graph").
void check_default_graph(const std::string& optimizer, const Variable& var, const char* what) {
  if (&var.graph() != &get_default_graph()) {
    throw ValueError(optimizer + ": " + what + " " + quoted(var.op_name()) +
                     " must be from the same graph as the update (the default graph); it is "
                     "in another graph");
  }
}

bool has_gradient(const Gradient& grad) {
  const Tensor* dense = std::get_if<Tensor>(&grad);
  return dense == nullptr || dense->valid();
}

}  // namespace

Tensor Hyperparameter::tensor() const {
  if (is_number()) return Tensor::from_vector<float>({static_cast<float>(value_)}, {});
  const Tensor t = variable_ ? variable_->value() : schedule_();
  const std::string name = variable_ ? variable_->op_name() : name_;
  if (!t.valid() || t.rank() != 0 || !dtype_is_numeric(t.dtype()) || dtype_is_complex(t.dtype())) {
    throw InvalidArgumentError(
        "hyperparameter " + quoted(name) + " is not a real scalar: " +
        (t.valid() ? std::string(dtype_name(t.dtype())) + " " + t.shape().to_string()
                   : std::string("an empty tensor")));
  }
  return t;
}

double Hyperparameter::value() const {
  if (is_number()) return value_;
  return tensor().to_host().cast(DType::kDouble).scalar<double>();
}

struct Optimizer::State {
  std::string name;
  bool use_locking = false;
  std::mutex mu;
  // slot name -> variable -> (variable, slot)
  std::map<std::string, std::map<Key, std::pair<Variable, Variable>>> slots;
  std::map<Key, Variable> non_slot;
  std::vector<Variable> created;  // by the create_slots_locked under way
};

Optimizer::Optimizer(std::string name, bool use_locking) : state_(std::make_unique<State>()) {
  state_->name = std::move(name);
  state_->use_locking = use_locking;
}

Optimizer::~Optimizer() = default;

const std::string& Optimizer::get_name() const { return state_->name; }
bool Optimizer::use_locking() const { return state_->use_locking; }

double Optimizer::read(const Hyperparameter& h, std::string_view what) const {
  const double v = h.is_number() ? static_cast<float>(h.value()) : h.value();
  if (!std::isfinite(v)) {
    throw InvalidArgumentError(state_->name + ": " + std::string(what) +
                               " is not finite: " + std::to_string(v));
  }
  return v;
}

void Optimizer::apply_gradients(const std::vector<GradientAndVariable>& grads_and_vars,
                                Variable* global_step) {
  std::lock_guard lock(state_->mu);
  if (grads_and_vars.empty()) throw ValueError(state_->name + ": No variables provided.");
  std::vector<const GradientAndVariable*> todo;
  std::string names;
  for (const GradientAndVariable& gv : grads_and_vars) {
    names += (names.empty() ? "" : ", ") + quoted(gv.var.op_name());
    for (const GradientAndVariable* seen : todo) {
      if (seen->var.same_as(gv.var)) {
        throw ValueError(state_->name + ": variable " + quoted(gv.var.op_name()) +
                         " is given twice");
      }
    }
    if (has_gradient(gv.grad)) todo.push_back(&gv);
  }
  if (todo.empty()) {
    throw ValueError(state_->name + ": No gradients provided for any variable: [" + names + "]");
  }
  for (const GradientAndVariable* gv : todo) {
    const std::string who = state_->name + " on " + quoted(gv->var.op_name());
    check_default_graph(state_->name, gv->var, "variable");
    check_trainable_dtype(state_->name, gv->var);
    check_variable(gv->var);
    if (!gv->var.is_initialized()) internal::throw_uninitialized(gv->var.op_name());
    if (const Tensor* dense = std::get_if<Tensor>(&gv->grad)) {
      internal::checked_dense_gradient(*dense, gv->var, who);
    } else {
      internal::check_sparse_gradient(std::get<IndexedSlices>(gv->grad), gv->var, who);
    }
  }
  if (global_step != nullptr) {
    check_default_graph(state_->name, *global_step, "global_step");
    if (!global_step->is_initialized()) internal::throw_uninitialized(global_step->op_name());
    const DType dtype = global_step->dtype();
    if ((dtype != DType::kInt32 && dtype != DType::kInt64) || global_step->shape().rank() != 0) {
      throw TypeError(state_->name + ": global_step " + quoted(global_step->op_name()) +
                      " must be an int32 or int64 scalar, got " + std::string(dtype_name(dtype)) +
                      " " + global_step->shape().to_string());
    }
  }
  std::vector<Variable> vars;
  for (const GradientAndVariable* gv : todo) vars.push_back(gv->var);
  // The hyperparameters are read (and checked) before anything is created.
  prepare();
  create_slots_locked(vars);
  read_state();
  {
    // The applies to remote variables run together at the end: one
    // locked exchange per window and owner, not per variable and slot.
    internal::RemoteApplyBatch remote;
    for (const GradientAndVariable* gv : todo) {
      Variable var = gv->var;
      if (const Tensor* dense = std::get_if<Tensor>(&gv->grad)) {
        apply_dense(*dense, var);
      } else {
        apply_sparse(std::get<IndexedSlices>(gv->grad), var);
      }
    }
    remote.flush();
  }
  finish();
  if (global_step != nullptr) global_step->assign_add(Tensor(1), {.use_locking = true});
}

void Optimizer::create_slots(const std::vector<Variable>& var_list) {
  std::lock_guard lock(state_->mu);
  for (const Variable& var : var_list) {
    check_trainable_dtype(state_->name, var);
    check_variable(var);
  }
  create_slots_locked(var_list);
}

void Optimizer::create_slots_locked(const std::vector<Variable>& var_list) {
  if (var_list.empty()) return;
  auto first = std::min_element(
      var_list.begin(), var_list.end(),
      [](const Variable& a, const Variable& b) { return a.op_name() < b.op_name(); });
  // Remote slots made together share one window per owner (one exchange
  // for all of them in an apply); their initial values are written once
  // the batch has placed them.
  state_->created.clear();
  internal::RemoteCreationBatch batch;
  make_non_slot_variables(*first);
  for (const Variable& var : var_list) make_slots(var);
  batch.finish();
  std::vector<Variable> created = std::move(state_->created);
  state_->created.clear();
  for (Variable& v : created) v.initializer().run();
}

Variable& Optimizer::make_slot(const Variable& var, const std::string& slot_name, double value,
                               std::optional<TensorShape> shape) {
  auto& per_var = state_->slots[slot_name];
  auto found = per_var.find(key_of(var));
  if (found != per_var.end()) return found->second.second;
  NameScope root(var.graph(), "");
  const std::string name = internal::slot_name(var, state_->name);
  VariableOptions options;
  options.name = name;
  if (const auto& info = var.save_slice_info()) {
    options.save_slice_info =
        internal::slot_slice(*info, name.substr(var.op_name().size() + 1), shape.has_value());
  }
  std::optional<internal::ScopedStorageFactory> dynamic;
  TensorShape slot_shape = shape.value_or(var.shape());
  if (internal::KeyedStorage* keyed = internal::keyed_storage(var)) {
    // A dynamic variable's slot is a member of its table: rows of the same
    // keys, created and erased with them, starting at `value`.
    const TensorShape row = slot_shape.tail(1);
    slot_shape = TensorShape({0}).concatenate(row);
    options.validate_shape = false;  // the row count follows the keys
    std::shared_ptr<internal::KeyedTable> table = keyed->shared_table();
    dynamic.emplace(
        [table, row, value](const std::string& op_name, DType dtype, Device&, const std::string&) {
          internal::KeyedRowInit init;
          init.a = Tensor(value).cast(dtype);
          const int member = table->add_member(op_name, dtype, row, init);
          return std::make_shared<internal::KeyedStorage>(table, member, Tensor());
        });
  }
  Variable slot =
      internal::colocated_variable(var, var.dtype(), slot_shape, value, std::move(options));
  state_->created.push_back(slot);
  return per_var.emplace(key_of(var), std::pair{var, slot}).first->second.second;
}

Variable& Optimizer::slot(const Variable& var, const std::string& slot_name) {
  return state_->slots.at(slot_name).at(key_of(var)).second;
}

Variable& Optimizer::make_non_slot_variable(const std::string& name, double value, DType dtype,
                                            const Variable& colocate_with) {
  const Key key{&colocate_with.graph(), name};
  auto found = state_->non_slot.find(key);
  if (found != state_->non_slot.end()) return found->second;
  VariableOptions options;
  options.name = name;
  Variable v = internal::colocated_variable(colocate_with, dtype, {}, value, std::move(options));
  state_->created.push_back(v);
  return state_->non_slot.emplace(key, v).first->second;
}

Variable& Optimizer::non_slot_variable(const std::string& name) {
  for (auto& [key, var] : state_->non_slot) {
    if (key.second == name && key.first == &get_default_graph()) return var;
  }
  for (auto& [key, var] : state_->non_slot) {
    if (key.second == name) return var;
  }
  throw InternalError(state_->name + ": no non-slot variable " + quoted(name));
}

std::optional<Variable> Optimizer::get_slot(const Variable& var, std::string_view name) const {
  auto per_var = state_->slots.find(std::string(name));
  if (per_var == state_->slots.end()) return std::nullopt;
  auto found = per_var->second.find(key_of(var));
  if (found == per_var->second.end()) return std::nullopt;
  return found->second.second;
}

std::vector<std::string> Optimizer::get_slot_names() const {
  std::vector<std::string> names;
  for (const auto& [name, per_var] : state_->slots) names.push_back(name);
  return names;
}

std::vector<Variable> Optimizer::variables() const {
  const Graph* graph = &get_default_graph();
  std::vector<Variable> out;
  for (const auto& [key, var] : state_->non_slot) {
    if (key.first == graph) out.push_back(var);
  }
  for (const auto& [name, per_var] : state_->slots) {
    for (const auto& [key, pair] : per_var) {
      if (key.first == graph) out.push_back(pair.second);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Variable& a, const Variable& b) { return a.name() < b.name(); });
  return out;
}

}  // namespace varstate
