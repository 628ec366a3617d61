// The storage of variables whose bytes live in another process
// (runtime/variable_storage.h's remote kind; the distributed module,
// varstate/cluster.h, implements its transport). When a Cluster is active
// it installs a factory; Variable asks it, once at construction, whether
// the variable's placement names a task of the cluster, and if so the
// variable's storage is the returned RemoteStorage instead of a
// LocalStorage. Without a factory (no MPI, or no Cluster) nothing changes.
//
// RemoteStorage implements the ops (remote_storage.cc): each validates on
// the host exactly as the local op does (the same checks and messages, so
// nothing is sent for a bad call), then makes one exchange with the owner
// through the transport primitives below, which distributed/ implements.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common.h"
#include "runtime/dirty_rows.h"
#include "runtime/variable_storage.h"
#include "varstate/dtype.h"
#include "varstate/tensor.h"
#include "varstate/tensor_shape.h"

namespace varstate::internal {

class RemoteStorage;
class KeyedTable;
struct KeyedPolicy;

// One variable's share of a sparse exchange with several owners (the parts
// of a partitioned variable): its rows (in the variable, each in range)
// and, for a scatter, their updates ([rows.size()] + the row shape, or the
// op's scalar), on the host; a gather fills `values` with the rows.
struct RemotePart {
  RemoteStorage* storage = nullptr;
  std::vector<int64_t> rows;
  Tensor values;
};

// The training ops' batch (VariableStorage::modify_rows) under the name
// the transport uses.
using RemoteUpdate = RowsUpdate;

// The value of one variable held by one task. The transport primitives
// take and return host tensors of the variable's dtype; the ops have
// validated shapes, indices and divisors (nothing here throws for bad
// input). Errors of the transport are UnavailableError / AbortedError.
// The transport also implements is_initialized, version, cache_copies and
// shape of VariableStorage.
class RemoteStorage : public VariableStorage {
 public:
  // --- The ops (remote_storage.cc).
  const std::string& holder() const override { return task(); }
  bool updates_in_place() const override { return false; }
  Tensor read_live(const Variable& self) override;
  Tensor read_copy(const Variable& self) override;
  Tensor read_cached(const Variable& self, Device* caching_device) override;
  std::optional<Tensor> read_if_initialized(const Variable& self) override;
  Tensor copy_for_save(const Variable& self, const std::vector<int64_t>* rows) override;
  Tensor assign_value(Variable& self, const Tensor& value, bool validate_shape) override;
  void replace_value(Variable& self, const Tensor& value) override;
  void replace_rows(Variable& self, const std::vector<RowBytes>& runs) override;
  Tensor add_value(Variable& self, const Tensor& delta, bool negate) override;
  Tensor assign_slice(Variable& self, const std::vector<SliceSpec>& specs,
                      const Tensor& value) override;
  Tensor count_up(Variable& self, int64_t limit) override;
  // The owner bumps the version and marks the rows of every update.
  void note_write(bool) override {}
  Tensor scatter(kernels::ScatterOp op, Variable& self, const Tensor& indices,
                 const Tensor& updates, const UpdateOptions& options, const std::string& who,
                 bool read_back) override;
  Tensor gather(const Variable& self, const std::vector<int64_t>& rows) override;
  // One exchange per owning task (every part is of this transport).
  void scatter_parts(kernels::ScatterOp op, std::vector<StoragePart>& parts, bool updates_scalar,
                     const UpdateOptions& options) override;
  void gather_parts(std::vector<StoragePart>& parts) override;
  // Nothing marks it (the owner marks the rows): a take that does not ask
  // the owner finds nothing but the first take's "everything".
  DirtyRows& dirty_rows() override { return unmarked_; }

