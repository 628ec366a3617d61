// Variable: a named, typed, shaped, mutable tensor that lives on one device.
//
// Like a TensorFlow resource variable, a Variable owns its state; Variable
// objects are handles (copies share the state). A variable starts
// uninitialized: its initializer() Op assigns the initial value (computed
// when it runs; running it again runs the initializer again, so a random
// initializer draws new values, as in TensorFlow), as does any assign() or
// a checkpoint restore. After initialization the variable holds its value
// once: it keeps the initializer's recipe (or the Tensor it was made from),
// not a computed copy of the initial value. Reading or updating an uninitialized variable throws
// FailedPreconditionError("Attempting to use uninitialized value NAME").
//
//   Variable w(Tensor({{1.f, 2.f}, {3.f, 4.f}}), {.name = "w"});
//   Session sess;
//   sess.run(global_variables_initializer());
//   w.assign_add(1);                    // returns the new value
//   Tensor y = w * 2.f;                 // operators read the value
//
// Placement: the device scope current at construction picks the device
// (varstate/placement.h); the initial value is computed there. With
// `caching_device`, reads return a copy kept on that device, refreshed only
// when the variable changed since the last read.
//
// Thread safety: all methods may be called concurrently. With
// use_locking=true, updates of one variable are serialized (N threads doing
// M assign_add(1) end at exactly N*M); with false, concurrent dense updates
// on the CPU may interleave, as in TensorFlow.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "varstate/dense_update.h"
#include "varstate/graph.h"
#include "varstate/session.h"
#include "varstate/slice.h"
#include "varstate/tensor.h"
#include "varstate/update_options.h"

namespace varstate {

// Where a partition of a larger variable sits in it (TensorFlow's
// SaveSliceInfo): the full variable's name and shape, this part's offset and
// shape. Savers store such a variable as a slice of the full tensor.
struct SaveSliceInfo {
  std::string full_name;
  std::vector<int64_t> full_shape;
  std::vector<int64_t> var_offset;
  std::vector<int64_t> var_shape;
  bool operator==(const SaveSliceInfo&) const = default;
};

// TensorFlow's VariableDef (variable.proto) as a plain struct; serialize()
// and parse() use the protobuf wire format with TensorFlow's field numbers.
struct VariableDef {
  std::string variable_name;       // "<op>:0"
  std::string initializer_name;    // "<op>/Assign"
  std::string snapshot_name;       // "<op>/read:0"
  std::string initial_value_name;  // "<op>/initial_value:0"
  bool is_resource = false;
  bool trainable = true;
  std::optional<SaveSliceInfo> save_slice_info;

  std::string serialize() const;
  // Throws InvalidArgumentError when `bytes` is not a VariableDef.
  static VariableDef parse(const std::string& bytes);
};

class IndexedSlices;  // varstate/indexed_slices.h
namespace internal {
struct VariableAccess;
}  // namespace internal

// A deferred initial value: called (on the variable's device) when the
// initial value is first needed.
using InitialValueFn = std::function<Tensor()>;

struct VariableOptions {
  bool trainable = true;
  // Collections to add the variable to; default {GraphKeys::GLOBAL_VARIABLES}.
  // A trainable variable is also added to TRAINABLE_VARIABLES.
  std::optional<std::vector<std::string>> collections;
  // False: the initial value's shape may differ from expected_shape and
  // assign(validate_shape=false) may change the shape.
  bool validate_shape = true;
  // Device string where reads are cached ("" = read on the variable's device).
  std::string caching_device;
  // Default "Variable", made unique in the graph and name scope.
  std::string name;
  // Converts the initial value; required with an InitialValueFn.
  std::optional<DType> dtype;
  // If set, the initial value must have this shape.
  std::optional<TensorShape> expected_shape;
  // Recreate a variable from a VariableDef (mutually exclusive with an
  // initial value): the graph's variable of that name, or an uninitialized
  // one of `dtype` and `expected_shape`.
  std::optional<VariableDef> variable_def;
  // The graph to create the variable in (default: the thread's default).
  Graph* graph = nullptr;
  // For a partition of a larger variable.
  std::optional<SaveSliceInfo> save_slice_info;
};

class VariableSlice;

class Variable {
 public:
  // From an initial value (a Tensor or anything convertible: 1.f, {1, 2},
  // {{...}}). Throws ValueError when the value is missing (an empty Tensor),
  // when both a value and options.variable_def are given, when its shape
  // differs from expected_shape, or when options.dtype cannot convert it (a
  // typed tensor of another dtype; TensorFlow raises ValueError there too).
  explicit Variable(const Tensor& initial_value, VariableOptions options = {});
  // From a callable producing the initial value; options.dtype is required
  // (ValueError otherwise). With a fully defined options.expected_shape the
  // callable runs when the value is first needed; without one it runs now to
  // learn the shape (as TensorFlow 1 does).
  Variable(InitialValueFn initial_value, VariableOptions options);
  // Recreates from options.variable_def (see VariableOptions).
  explicit Variable(VariableOptions options);

