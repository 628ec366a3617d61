// Hash-keyed dynamic variables: embedding tables indexed by raw ids (64-bit
// feature hashes, user and item ids) that are not known ahead and need no
// remapping into [0, rows).
//
//   DynamicVariable emb = get_dynamic_variable("emb", {.dim = 64});
//   sess.run(global_variables_initializer());
//   Tensor rows = emb.gather(ids);                 // new ids get rows
//   opt.apply_gradients({emb.gradient(ids, grad_rows)});
//   Saver().save(sess, "ckpt/model");              // "emb-keys", "emb-values"
//
// A DynamicVariable maps each key (int64, or int32) to a row of `dim`
// elements of a float dtype. A key's row is created when the key is first
// gathered in training, scattered into or inserted, with its initial value
// drawn by the variable's initializer from the seed and the key alone: the
// same key gets the same initial row on every device, in every run (a
// constant, random_uniform, random_normal or truncated_normal initializer;
// the default is truncated_normal with stddev 1/sqrt(dim), as
// tf.feature_column.embedding_column's).
//
// It is also a Variable (variable()): in GLOBAL_VARIABLES (and
// TRAINABLE_VARIABLES when trainable), initialized by
// global_variables_initializer() (to an empty table), its value() the rows
// of every key in ascending key order ([size, dim]), updated by the scatter
// ops with keys as indices, trained by every optimizer of
// varstate/optimizers.h with sparse gradients (IndexedSlices whose indices
// are keys). Optimizer slots of a dynamic variable are dynamic too and
// share its keys: a key's slot rows are created and erased with it.
// Whole-value writes (assign, assign_add, slice assign) and dense
// gradients do not apply to it (UnimplementedError, InvalidArgumentError).
//
// Savers write it as two tensors TensorFlow reads as plain ones:
// "<name>-keys" (int64 [n], ascending) and "<name>-values" ([n, dim]);
// a slot as "<slot name>-keys" and "<slot name>-values". Restore replaces
// the whole table, into any device.
//
// Placement: the device scope at creation (CPU or GPU), with the rows in
// device memory and the key index on the host. Thread-safe: lookups and
// updates of keys already present run in parallel; inserts, erasures and
// training steps take the table exclusively.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "varstate/gradient.h"
#include "varstate/initializers.h"
#include "varstate/tensor.h"
#include "varstate/update_options.h"
#include "varstate/variable.h"

namespace varstate {

struct DynamicVariableOptions {
  // Elements per row (>= 1). Required.
  int64_t dim = 0;
  // The rows' dtype: float16, bfloat16, float32 or float64 (the scope's
  // dtype when unset).
  std::optional<DType> dtype = std::nullopt;
  // int64 or int32 keys (int32 keys are stored as int64).
  DType key_dtype = DType::kInt64;
  // New rows' values: zeros, ones, constant (a scalar), random_uniform,
  // random_normal or truncated_normal initializer. Unset: the scope's
  // initializer if it is one of these, else truncated_normal with stddev
  // 1/sqrt(dim).
  Initializer initializer = {};
  // What lookup() (and gather with training off) returns for an absent
  // key: a scalar or a [dim] row; unset: the row the key would get.
  std::optional<Tensor> default_value = std::nullopt;
  // Shards the table by key over these devices ("/device:GPU:0",
  // "/device:GPU:1", ...; two or more, distinct): each key, with its slot
  // rows, lives on the device its hash picks; every call splits its keys
  // over the shards and returns rows on the first device, which is the
  // variable's device(). Checkpoints hold one table whatever the sharding
  // (restore into any number of shards). A cap (max_rows) holds for the
  // shards' keys together; a shard needing room evicts its own keys.
  // In a Cluster (varstate/cluster.h) they may name tasks instead
  // ("/job:ps/task:0", "/job:ps/task:1"): each task holds its shard and
  // serves it, rows return to the caller's CPU (docs/dynamic-variables.md).
  // Empty: one table on the device the device scope picks (or, in a
  // Cluster, on the task it names).
  std::vector<std::string> devices = {};
  // Rows (and index entries) reserved at creation, so that the table does
  // not grow until it holds that many keys; it grows past them by half
  // again each time.
  int64_t initial_capacity = 0;
  // Admission: a key gets a row only once training has seen it this many
  // times (training gathers, scatters and gradients count; 1: at once).
  // Until then a training gather reads the default value (or the row it
  // would start with) and its updates and gradients are dropped.
  int64_t admit_after = 1;
  // A cap on the live keys (0: none). When new keys would pass it, keys
  // outside the batch are evicted first (`eviction`), ties broken by the
  // smaller key; with Eviction::kNone, or when the batch alone cannot fit,
  // the call is ResourceExhaustedError naming the variable, the cap and the
  // new keys, and nothing changes. Evicted keys leave the rows, the slots
  // and the next checkpoint.
  int64_t max_rows = 0;
  enum class Eviction {
    kNone,
    kLeastRecentlyUpdated,
    kLeastFrequentlyUpdated
  };
  Eviction eviction = Eviction::kLeastRecentlyUpdated;
  // expire() erases the keys no training step has updated in this many
  // steps (0: never). A training step is one optimizer apply of the table.
  int64_t expire_after = 0;
  bool trainable = true;
  // Default {GraphKeys::GLOBAL_VARIABLES} (+ TRAINABLE_VARIABLES if trainable).
  std::optional<std::vector<std::string>> collections = std::nullopt;
};

struct DynamicGatherOptions {
  // true: absent keys are inserted (training). false: nothing is inserted;
  // absent keys read the default value.
  bool training = true;
};

// The table's contents, ascending by key: keys (int64 [n], or int32 for an
// int32-keyed table) and values ([n, dim]), on the host.
struct KeysAndValues {
  Tensor keys;
  Tensor values;
};

namespace internal {
struct DynamicVariableAccess;
}

class DynamicVariable {
 public:
  // The variable `variable` is, when it is a dynamic variable's; nullopt
  // otherwise (to find them in global_variables()).
  static std::optional<DynamicVariable> from_variable(const Variable& variable);

