// A variable's storage: where its value lives and how each op reaches it.
// Runtime seam (runtime/, training/, checkpoint/ and distributed/ use it; not
// installed, not API).
//
// Every Variable owns one VariableStorage, chosen once at construction: the
// remote factory's (runtime/remote_storage.h: the placement names a task of
// an active Cluster; distributed/ implements it over MPI windows), else a
// LocalStorage (runtime/local_storage.h: a dense buffer on the variable's
// CPU or GPU). The ops (varstate/variable.h, scatter.h, gather.h,
// training_ops.h, the savers) validate what is the same for every storage,
// then make one virtual call here; each implementation runs its own path
// (the local kernels in place, or one exchange with the owner) with the
// same checks and messages.
//
// Rows. A storage is a table of rows along axis 0, addressed by int64 ids:
// for the dense storages (local and remote) an id is a position in
// [0, shape()[0]), and the callers check ids against that range before they
// call (gather.cc's checked_indices, scatter_validate.cc) and route a
// partitioned variable's ids by the parts' offsets. Nothing below takes the
// range for granted beyond what the callers checked: a hash-keyed table
// (issue #43: ids are keys, a row is created on first gather) is a third
// implementation, whose extension points are marked "keyed table:" below.
//
// `self` is always the variable that owns the storage: its names (for
// messages), device, update lock and pending errors. Thread-safety is that
// of the Variable methods each call implements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common.h"
#include "runtime/dirty_rows.h"
#include "varstate/slice.h"
#include "varstate/tensor.h"
#include "varstate/tensor_shape.h"
#include "varstate/update_options.h"
#include "varstate/variable.h"

namespace varstate::internal {

class VariableStorage;

// One storage's share of a sparse op on several storages of one kind (the
// parts of a partitioned variable): its variable, its rows (int64 ids of
// that storage, on the host) and, for a scatter, their updates (on the
// variable's device; [rows] + the row shape, or the op's scalar); a gather
// fills `values` with the rows.
struct StoragePart {
  VariableStorage* storage = nullptr;
  Variable* variable = nullptr;
  Tensor rows;
  Tensor values;
};

// One training op's share of VariableStorage::modify_rows: a variable and
// its slots (storages of one kind and holder), the rows to move (distinct,
// ascending; [rows.size()] + each one's row shape), or, without `rows`, the
// whole values, and the update: `fn` gets the values, on the host, in the
// order of `storages`, and updates them in place.
struct RowsUpdate {
  std::vector<VariableStorage*> storages;
  std::optional<std::vector<int64_t>> rows;
  std::function<void(std::vector<Tensor>&)> fn;
};

// Bytes of whole rows [row, row + bytes / row bytes) of a value, in host
// memory (a restore's rows, straight from where they were verified).
struct RowBytes {
  int64_t row = 0;
  const std::byte* data = nullptr;
  size_t bytes = 0;
};

class VariableStorage {
 public:
  virtual ~VariableStorage() = default;

  // --- What it is.
  // Who holds the rows: "this process", or the owning task
  // ("/job:ps/task:1"). A training op's slots must have their variable's.
  virtual const std::string& holder() const = 0;
  // True when read_live() is the buffer itself, on self.device(), that
  // kernels here update in place (each write then note_write()); its rows
  // are marked in dirty_rows(). False when rows move to and from where
  // they live: training ops go through modify_rows (keyed table: false),
  // sparse ops through the batch entries, saves through copy_for_save.
  virtual bool updates_in_place() const = 0;

  // --- State.
  virtual bool is_initialized() = 0;
  // Bumped by every update (remote: from any task).
  virtual uint64_t version() = 0;
  // Whole-value copies made by cached reads.
  virtual uint64_t cache_copies() const = 0;
  // keyed table: the rows it holds now, then the row shape.
  virtual TensorShape shape() const = 0;

  // --- Reads. FailedPreconditionError ("Attempting to use uninitialized
  // value <op name>") when uninitialized.
  // The value to compute on now: the live buffer (later in-place updates
  // show through), or a fresh host snapshot where the rows live elsewhere.
  virtual Tensor read_live(const Variable& self) = 0;
  // A copy that no later update changes (Variable::read_value).
  virtual Tensor read_copy(const Variable& self) = 0;
  // Variable::value(): with a caching device, a copy kept there and
  // refreshed when the version has moved; else read_live().
  virtual Tensor read_cached(const Variable& self, Device* caching_device) = 0;
  // The value when initialized, else nullopt (Variable::initialized_value).
  virtual std::optional<Tensor> read_if_initialized(const Variable& self) = 0;
  // The value or the rows `rows` of it (ids, ascending) for a save: a copy
  // taken under self's update lock where updates are in place.
  virtual Tensor copy_for_save(const Variable& self, const std::vector<int64_t>* rows) = 0;

