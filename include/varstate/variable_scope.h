// Sharing variables: variable scopes and get_variable (tf.variable_scope,
// tf.VariableScope, tf.get_variable_scope, tf.get_variable,
// tf.get_local_variable, tf.no_regularizer).
//
// get_variable creates a variable named by the current variable scope, or
// returns the one already created under that name when the scope reuses:
//
//   {
//     auto foo = variable_scope("foo");
//     Variable v = get_variable("v", {.shape = {1}});        // "foo/v:0"
//     foo->reuse_variables();
//     Variable v1 = get_variable("v", {.shape = {1}});       // v1.same_as(v)
//   }
//   {
//     auto foo = variable_scope("foo", {.reuse = true});
//     Variable v2 = get_variable("v");                       // the same again
//   }
//
// Rules (TensorFlow's):
// - The name is the variable scope's name + "/" + name; name scopes do not
//   change it. The full name must match ^[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*$
//   (TensorFlow's op names), else ValueError("'foo/a b' is not a valid root
//   scope name. A root scope name has to match the following pattern: ...");
//   an empty name is a ValueError too (TensorFlow names that variable ":0").
// - Reuse (VariableScopeOptions::reuse): a scope creates (false), reuses
//   (true) or creates what is missing and returns what exists (AUTO_REUSE).
//   Creating a name that exists outside a reusing scope raises
//   ValueError("Variable foo/v already exists, disallowed. Did you mean to
//   set reuse=True in VarScope?"); reusing a name that get_variable did not
//   create raises ValueError("Variable foo/v does not exist, or was not
//   created with tf.get_variable(). Did you mean to set reuse=None in
//   VarScope?"); reusing with another shape or dtype raises ValueError
//   ("Trying to share variable foo/v, but specified shape [2] and found
//   shape [1].").
// - Defaults come from the scope: initializer (else glorot_uniform for
//   floating dtypes, zeros for integers, bool and string (empty strings),
//   ValueError otherwise),
//   regularizer, caching device, partitioner, custom getter, dtype
//   (float32 at the root).
// - A partitioner makes get_variable return a PartitionedVariable
//   (varstate/partitioned_variable.h) of parts "NAME/part_K", except for a
//   scalar shape ({}): that is a plain Variable. The partitioner's counts are
//   checked before anything is created: one per axis, each >= 1 and at most
//   the dimension it splits, more than 1 on one axis only (ValueError).
// - Under reuse=true, get_variable("v") without a partitioner returns the
//   existing PartitionedVariable "v" (shape and dtype, when given, must
//   match). Otherwise asking for "v" without a partitioner while "v/part_0"
//   exists raises ValueError("No partitioner was provided, but a partitioned
//   version of the variable was found: v/part_0. Perhaps a variable of the
//   same name was already created with partitioning?"), and with one while
//   an unpartitioned "v" exists the converse.
// - A regularizer is called with each new variable; the Loss it returns is
//   added to GraphKeys::REGULARIZATION_LOSSES (no_regularizer opts out).
// - Custom getters wrap the true getter: the innermost scope's runs first,
//   then the enclosing scope's, ..., the outermost scope's, each receiving
//   the next one as `getter`. A custom_getter passed to get_variable itself
//   replaces the scopes' getters for that call (only it runs).
// - A caching device (string or device function) applies to each new
//   variable; a function is called with the variable's read op
//   (PlacementRequest{"NAME/read", "Identity"}) and returns the device.
// - Lookups of existing variables are O(1) (a hash map in the graph).
//
// Scopes are RAII guards over the default graph's variable-scope stack and
// open a name scope alongside (so ops and plain Variables inside are named
// "foo/..."; re-entering "foo" gives name scope "foo_1" while
// get_variable's names stay "foo/..."). A VariableScope object is a handle:
// reuse_variables() and the setters change the scope for everything
// created in it afterwards. Guards must be destroyed in reverse order of
// creation, on the thread that created them. get_variable itself is
// thread-safe; a VariableScope's setters must not race with get_variable
// calls that use that scope.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "varstate/graph.h"
#include "varstate/initializers.h"
#include "varstate/partitioned_variable.h"
#include "varstate/partitioners.h"
#include "varstate/placement.h"
#include "varstate/tensor.h"
#include "varstate/variable.h"

