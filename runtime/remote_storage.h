// Runtime-internal hook for variables whose bytes live in another process
// (the distributed module, varstate/cluster.h). When a Cluster
// is active it installs a factory; Variable asks it, once at construction,
// whether the variable's placement names a task of the cluster, and if so
// every read and update of the variable goes through the returned
// RemoteStorage instead of a local buffer. Without a factory (no MPI, or
// no Cluster) nothing changes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common.h"
#include "varstate/dtype.h"
#include "varstate/tensor.h"
#include "varstate/tensor_shape.h"

namespace varstate {
class Variable;
}

namespace varstate::internal {

class RemoteStorage;

// One variable's share of a sparse op on several remote variables (the
// parts of a partitioned variable): its rows (in the variable, each in
// range) and, for a scatter, their updates ([rows.size()] + the row
// shape, or the op's scalar); a gather fills `values` with the rows.
struct RemotePart {
  RemoteStorage* storage = nullptr;
  std::vector<int64_t> rows;
  Tensor values;
};

// One training op's share of RemoteStorage::modify_rows: a variable and
// its slots (storages of one task), the rows to move (distinct, ascending,
// in range; [rows.size()] + each one's row shape), or, without `rows`, the
// whole values, and the update: `fn` gets the values in the order of
// `storages` and updates them in place.
struct RemoteUpdate {
  std::vector<RemoteStorage*> storages;
  std::optional<std::vector<int64_t>> rows;
  std::function<void(std::vector<Tensor>&)> fn;
};

// The value of one variable held by one task. Tensors passed in and
// returned are on the host, of the variable's dtype; the caller has
// validated shapes, indices and divisors (nothing here throws for bad
// input). Errors of the transport are UnavailableError / AbortedError.
class RemoteStorage {
 public:
  virtual ~RemoteStorage() = default;
  // The owning task, e.g. "/job:ps/task:1".
  virtual const std::string& task() const = 0;
  virtual bool is_initialized() = 0;
  // The current value; FailedPreconditionError when uninitialized. With
  // `cached`, the last value read here is returned again when the owner's
  // version has not changed since (one small read instead of the whole).
  virtual Tensor read(bool cached) = 0;
  // The owner's update counter (bumped by every update from any task).
  virtual uint64_t version() = 0;
  // Whole-value copies made by cached reads.
  virtual uint64_t cache_copies() const = 0;
  // Replaces the value (the variable's shape) and marks it initialized.
  virtual void write(const Tensor& value) = 0;
  // Bytes of whole rows [row, row + bytes / row bytes) of the value.
  struct RowBytes {
    int64_t row = 0;
    const std::byte* data = nullptr;
    size_t bytes = 0;
  };
  // As write(), from runs of host memory that together cover every row
  // once (a restore's rows, straight from where they were verified): one
  // exclusive access, no gathering into one buffer first.
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
  virtual void scatter(kernels::ScatterOp op, const std::vector<int64_t>& rows,
                       const Tensor& updates, bool updates_scalar) = 0;
  // The rows `rows` of the value, [rows.size()] + shape[1:]: only the
  // distinct rows travel. FailedPreconditionError when uninitialized.
  virtual Tensor gather(const std::vector<int64_t>& rows) = 0;
  // The sparse op on several variables of this storage's transport (every
  // parts[i].storage is one; this one need not be among them): one batched
  // exchange per owning task, the owners' exchanges overlapped.
  virtual void scatter_parts(kernels::ScatterOp op, std::vector<RemotePart>& parts,
                             bool updates_scalar) = 0;
  virtual void gather_parts(std::vector<RemotePart>& parts) = 0;
  // Training ops (one, or an optimizer's apply_gradients) as one atomic
  // update (see RemoteUpdate): every window of every update's storages
  // (all of this storage's transport) is locked exclusively on its owner,
  // in an order every task agrees on (so two such calls cannot deadlock);
  // each update's rows are read, passed to its `fn`, and, once every `fn`
  // has returned, written back, marked (start_marking) and every version
  // bumped. One exchange per window and owner. Nothing is written when a
  // `fn` throws.
  virtual void modify_rows(std::vector<RemoteUpdate>& updates) = 0;
  // Atomically: the scalar before the increment; OutOfRangeError (naming
  // `op_name`) when it has reached `limit`.
  virtual int64_t count_up_to(int64_t limit, const std::string& op_name) = 0;
  // Row marks, for the owner's incremental saves (DistributedSaver): after
  // start_marking() this process's updates mark the rows they write in the
  // owner's storage, where the rows live (a whole-value update every row);
  // off before (a mark costs a transfer per sparse update).
  // take_marked_rows() returns the marked rows, ascending, and clears them
  // (one taker per variable).
  virtual void start_marking() = 0;
  virtual std::vector<int64_t> take_marked_rows() = 0;
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
std::shared_ptr<RemoteStorage> make_remote_storage(const std::string& op_name,
                                                   const std::string& placement, DType dtype,
                                                   const TensorShape& shape);

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

// The variable's remote storage, or nullptr when its bytes are local.
RemoteStorage* remote_storage(const Variable& v);

}  // namespace varstate::internal