  const std::string& name() const;     // "scope/emb:0"
  const std::string& op_name() const;  // "scope/emb"
  DType dtype() const;
  DType key_dtype() const;
  int64_t dim() const;
  Device& device() const;
  // The Variable in the collections (the same object for every handle).
  const Variable& variable() const;
  Variable& variable();
  const Op& initializer() const;
  bool is_initialized() const;

  // Live keys now.
  int64_t size() const;
  // Bytes the table holds for the variable and its slots (rows, key index,
  // change marks), on the variable's device and the host.
  int64_t memory_bytes() const;

  // The rows of `keys` (any shape; int64, or the key dtype), shaped
  // keys.shape + [dim], on the variable's device. See DynamicGatherOptions.
  // TypeError for keys of another dtype; FailedPreconditionError before
  // initialization.
  Tensor gather(const Tensor& keys, const DynamicGatherOptions& options = {});
  // gather with training off.
  Tensor lookup(const Tensor& keys) { return gather(keys, {.training = false}); }
  // Inserts the rows of `keys` or overwrites them: values of shape
  // keys.shape + [dim] (InvalidArgumentError naming both shapes otherwise;
  // nothing changes). A key repeated in `keys` keeps its last row. New
  // keys' slot rows start at the slots' initial values.
  void insert(const Tensor& keys, const Tensor& values);
  // Removes the keys present (rows and slot rows); returns how many.
  int64_t erase(const Tensor& keys);
  // Erases the keys not updated in the last `expire_after` training steps
  // (and forgets admission candidates unseen as long); returns how many
  // keys it erased (0 without expire_after).
  int64_t expire();
  // Training steps applied to the table so far (the clock of expiry and of
  // least-recently-updated eviction).
  int64_t step() const;
  // Every key and its row.
  KeysAndValues export_rows() const;

  // The scatter family by key: absent keys are inserted (initial rows)
  // first; then as varstate/scatter.h on a dense variable (duplicates,
  // use_locking, errors), updates of shape keys.shape + [dim] or a scalar.
  void scatter_update(const Tensor& keys, const Tensor& updates, const UpdateOptions& options = {});
  void scatter_add(const Tensor& keys, const Tensor& updates, const UpdateOptions& options = {});
  void scatter_sub(const Tensor& keys, const Tensor& updates, const UpdateOptions& options = {});
  void scatter_mul(const Tensor& keys, const Tensor& updates, const UpdateOptions& options = {});
  void scatter_div(const Tensor& keys, const Tensor& updates, const UpdateOptions& options = {});
  void scatter_min(const Tensor& keys, const Tensor& updates, const UpdateOptions& options = {});
  void scatter_max(const Tensor& keys, const Tensor& updates, const UpdateOptions& options = {});

  // The gradient of rows gathered by `keys` for an optimizer:
  // {IndexedSlices(grads, keys), variable()}, grads of shape
  // keys.shape + [dim] (InvalidArgumentError otherwise).
  GradientAndVariable gradient(const Tensor& keys, const Tensor& grads) const;

  bool same_as(const DynamicVariable& other) const { return variable_.same_as(other.variable_); }

 private:
  friend struct internal::DynamicVariableAccess;
  explicit DynamicVariable(Variable variable) : variable_(std::move(variable)) {}
  Variable variable_;
};

// tf.get_variable for dynamic variables: the variable `name` under the
// current variable scope, created, or found when the scope reuses
// (ValueError as get_variable's: exists without reuse, absent with reuse,
// or found with another dim, dtype or key dtype; also for dim < 1, a
// dtype that is not a float, keys neither int32 nor int64, or an
// initializer that cannot draw a row from a key).
DynamicVariable get_dynamic_variable(std::string_view name, const DynamicVariableOptions& options);

}  // namespace varstate