  // --- properties ------------------------------------------------------------
  const std::string& name() const;     // "scope/w:0"
  const std::string& op_name() const;  // "scope/w"
  DType dtype() const;
  TensorShape shape() const;
  TensorShape get_shape() const { return shape(); }
  Device& device() const;
  // The device string the variable was placed with (TensorFlow's
  // Variable.device): the merged device scopes, with the resolved device's
  // type and index, e.g. "/job:ps/task:1/device:CPU:0". Savers shard by it.
  const std::string& placement() const;
  Graph& graph() const;
  bool trainable() const;
  const Op& initializer() const;
  const std::optional<SaveSliceInfo>& save_slice_info() const;
  bool is_initialized() const;

  // --- reads ---------------------------------------------------------------
  // The current value: the live buffer on the variable's device, or the
  // caching device's copy. Throws FailedPreconditionError if uninitialized.
  Tensor value() const;
  // A fresh copy of the current value on the variable's device.
  Tensor read_value() const;
  // The live buffer (tf.Variable.ref()): later updates show through it.
  Tensor ref() const;
  // The value copied to the host, through `session` or the default session.
  Tensor eval(const Session& session) const;
  Tensor eval() const;
  // The initial value, on the variable's device. The variable keeps the
  // recipe, not the value (as TensorFlow keeps the initializer op): the
  // Tensor it was made from (as given, on the device it came on; a copy is
  // made on the variable's device when they differ) or the callable
  // (bind(initializer, ...)). A callable's value computed before the
  // variable is initialized is kept until the initializer Op consumes it
  // (so v.initialized_value() and the initializer agree, as in one
  // TensorFlow step); once initialized, each call runs the callable again:
  // a random initializer gives new values, as TensorFlow's initial_value
  // tensor does when evaluated again.
  Tensor initial_value() const;
  // The value if initialized, else the initial value: use it to initialize
  // another variable from this one (tf.Variable.initialized_value()).
  Tensor initialized_value() const;
  // Deferred update errors: an update whose validation runs on the device
  // (a GPU scatter with indices on the GPU, varstate/scatter.h) may find its
  // error after the call returned; it then wrote nothing. value(), ref()
  // and read_value() raise such an error (InvalidArgumentError naming the
  // op, position and value) once its check has finished, without waiting;
  // eval() and sync() wait for the checks, so they always raise it. Each
  // error is raised once.
  // sync(): waits for the pending checks and raises; cheap when none.
  void sync() const;
  // Reads value(); lets a Variable be passed where a Tensor is expected.
  operator Tensor() const { return value(); }  // NOLINT: implicit as in TF

  // A region of the variable, as v[...] in TensorFlow: its value() reads
  // the region, its assign() writes only that region. Specs as
  // strided_slice (varstate/slice.h); dims not mentioned are taken whole.
  VariableSlice slice(std::vector<SliceSpec> specs) const;