  // --- The transport.
  // The owning task, e.g. "/job:ps/task:1".
  virtual const std::string& task() const = 0;
  // The current value; FailedPreconditionError when uninitialized. With
  // `cached`, the last value read here is returned again when the owner's
  // version has not changed since (one small read instead of the whole).
  virtual Tensor read(bool cached) = 0;
  // Replaces the value (the variable's shape) and marks it initialized.
  virtual void write(const Tensor& value) = 0;
  // As write(), from runs of host memory that together cover every row
  // once: one exclusive access, no gathering into one buffer first.
  virtual void write_rows(const std::vector<RowBytes>& runs) = 0;
  // Adds `delta` (the variable's shape), or subtracts it with `negate`,
  // element-wise atomically; returns the value this update produced.
  virtual Tensor add(const Tensor& delta, bool negate) = 0;
  // Applies `fn` to the value under the owner's exclusive lock (no other
  // task reads or updates it meanwhile) and writes the result back.
  virtual Tensor modify(const std::function<void(Tensor&)>& fn) = 0;
  // ref[rows[p]] (op)= updates[p] (or the scalar `updates`), with the
  // single-process scatter's semantics for duplicates. Only the distinct
  // touched rows travel.
  virtual void scatter_at_owner(kernels::ScatterOp op, const std::vector<int64_t>& rows,
                                const Tensor& updates, bool updates_scalar) = 0;
  // The rows `rows` of the value, [rows.size()] + shape[1:]: only the
  // distinct rows travel. FailedPreconditionError when uninitialized.
  virtual Tensor gather_from_owner(const std::vector<int64_t>& rows) = 0;
  // The sparse op on several variables of this storage's transport (every
  // parts[i].storage is one; this one need not be among them): one batched
  // exchange per owning task, the owners' exchanges overlapped.
  virtual void scatter_at_owners(kernels::ScatterOp op, std::vector<RemotePart>& parts,
                                 bool updates_scalar) = 0;
  virtual void gather_from_owners(std::vector<RemotePart>& parts) = 0;
  // Every window of every update's storages (all of this storage's
  // transport) is locked exclusively on its owner, in an order every task
  // agrees on (so two such calls cannot deadlock); each update's rows are
  // read, passed to its `fn`, and, once every `fn` has returned, written
  // back, marked (start_marking) and every version bumped. One exchange per
  // window and owner. Nothing is written when a `fn` throws.
  void modify_rows(std::vector<RowsUpdate>& updates) override = 0;
  // Atomically: the scalar before the increment; OutOfRangeError (naming
  // `op_name`) when it has reached `limit`.
  virtual int64_t count_up_to(int64_t limit, const std::string& op_name) = 0;
  // After start_marking() this process's updates mark the rows they write
  // in the owner's storage, where the rows live (a whole-value update every
  // row); off before (a mark costs a transfer per sparse update).
  void start_marking() override = 0;
  std::vector<int64_t> take_marked_rows() override = 0;

 private:
  DirtyRows unmarked_;
};

// (op name, placement, dtype, shape) -> storage, or nullptr for a variable
// that stays in this process. Throws for a placement naming an unknown task.
using RemoteStorageFactory = std::function<std::shared_ptr<RemoteStorage>(
    const std::string& op_name, const std::string& placement, DType dtype,
    const TensorShape& shape)>;

// Installs (or, with nullptr, removes) the process's factory. Thread-safe.
// `begin_batch` / `end_batch` (optional) bracket a creation batch.
void set_remote_storage_factory(RemoteStorageFactory factory,
                                std::function<void()> begin_batch = nullptr,
                                std::function<void()> end_batch = nullptr);
// Whether a factory is installed (a Cluster is active in this process).
bool remote_storage_installed();
std::shared_ptr<RemoteStorage> make_remote_storage(const std::string& op_name,
                                                   const std::string& placement, DType dtype,
                                                   const TensorShape& shape);

// Dynamic variables (runtime/keyed_table.h) on cluster tasks: (the
// variable's name, its key dtype, its placements -- one per shard of the
// table, in order -- and its policy) -> a table whose shards the named
// tasks hold, or nullptr when no placement names a job (the table stays in
// this process). Throws NotFoundError for a task the cluster lacks and
// InvalidArgumentError for placements mixing tasks and local devices.
// Creation is collective, as for remote variables.
using RemoteKeyedTableFactory = std::function<std::shared_ptr<KeyedTable>(
    const std::string& name, DType key_dtype, const std::vector<std::string>& placements,
    const KeyedPolicy& policy)>;
// Installs (or, with nullptr, removes) the process's factory. Thread-safe.
void set_remote_keyed_table_factory(RemoteKeyedTableFactory factory);
std::shared_ptr<KeyedTable> make_remote_keyed_table(const std::string& name, DType key_dtype,
                                                    const std::vector<std::string>& placements,
                                                    const KeyedPolicy& policy);

// A creation batch: the remote variables created while one is open (the
// parts of one partitioned variable) share one allocation per owning task,
// so that a sparse op over them is one exchange per owner. Every task opens
// and finishes the same batches (creation is collective). finish() ends it
// (and throws what allocating failed with); the destructor ends an
// unfinished one without throwing.
class RemoteCreationBatch {
 public:
  RemoteCreationBatch();
  ~RemoteCreationBatch();
  RemoteCreationBatch(const RemoteCreationBatch&) = delete;
  RemoteCreationBatch& operator=(const RemoteCreationBatch&) = delete;
  void finish();

 private:
  std::function<void()> end_;
};

// The variable's remote storage, or nullptr when its bytes are local (for
// the distributed module and its tests; the ops go through storage(v)).
RemoteStorage* remote_storage(const Variable& v);

}  // namespace varstate::internal