  // --- Whole-value writes, validated first (nothing changes on a throw).
  // The caller holds self's update lock when use_locking says so.
  // Variable::assign (with the call's validate_shape): returns the new value.
  virtual Tensor assign_value(Variable& self, const Tensor& value, bool validate_shape) = 0;
  // Replaces the value and marks it initialized (initializers, restore,
  // internal::set_value).
  virtual void replace_value(Variable& self, const Tensor& value) = 0;
  // As replace_value, from runs that together cover every row once (a
  // restore's rows). Only called where updates_in_place() is false.
  virtual void replace_rows(Variable& self, const std::vector<RowBytes>& runs) = 0;
  // assign_add (or assign_sub with `negate`): returns the new value.
  virtual Tensor add_value(Variable& self, const Tensor& delta, bool negate) = 0;
  // VariableSlice::assign: value[specs] = value, atomically.
  virtual Tensor assign_slice(Variable& self, const std::vector<SliceSpec>& specs,
                              const Tensor& value) = 0;
  // count_up_to on a scalar int32/int64 (the dtype is checked by the
  // caller, which holds the update lock): the value before.
  virtual Tensor count_up(Variable& self, int64_t limit) = 0;
  // An in-place write of read_live()'s buffer happened (dense updates,
  // training ops): bumps the version; with `all_rows` every row is dirty,
  // else the writer marked its rows.
  virtual void note_write(bool all_rows) = 0;

  // --- Sparse ops on one storage.
  // ref[indices] (op)= updates, validated as the op on `self` (errors name
  // `who`); with `read_back` the value after it (else an empty tensor may
  // be returned). keyed table: indices are keys, new keys create rows.
  virtual Tensor scatter(kernels::ScatterOp op, Variable& self, const Tensor& indices,
                         const Tensor& updates, const UpdateOptions& options,
                         const std::string& who, bool read_back) = 0;
  // Rows `rows` (ids the caller checked), [rows.size()] + shape()[1:].
  // keyed table: missing keys are created (initialized) first.
  virtual Tensor gather(const Variable& self, const std::vector<int64_t>& rows) = 0;

  // --- Batch entries: one call for several storages of this one's kind
  // (this one need not be among them): the local kind loops, the remote
  // kind makes one exchange per owning task.
  // Each part's rows (op)= its values; every index and value was checked
  // by the caller.
  virtual void scatter_parts(kernels::ScatterOp op, std::vector<StoragePart>& parts,
                             bool updates_scalar, const UpdateOptions& options) = 0;
  virtual void gather_parts(std::vector<StoragePart>& parts) = 0;
  // Training ops as one update (RowsUpdate): the rows are read, passed to
  // `fn`, and, once every `fn` has returned, written back, marked and every
  // version bumped. Nothing is written when a `fn` throws. The remote kind
  // holds every storage of every update exclusively meanwhile (on its
  // owner, in an order all tasks agree on); the local kind takes no update
  // lock, as a training op in place takes it only with use_locking.
  virtual void modify_rows(std::vector<RowsUpdate>& updates) = 0;

  // --- Dirty rows, for incremental saves.
  // The rows written here since the last take (runtime/dirty_rows.h); a
  // storage whose rows are marked where they live keeps it for the takes
  // that do not ask the owner, and marks nothing in it.
  virtual DirtyRows& dirty_rows() = 0;
  // After start_marking() the updates of this process mark the rows they
  // write where the rows live, and take_marked_rows() returns them,
  // ascending, and clears them (one taker). A no-op / dirty_rows()'s job
  // where updates are in place. keyed table: the marked keys.
  virtual void start_marking() = 0;
  virtual std::vector<int64_t> take_marked_rows() = 0;
};

// The storage of `v` (one for its whole life).
VariableStorage& storage(const Variable& v);

// Calls `fn` once per kind of storage (implementation class) among
// `parts`, with that kind's parts in their order, the kinds in the order
// they first appear; what `fn` leaves in the parts comes back in place.
// For the batch entries: group[0].storage->scatter_parts(..., group).
void for_each_kind(std::vector<StoragePart>& parts,
                   const std::function<void(std::vector<StoragePart>&)>& fn);

}  // namespace varstate::internal