namespace varstate {

// A loss term computed on demand (it reads the variable's current value).
using Loss = std::function<Tensor()>;
// Called once with each variable get_variable creates; returns its loss,
// or nullopt for none (tf's "Tensor -> Tensor or None" regularizer).
using Regularizer = std::function<std::optional<Loss>(const Variable&)>;
// A regularizer computing fn(variable's current value) whenever the loss
// is evaluated, e.g. make_regularizer([](const Tensor& w) { return w * w; }).
Regularizer make_regularizer(std::function<Tensor(const Tensor&)> fn);
// tf.no_regularizer: no loss; opts a variable out of its scope's regularizer.
std::optional<Loss> no_regularizer(const Variable& variable);
// Evaluates every Loss of the default graph's REGULARIZATION_LOSSES.
std::vector<Tensor> get_regularization_losses();

// get_variable's initializer: an Initializer, or a Tensor whose value (and
// shape) the variable takes.
class VariableInitializer {
 public:
  VariableInitializer() = default;
  VariableInitializer(Initializer init) : init_(std::move(init)) {}  // NOLINT: implicit
  VariableInitializer(Tensor value) : value_(std::move(value)) {}    // NOLINT: implicit
  bool is_tensor() const { return value_.valid(); }
  bool is_initializer() const { return static_cast<bool>(init_); }
  explicit operator bool() const { return is_tensor() || is_initializer(); }
  const Initializer& initializer() const { return init_; }
  const Tensor& tensor() const { return value_; }

 private:
  Initializer init_;
  Tensor value_;
};

// How a variable scope treats existing variables (tf.variable_scope's
// `reuse`): false (the default) inherits the enclosing scope's mode, or
// creates at the top level, as TensorFlow treats False and None; true
// reuses; AUTO_REUSE creates variables that do not exist and returns those
// that do. In a VariableScope the mode is resolved: false means "create".
class Reuse {
 public:
  enum Mode {
    kInherit,
    kReuse,
    kAutoReuse
  };
  constexpr Reuse(Mode mode = kInherit) : mode_(mode) {}             // NOLINT: implicit
  constexpr Reuse(bool reuse) : mode_(reuse ? kReuse : kInherit) {}  // NOLINT: implicit
  constexpr Mode mode() const { return mode_; }
  // True for kReuse and kAutoReuse (TensorFlow's truthiness of `reuse`).
  constexpr explicit operator bool() const { return mode_ != kInherit; }
  friend constexpr bool operator==(Reuse a, Reuse b) { return a.mode_ == b.mode_; }

 private:
  Mode mode_;
};
// tf.compat.v1.AUTO_REUSE.
inline constexpr Reuse AUTO_REUSE{Reuse::kAutoReuse};

// A caching device (tf's caching_device): none, a device string, or a
// device function called with the variable's read op, returning the device.
class CachingDevice {
 public:
  CachingDevice() = default;
  CachingDevice(std::string device) : device_(std::move(device)) {}  // NOLINT: implicit
  CachingDevice(const char* device) : device_(device) {}             // NOLINT: implicit
  CachingDevice(DeviceFunction fn) : fn_(std::move(fn)) {}           // NOLINT: implicit
  bool empty() const { return device_.empty() && !fn_; }
  bool is_function() const { return static_cast<bool>(fn_); }
  // The device string; "" for a function or none.
  const std::string& device() const { return device_; }
  const DeviceFunction& function() const { return fn_; }
  // The device for the variable `name`: the string, or the function's
  // answer for PlacementRequest{name + "/read", "Identity"}.
  std::string resolve(const std::string& name) const;
  friend bool operator==(const CachingDevice& a, std::string_view device) {
    return !a.fn_ && a.device_ == device;
  }