  // --- updates (return the new value) ---------------------------------------
  // Options: varstate/update_options.h (use_locking unset = false, as
  // tf.Variable's methods; assign reads validate_shape). The value has the
  // variable's shape (assign_add/assign_sub: or is a scalar, broadcast);
  // another shape raises ValueError, as TensorFlow's graph builder does:
  //   Assign to "w": shapes must match: target shape [3], value shape [2]
  // TypeError for a dtype that does not convert (varstate/tensor.h),
  // FailedPreconditionError when assign_add/assign_sub find it
  // uninitialized.
  Tensor assign(const Tensor& value, const UpdateOptions& options = {});
  Tensor assign_add(const Tensor& delta, const UpdateOptions& options = {});
  Tensor assign_sub(const Tensor& delta, const UpdateOptions& options = {});
  // tf.Variable.scatter_sub / scatter_add / scatter_update / scatter_mul /
  // scatter_div / scatter_min / scatter_max: the sparse update of the rows
  // sparse_delta.indices() by sparse_delta.values(), returning the new
  // value. Same as the free functions of varstate/scatter.h (errors,
  // devices, determinism, options) but use_locking unset = false.
  Tensor scatter_sub(const IndexedSlices& sparse_delta, const UpdateOptions& options = {});
  Tensor scatter_add(const IndexedSlices& sparse_delta, const UpdateOptions& options = {});
  Tensor scatter_update(const IndexedSlices& sparse_delta, const UpdateOptions& options = {});
  Tensor scatter_mul(const IndexedSlices& sparse_delta, const UpdateOptions& options = {});
  Tensor scatter_div(const IndexedSlices& sparse_delta, const UpdateOptions& options = {});
  Tensor scatter_min(const IndexedSlices& sparse_delta, const UpdateOptions& options = {});
  Tensor scatter_max(const IndexedSlices& sparse_delta, const UpdateOptions& options = {});
  // Increments an int32/int64 scalar variable by one and returns the value
  // before the increment; OutOfRangeError when the result would pass `limit`.
  Tensor count_up_to(int64_t limit);

  // --- serialization ---------------------------------------------------------
  VariableDef to_proto() const;
  static Variable from_proto(const VariableDef& def, Graph* graph = nullptr);

  // --- instrumentation -------------------------------------------------------
  // Increments with every update; caches compare it to skip copies.
  uint64_t version() const;
  // Copies made to refresh the caching device's copy.
  uint64_t cache_copies() const;

  // Handle identity: true if both refer to the same variable.
  bool same_as(const Variable& other) const { return state_ == other.state_; }

 private:
  struct State;
  friend struct internal::VariableAccess;  // variable_access.h's functions
  explicit Variable(std::shared_ptr<State> state) : state_(std::move(state)) {}
  void init(std::optional<Tensor> value, InitialValueFn fn, VariableOptions options,
            bool absolute_name = false);
  Tensor live_value() const;
  void raise_pending_errors(bool wait) const;
  void make_initializer_op();
  Tensor run_initial_value(bool keep) const;
  std::shared_ptr<State> state_;
};

// A region of a variable (Variable::slice). Holds the variable's handle.
class VariableSlice {
 public:
  VariableSlice(Variable variable, std::vector<SliceSpec> specs)
      : variable_(std::move(variable)), specs_(std::move(specs)) {}
  // The region's current values (a new tensor on the variable's device).
  Tensor value() const;
  operator Tensor() const { return value(); }  // NOLINT: implicit as in TF
  // Writes `value` into the region only. No broadcasting: the value's shape
  // must equal the region's (InvalidArgumentError otherwise; negative-size
  // regions raise ValueError). Returns the variable's new value. Reads
  // options.use_locking (unset = false).
  Tensor assign(const Tensor& value, const UpdateOptions& options = {});
  TensorShape shape() const;

 private:
  Variable variable_;
  std::vector<SliceSpec> specs_;
};

// Free-function forms (tf.assign, tf.assign_add, tf.assign_sub, tf.count_up_to),
// with TensorFlow's defaults for an unset options.use_locking: tf.assign
// locks (use_locking=True), tf.assign_add and tf.assign_sub do not.
Tensor assign(Variable& ref, const Tensor& value, const UpdateOptions& options = {});
Tensor assign_add(Variable& ref, const Tensor& value, const UpdateOptions& options = {});
Tensor assign_sub(Variable& ref, const Tensor& value, const UpdateOptions& options = {});
Tensor count_up_to(Variable& ref, int64_t limit);

std::ostream& operator<<(std::ostream& os, const Variable& v);

}  // namespace varstate
