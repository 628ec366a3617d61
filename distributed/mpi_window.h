// Where an MPI-held variable lives and how its bytes are addressed: shared
// by the whole-value ops (mpi_storage.cc) and the sparse ones
// (mpi_sparse.cc).
//
// Layout: the variables of one creation batch (one variable, or the parts
// of one partitioned variable) share one MPI window; each owner's segment
// of it holds, per variable it owns, a 16-byte header (int64 initialized
// flag, int64 version counter), the value, then one byte per row (axis 0;
// one for a scalar) marking the rows updated since the owner last took the
// marks (incremental saves, DistributedSaver), each variable at a 64-byte
// aligned offset (`base`), its marks 64-byte aligned after the value.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "varstate/dtype.h"
#include "varstate/tensor_shape.h"

namespace varstate::internal {

class RemoteStorage;

// Traffic of one Cluster's remote variables, for tests and benchmarks.
// An exchange is one access epoch with one owner (lock ... unlock); bytes
// count what the transfers carry: row data, row offsets of indexed
// datatypes (8 bytes a row: the "ids"), and header words (flag, version)
// and row marks (a byte a row, once an incremental save turned them on).
struct WireStats {
  uint64_t exchanges = 0;
  uint64_t data_bytes = 0;
  uint64_t index_bytes = 0;
  uint64_t header_bytes = 0;
};

// What every remote variable of one Cluster shares: the communicator, the
// task names, the mutex serializing this process's MPI calls, the open
// creation batch and the traffic counters.
struct MpiContext {
  std::mutex mu;
  bool alive = true;
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<std::string> task_names;                  // by rank
  std::vector<MPI_Win> windows;                         // creation order; freed at shutdown
  int batch_depth = 0;                                  // open creation batches
  std::vector<std::shared_ptr<RemoteStorage>> pending;  // created in the batch
  std::atomic<uint64_t> exchanges{0}, data_bytes{0}, index_bytes{0}, header_bytes{0};
  // Liveness: each rank's process id when it runs on this host (0 for the
  // others), and the first rank found dead (-1: none), after which no
  // collective is attempted again.
  std::vector<int> local_pids;
  std::atomic<int> dead_rank{-1};
  int my_rank = 0;
  // The lock request in progress (LockWatchdog): since when (steady clock,
  // ns; 0 for none) and on which rank.
  std::atomic<int64_t> lock_wait_since{0};
  std::atomic<int> lock_wait_target{-1};

  WireStats stats() const {
    return {exchanges.load(), data_bytes.load(), index_bytes.load(), header_bytes.load()};
  }
};

// Throws UnavailableError naming the task when `rank` is known dead or its
// process on this host has exited (`thorough` also counts an unreaped
// zombie, reading /proc; the quick check is one kill(pid, 0)).
void check_peer_alive(MpiContext& context, int rank, bool thorough);
// The same for every rank.
void check_peers_alive(MpiContext& context);

// Header fields, relative to a variable's base.
constexpr MPI_Aint kFlagOffset = 0;
constexpr MPI_Aint kVersionOffset = 8;
constexpr MPI_Aint kDataOffset = 16;
constexpr MPI_Aint kVariableAlign = 64;

// The MPI type of a dtype's elements, or MPI_DATATYPE_NULL when MPI has
// none (float16, bfloat16, string): such variables move as bytes and are
// updated by read-modify-write under an exclusive lock.
MPI_Datatype mpi_type(DType dtype);

// Reports a failed MPI call by throwing (rc, what it did).
using MpiCallCheck = std::function<void(int, const char*)>;

// One MPI-held variable, as the transfers see it.
struct MpiVar {
  MpiContext* context = nullptr;
  std::string op_name;
  std::string task;  // the owner's name
  int owner = -1;
  DType dtype = DType::kInvalid;
  TensorShape shape;
  MPI_Win win = MPI_WIN_NULL;  // set once its creation batch allocated it
  MPI_Aint base = 0;           // its header's offset in the owner's segment
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int64_t esize = 0;
  int64_t row_width = 1;  // elements of one row (shape[1:])
  int64_t rows = 1;       // rows along axis 0 (1 for a scalar): one mark each
  MPI_Aint marks = 0;     // its row marks' offset in the owner's segment
  // Whether this process's updates mark rows: off until an incremental
  // save turns it on (a mark costs a transfer per sparse update).
  std::shared_ptr<std::atomic<bool>> marking = std::make_shared<std::atomic<bool>>(false);
  // Its window's place in creation order, the same on every task: the
  // order in which an update of several windows locks them.
  int64_t win_order = -1;

  int64_t row_bytes() const { return row_width * esize; }
  MPI_Aint data() const { return base + kDataOffset; }
};

// A passive-target access epoch on one owner: one exchange. Unlocked on
// scope exit (errors then ignored), or by close() (errors reported).
class Epoch {
 public:
  Epoch(MpiContext& context, MPI_Win win, int lock_type, int target, const MpiCallCheck& check);
  ~Epoch();
  Epoch(const Epoch&) = delete;
  Epoch& operator=(const Epoch&) = delete;
  Epoch(Epoch&& other) noexcept;
  void flush();
  void close();

 private:
  MPI_Win win_;
  int target_;
  const MpiCallCheck* check_;
  bool open_ = false;
};

// Called by an Epoch once it holds its lock (lock type, target): a test
// seam to kill a task while it holds an owner's lock. Null by default.
void set_epoch_locked_hook(std::function<void(int lock_type, int target)> hook);

// A task blocked in MPI_Win_lock behind a lock that a dead task held can
// never be released: MPI has no way to cancel a lock request or to break
// a dead holder's lock. While a Cluster lives, this thread checks every
// 0.1 s whether this process has waited for a lock for over a second;
// then, if a task of this host has exited, it writes the UnavailableError
// naming the dead task and the lock waited for to stderr and ends the
// process with status 75 (EX_TEMPFAIL) -- a bounded error instead of a
// hang; the job restarts from its last checkpoint.
class LockWatchdog {
 public:
  explicit LockWatchdog(MpiContext& context);
  ~LockWatchdog();
  LockWatchdog(const LockWatchdog&) = delete;
  LockWatchdog& operator=(const LockWatchdog&) = delete;

 private:
  void run();

  MpiContext& context_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// Bumps `v`'s version (and sets its initialized flag), within an epoch on
// its owner: ordered after the update's accumulates by MPI's default
// accumulate ordering.
void mark_updated(const MpiVar& v, bool initialize, const MpiCallCheck& check);
// Marks every row of `v` updated (a whole-value update), within an epoch on
// its owner, when `v.marking`.
void mark_all_rows(const MpiVar& v, const MpiCallCheck& check);

}  // namespace varstate::internal