 private:
  std::string device_;
  DeviceFunction fn_;
};

class GetVariableResult;
struct GetVariableOptions;
// The getter that custom getters wrap: (full name, options) -> variable.
using Getter =
    std::function<GetVariableResult(const std::string& name, const GetVariableOptions& options)>;
// tf's custom_getter(getter, name, *args, **kwargs).
using CustomGetter = std::function<GetVariableResult(const Getter& getter, const std::string& name,
                                                     const GetVariableOptions& options)>;

// The arguments of tf.get_variable after `name`. Unset fields take the
// current variable scope's defaults.
struct GetVariableOptions {
  // Required to create a variable, unless the initializer is a Tensor
  // (then it must be left unknown: ValueError). {784, 256}; {} is a scalar.
  TensorShape shape = TensorShape::unknown();
  std::optional<DType> dtype = std::nullopt;  // scope's dtype (float32)
  VariableInitializer initializer = {};
  Regularizer regularizer = nullptr;
  bool trainable = true;
  // Default {GraphKeys::GLOBAL_VARIABLES} (+ TRAINABLE_VARIABLES if trainable).
  std::optional<std::vector<std::string>> collections = std::nullopt;
  std::optional<CachingDevice> caching_device = std::nullopt;
  Partitioner partitioner = nullptr;
  bool validate_shape = true;
  // Replaces the scopes' custom getters for this call.
  CustomGetter custom_getter = nullptr;
};

// What get_variable returns: a Variable, or a PartitionedVariable when a
// partitioner applied. Converts implicitly to the one it holds (and throws
// ValueError naming the variable when asked for the other).
class GetVariableResult {
 public:
  GetVariableResult(Variable v) : value_(std::move(v)) {}             // NOLINT: implicit
  GetVariableResult(PartitionedVariable v) : value_(std::move(v)) {}  // NOLINT: implicit
  bool is_partitioned() const { return std::holds_alternative<PartitionedVariable>(value_); }
  const Variable& variable() const;
  const PartitionedVariable& partitioned_variable() const;
  operator Variable() const { return variable(); }                         // NOLINT
  operator PartitionedVariable() const { return partitioned_variable(); }  // NOLINT
  // The held object's name ("foo/v:0" for a Variable, "foo/v" for a
  // PartitionedVariable, as in TensorFlow), dtype and (full) shape.
  std::string name() const;
  DType dtype() const;
  TensorShape shape() const;
  // The value (concatenated parts for a PartitionedVariable).
  Tensor value() const;

 private:
  std::variant<Variable, PartitionedVariable> value_;
};

// The properties of a variable scope (tf.VariableScope's constructor
// arguments).
struct VariableScopeProperties {
  Reuse reuse = false;
  std::string name;
  Initializer initializer = {};
  Regularizer regularizer = nullptr;
  CachingDevice caching_device;
  Partitioner partitioner = nullptr;
  CustomGetter custom_getter = nullptr;
  std::string name_scope;
  DType dtype = DType::kFloat;
};

// tf.VariableScope: a handle to the defaults get_variable uses in a scope.
// Copies share the scope; get_variable_scope() returns the current one.
class VariableScope {
 public:
  explicit VariableScope(VariableScopeProperties properties = {});

  const std::string& name() const;
  // The name scope opened when the scope was first entered ("foo/").
  const std::string& original_name_scope() const;
  // false (creates), true or AUTO_REUSE.
  Reuse reuse() const;
  const Initializer& initializer() const;
  const Regularizer& regularizer() const;
  const CachingDevice& caching_device() const;
  const Partitioner& partitioner() const;
  const CustomGetter& custom_getter() const;
  DType dtype() const;

  // From now on, get_variable in this scope (and scopes opened inside it
  // afterwards) reuses existing variables.
  void reuse_variables();
  void set_initializer(Initializer initializer);
  void set_regularizer(Regularizer regularizer);
  void set_caching_device(CachingDevice caching_device);
  void set_partitioner(Partitioner partitioner);
  void set_custom_getter(CustomGetter custom_getter);
  void set_dtype(DType dtype);

  // tf.VariableScope.get_variable: get_variable with this scope's
  // defaults, in `graph`'s store.
  GetVariableResult get_variable(Graph& graph, std::string_view name,
                                 const GetVariableOptions& options = {}) const;

  bool same_as(const VariableScope& other) const { return state_ == other.state_; }
  VariableScopeProperties properties() const;

