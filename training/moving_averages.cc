#include "varstate/moving_averages.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>
#include <utility>

#include "runtime/keyed_storage.h"
#include "runtime/remote_storage.h"
#include "runtime/variable_access.h"
#include "training/slot_creator.h"
#include "training/training_ops_internal.h"
#include "varstate/error.h"
#include "varstate/graph.h"
#include "varstate/math_ops.h"
#include "varstate/variables.h"

namespace varstate {
namespace {

using Key = std::pair<const Graph*, std::string>;

Key key_of(const Variable& var) { return {&var.graph(), var.op_name()}; }

bool is_averaged_dtype(DType dtype) {
  return dtype == DType::kBFloat16 || dtype == DType::kHalf || dtype == DType::kFloat ||
         dtype == DType::kDouble;
}

// TensorFlow's TypeError for a variable it does not average, and an error
// for the variables varstate does not average.
void check_averaged(const Variable& var) {
  if (!is_averaged_dtype(var.dtype())) {
    throw TypeError("The variables must be half, float, or double: " + var.name() + " (it is " +
                    std::string(dtype_name(var.dtype())) + ")");
  }
  if (internal::keyed_storage(var) != nullptr) {
    throw InvalidArgumentError("moving average of " + quoted(var.op_name()) +
                               ": a dynamic (hash-keyed) variable has no moving average");
  }
}

// A hyperparameter as TensorFlow converts it: a float32 scalar.
float read_float(const Hyperparameter& h) { return static_cast<float>(h.value()); }

// A float32 scalar converted to `dtype` (TensorFlow's cast of the decay).
Tensor scalar_of(float value, DType dtype) {
  return Tensor::from_vector<float>({value}, {}).cast(dtype);
}

// 1 - decay as assign_moving_average computes it, cast to `dtype`: a
// number's in double (Python's 1.0 - decay) rounded to float32 (the
// tensor it becomes); a tensor's (a Variable's, a schedule's) in its own
// dtype.
Tensor one_minus(const Hyperparameter& decay, DType dtype) {
  if (decay.is_number()) return scalar_of(static_cast<float>(1.0 - decay.value()), dtype);
  const Tensor d = decay.tensor().to_host();
  return subtract(Tensor::from_vector<double>({1.0}, {}).cast(d.dtype()), d).cast(dtype);
}

// avg -= (avg - value) * factor: TensorFlow's update_fn, its Sub, Mul and
// AssignSub each rounded to the dtype, in one pass over memory (the
// training ops' kMovingAverage kernel). A scalar value (broadcast) runs
// the three ops.
Tensor update_average(Variable& avg, const Tensor& value, const Tensor& factor) {
  if (value.shape() == avg.shape()) {
    const double f = factor.to_host().cast(DType::kDouble).scalar<double>();
    return internal::apply_moving_average(avg, value, f, {.use_locking = false});
  }
  return avg.assign_sub(multiply(subtract(avg.value(), value), factor));
}

// The graph's global variable named `op_name`, if any.
std::optional<Variable> find_global(const Graph& graph, const std::string& op_name) {
  for (const Variable& v : graph.get_collection_variables(GraphKeys::GLOBAL_VARIABLES)) {
    if (v.op_name() == op_name) return v;
  }
  return std::nullopt;
}

// The zero-debias state of `variable`: "<variable>/<suffix>", if it exists
// already, after checking its dtype and shape.
std::optional<Variable> debias_variable(const Variable& variable, const std::string& suffix,
                                        const TensorShape& shape) {
  const std::string name = variable.op_name() + "/" + suffix;
  std::optional<Variable> found = find_global(variable.graph(), name);
  if (found && (found->dtype() != variable.dtype() || found->shape() != shape)) {
    throw ValueError("assign_moving_average of " + quoted(variable.op_name()) + ": " +
                     quoted(name) + " is " + std::string(dtype_name(found->dtype())) + " " +
                     found->shape().to_string() + ", expected " +
                     std::string(dtype_name(variable.dtype())) + " " + shape.to_string());
  }
  return found;
}

// Creates the zero-debias state variable (zeros, on `variable`'s device)
// and initializes it.
Variable make_debias_variable(const Variable& variable, const std::string& suffix,
                              const TensorShape& shape) {
  NameScope root(variable.graph(), "");
  VariableOptions options;
  options.name = variable.op_name() + "/" + suffix;
  internal::RemoteCreationBatch batch;
  Variable v =
      internal::colocated_variable(variable, variable.dtype(), shape, 0.0, std::move(options));
  batch.finish();
  v.initializer().run();
  return v;
}

}  // namespace

struct ExponentialMovingAverage::State {
  State(Hyperparameter d, ExponentialMovingAverageOptions o)
      : decay(std::move(d)), options(std::move(o)) {}
  Hyperparameter decay;
  ExponentialMovingAverageOptions options;
  mutable std::mutex mu;
  std::map<Key, Variable> averages;  // variable -> its average
  std::vector<Variable> created;     // the averages, in creation order
};

ExponentialMovingAverage::ExponentialMovingAverage(Hyperparameter decay,
                                                   ExponentialMovingAverageOptions options)
    : state_(std::make_unique<State>(std::move(decay), std::move(options))) {}

ExponentialMovingAverage::~ExponentialMovingAverage() = default;

const std::string& ExponentialMovingAverage::name() const { return state_->options.name; }

Op ExponentialMovingAverage::apply() { return apply(trainable_variables()); }

Op ExponentialMovingAverage::apply(const std::vector<Variable>& var_list) {
  std::lock_guard lock(state_->mu);
  for (const Variable& var : var_list) check_averaged(var);
  // The averages not made yet. Remote ones made together share one window
  // per owner, as an optimizer's slots do.
  {
    internal::RemoteCreationBatch batch;
    for (const Variable& var : var_list) {
      if (state_->averages.count(key_of(var)) != 0) continue;
      NameScope root(var.graph(), "");
      const std::string name = internal::slot_name(var, state_->options.name);
      VariableOptions options;
      options.name = name;
      if (const auto& info = var.save_slice_info()) {
        options.save_slice_info =
            internal::slot_slice(*info, name.substr(var.op_name().size() + 1), false);
      }
      // TensorFlow's initialized_value(): the variable's value if it is
      // initialized when the average's initializer runs, else its initial
      // value.
      Variable avg = internal::colocated_variable(
          var, [var] { return var.initialized_value(); }, var.dtype(), var.shape(),
          std::move(options));
      state_->averages.emplace(key_of(var), avg);
      state_->created.push_back(avg);
      var.graph().add_to_collection(GraphKeys::MOVING_AVERAGE_VARIABLES, var);
    }
    batch.finish();
  }
  std::vector<std::pair<Variable, Variable>> pairs;
  for (const Variable& var : var_list) pairs.emplace_back(var, state_->averages.at(key_of(var)));
  const Hyperparameter decay = state_->decay;
  const std::optional<Hyperparameter> num_updates = state_->options.num_updates;
  const std::string who = state_->options.name;
  auto action = [pairs = std::move(pairs), decay, num_updates, who]() mutable {
    // Everything is checked before the first average changes.
    for (const auto& [var, avg] : pairs) {
      if (!var.is_initialized()) internal::throw_uninitialized(var.op_name());
      if (!avg.is_initialized()) internal::throw_uninitialized(avg.op_name());
      if (var.shape() != avg.shape()) {
        throw InvalidArgumentError(who + ": variable " + quoted(var.op_name()) + " has shape " +
                                   var.shape().to_string() + " but its average " +
                                   quoted(avg.op_name()) + " has " + avg.shape().to_string());
      }
    }
    float d = read_float(decay);
    if (num_updates) {
      const float n = read_float(*num_updates);
      const float early = (1.0f + n) / (10.0f + n);
      d = std::isnan(d) || std::isnan(early) ? std::numeric_limits<float>::quiet_NaN()
                                             : std::min(d, early);
    }
    const float one_minus_decay = 1.0f - d;
    for (auto& [var, avg] : pairs) {
      update_average(avg, var.value(), scalar_of(one_minus_decay, var.dtype()));
    }
  };
  return Op(get_default_graph().unique_name(state_->options.name), "NoOp", std::move(action));
}

std::optional<Variable> ExponentialMovingAverage::average(const Variable& var) const {
  std::lock_guard lock(state_->mu);
  auto found = state_->averages.find(key_of(var));
  if (found == state_->averages.end()) return std::nullopt;
  return found->second;
}

std::string ExponentialMovingAverage::average_name(const Variable& var) const {
  std::lock_guard lock(state_->mu);
  auto found = state_->averages.find(key_of(var));
  if (found != state_->averages.end()) return found->second.op_name();
  return internal::slot_name(var, state_->options.name);
}

std::vector<Variable> ExponentialMovingAverage::averages() const {
  std::lock_guard lock(state_->mu);
  return state_->created;
}

std::map<std::string, Variable> ExponentialMovingAverage::variables_to_restore() const {
  std::vector<Variable> vars = trainable_variables();
  for (const Variable& v : moving_average_variables()) vars.push_back(v);
  return variables_to_restore(vars);
}

std::map<std::string, Variable> ExponentialMovingAverage::variables_to_restore(
    const std::vector<Variable>& moving_avg_variables) const {
  std::map<std::string, Variable> name_map;
  std::set<std::string> averaged_names;
  for (const Variable& v : moving_avg_variables) {
    name_map.insert_or_assign(average_name(v), v);
    averaged_names.insert(v.name());
  }
  for (const Variable& v : global_variables()) {
    if (averaged_names.count(v.name()) == 0 && name_map.count(v.op_name()) == 0) {
      name_map.emplace(v.op_name(), v);
    }
  }
  return name_map;
}

Tensor assign_moving_average(Variable& variable, const Tensor& value, const Hyperparameter& decay,
                             bool zero_debias) {
  check_averaged(variable);
  const std::string who = "assign_moving_average of " + quoted(variable.op_name());
  Tensor v = convert_to_dtype(value, variable.dtype(), who);
  if (v.shape() != variable.shape() && !v.shape().is_scalar()) {
    throw ValueError(who + ": shapes must match: variable shape " + variable.shape().to_string() +
                     ", value shape " + v.shape().to_string());
  }
  if (!variable.is_initialized()) internal::throw_uninitialized(variable.op_name());
  const Tensor factor = one_minus(decay, variable.dtype());
  if (!zero_debias) return update_average(variable, v, factor);

  std::optional<Variable> biased = debias_variable(variable, "biased", variable.shape());
  std::optional<Variable> local_step = debias_variable(variable, "local_step", TensorShape({}));
  if (biased && !biased->is_initialized()) internal::throw_uninitialized(biased->op_name());
  if (local_step && !local_step->is_initialized()) {
    internal::throw_uninitialized(local_step->op_name());
  }
  if (!biased) biased = make_debias_variable(variable, "biased", variable.shape());
  if (!local_step) local_step = make_debias_variable(variable, "local_step", TensorShape({}));
  // TensorFlow's update: the biased average, the count, then the variable
  // set to biased / (1 - (1 - factor) ** count), each op in the dtype.
  const Tensor one = scalar_of(1.0f, variable.dtype());
  const Tensor updated = update_average(*biased, v, factor);
  const Tensor count = local_step->assign_add(one);
  const Tensor bias_factor = subtract(one, pow(subtract(one, factor), count));
  return variable.assign(divide(updated, bias_factor));
}

}  // namespace varstate
