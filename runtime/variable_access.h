// Variable internals shared by the runtime and checkpoint modules (not
// installed, not API): the update lock, in-place update bookkeeping, the
// state the scatter ops keep per variable, and the type-erased handles the
// Graph holds.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "varstate/tensor.h"
#include "varstate/variable.h"

namespace varstate::internal {

// State that an update op keeps with one variable across calls: the scatter
// ops keep their per-variable lock and the bounds checks still running on a
// GPU here (varstate/scatter.h). Reads of the variable ask it for errors that
// were found after the update call had returned.
class VariableUpdateState {
 public:
  virtual ~VariableUpdateState() = default;
  // Throws (once) the error of an earlier update whose validation finished
  // after that call returned; that update wrote nothing. With `wait`, first
  // waits for every such validation still running; without, looks only at
  // those that have finished. Thread-safe.
  virtual void raise_pending_errors(bool wait) = 0;
};

// The variable's identity: equal for two handles exactly when
// a.same_as(b), for hashing handles (a Saver's check for a variable listed
// twice).
const void* identity(const Variable& variable);

// The mutex serializing use_locking updates; held by callers (scatter
// updates, savers) that update the variable's buffer in place.
std::mutex& update_mutex(const Variable& variable);
// Replaces the buffer (restore, validate_shape=false) and bumps the version.
void set_value(Variable& variable, const Tensor& value);
// Marks an in-place update of the buffer (bumps the version).
void mark_updated(Variable& variable);
// The update state of `variable`, created with make() on first use; every
// later call returns that object. Thread-safe. One slot per variable, used
// by the scatter ops.
std::shared_ptr<VariableUpdateState> update_state(
    const Variable& variable, const std::function<std::shared_ptr<VariableUpdateState>()>& make);

// Raises the finished deferred error of an earlier update of `variable`,
// without waiting, as ref() and value() do before they read.
void raise_finished_errors(const Variable& variable);

// Throws FailedPreconditionError("Attempting to use uninitialized value
// <op_name>"), TensorFlow's error for reading or updating it.
[[noreturn]] void throw_uninitialized(const std::string& op_name);
// Throws it for the first of `parts` (a partitioned variable's) that is
// not initialized.
void check_initialized(const std::vector<Variable>& parts);

// The initial value's recipe (Variable keeps no computed initial value):
// the Tensor it was made from, as given (on the device it came on), if any.
std::optional<Tensor> initial_tensor(const Variable& variable);
// The callable it was made from (bind()'s BoundInitializerFn for an
// initializer), if any.
InitialValueFn initial_value_fn(const Variable& variable);
// Gives a variable without an initial value (recreated from a VariableDef)
// the callable `fn` and an initializer Op running it. Throws
// FailedPreconditionError when it has one already.
void set_initial_value_fn(Variable& variable, InitialValueFn fn);
// Replaces the variable's initial value with the callable `fn`, whatever it
// had, as tf.train.init_from_checkpoint replaces a variable's initializer.
// Its initializer Op reads the recipe when it runs, so an Op built before
// (global_variables_initializer()) runs `fn` too.
void replace_initial_value_fn(Variable& variable, InitialValueFn fn);
// Bytes of computed initial values the variable holds besides its value:
// a callable's value computed before initialization, until the initializer
// consumes it; 0 otherwise (the Tensor it was made from is not counted).
int64_t retained_initial_value_bytes(const Variable& variable);

// The storage of the Variables a thread constructs while a
// ScopedStorageFactory is alive on it, instead of a local or remote one
// (a dynamic variable's keyed storage, runtime/keyed_storage.h): called
// once per Variable with its op name, dtype, device and placement.
class VariableStorage;
using StorageFactory = std::function<std::shared_ptr<VariableStorage>(
    const std::string& op_name, DType dtype, Device& device, const std::string& placement)>;
class ScopedStorageFactory {
 public:
  explicit ScopedStorageFactory(StorageFactory factory);
  ~ScopedStorageFactory();
  ScopedStorageFactory(const ScopedStorageFactory&) = delete;
  ScopedStorageFactory& operator=(const ScopedStorageFactory&) = delete;
  // The innermost factory alive on this thread, or nullptr.
  static const StorageFactory* current();

 private:
  StorageFactory factory_;
  const StorageFactory* outer_;
};

// For Graph: type-erased state handles.
std::shared_ptr<void> state_handle(const Variable& variable);
Variable from_state_handle(const std::shared_ptr<void>& state);

}  // namespace varstate::internal