 private:
  std::shared_ptr<VariableScopeProperties> state_;
};

// The arguments of tf.variable_scope after name_or_scope. Unset fields are
// inherited from the enclosing scope (or, re-entering a captured scope, from
// that scope).
struct VariableScopeOptions {
  // Used when the name is empty; made unique in the enclosing scope by
  // appending _1, _2, ...
  std::string default_name;
  Initializer initializer = {};
  Regularizer regularizer = nullptr;
  std::optional<CachingDevice> caching_device = std::nullopt;
  Partitioner partitioner = nullptr;
  // Wraps the enclosing scope's custom getter (see the rules above).
  CustomGetter custom_getter = nullptr;
  // true, AUTO_REUSE, or false to inherit (see Reuse).
  Reuse reuse = false;
  std::optional<DType> dtype = std::nullopt;
};

// The guard variable_scope() returns: the scope is current (and its name
// scope open) until the guard is destroyed.
class VariableScopeGuard {
 public:
  ~VariableScopeGuard();
  VariableScopeGuard(const VariableScopeGuard&) = delete;
  VariableScopeGuard& operator=(const VariableScopeGuard&) = delete;
  VariableScope& scope() { return scope_; }
  VariableScope* operator->() { return &scope_; }
  operator VariableScope() const { return scope_; }  // NOLINT: `as scope`

 private:
  friend VariableScopeGuard variable_scope(std::string_view, const VariableScopeOptions&);
  friend VariableScopeGuard variable_scope(const VariableScope&, const VariableScopeOptions&);
  friend class TemplateBase;
  struct Frame;
  VariableScopeGuard(Graph& graph, std::optional<std::string_view> name,
                     const VariableScope* captured, const VariableScopeOptions& options,
                     bool open_name_scope);
  Graph& graph_;
  VariableScope scope_;
  std::unique_ptr<Frame> frame_;
};

// tf.variable_scope(name_or_scope, default_name, ...) on the default graph.
// By name: opens "<enclosing>/<name>" with options.reuse, or the enclosing
// scope's mode when false (true and AUTO_REUSE are inherited by nested
// scopes). With an empty name, options.default_name made unique ("layer",
// "layer_1", ...); reuse true or AUTO_REUSE is then a ValueError, and no
// default_name a TypeError. By a captured VariableScope: re-enters that
// scope's name with its properties (reuse from the captured scope unless
// options.reuse is set), not the enclosing scope's. The name opening a name
// scope must match TensorFlow's patterns: ^[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*$
// outside any name scope, ^[A-Za-z0-9_.\\/>-]*$ inside one (ValueError
// otherwise, nothing opened).
[[nodiscard]] VariableScopeGuard variable_scope(std::string_view name_or_default,
                                                const VariableScopeOptions& options = {});
[[nodiscard]] VariableScopeGuard variable_scope(const VariableScope& scope,
                                                const VariableScopeOptions& options = {});
// The callable form: runs fn(scope) inside the scope and returns its result.
template <typename Fn>
auto variable_scope(std::string_view name, const VariableScopeOptions& options, Fn&& fn) {
  auto guard = variable_scope(name, options);
  return fn(guard.scope());
}
template <typename Fn>
auto variable_scope(const VariableScope& scope, const VariableScopeOptions& options, Fn&& fn) {
  auto guard = variable_scope(scope, options);
  return fn(guard.scope());
}
// tf.variable_op_scope (deprecated): variable_scope(name_or_scope, options).
// `values` are accepted for the same call shape; varstate's tensors belong
// to no graph, so there is nothing to check them against.
[[nodiscard]] VariableScopeGuard variable_op_scope(const std::vector<Tensor>& values,
                                                   std::string_view name_or_default,
                                                   const VariableScopeOptions& options = {});

// The current variable scope of the default graph (the root, named "", at
// first).
VariableScope get_variable_scope();

// tf.get_variable on the default graph (see the rules above).
GetVariableResult get_variable(std::string_view name, const GetVariableOptions& options = {});
// tf.get_local_variable: get_variable with trainable = false and
// LOCAL_VARIABLES appended to options.collections (default: only it).
GetVariableResult get_local_variable(std::string_view name, GetVariableOptions options = {});

}  // namespace varstate
