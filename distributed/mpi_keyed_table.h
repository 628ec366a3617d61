// Dynamic variables (varstate/dynamic_variable.h) held by cluster tasks.
// Internal: Cluster (cluster.cc) owns the service and installs the factory
// (runtime/remote_storage.h's RemoteKeyedTableFactory).
//
// A dense remote variable is a fixed block of an MPI window that workers
// read and write one-sidedly. A hash-keyed table cannot be: inserting a
// key changes its index, growing it moves its rows, and admission,
// eviction and expiry decide on the owner's counts. So the task holding a
// shard runs it -- a DeviceKeyedTable on its CPU, the same code as in one
// process -- and serves requests for it. Every task (owners included) uses
// the variable through a RemoteKeyedTable, a KeyedTable that sends each
// call's keys (and rows) to the owners and puts their answers back in the
// keys' order.
//
// - Keys are routed to owners by kernels::device_shard (as ShardedKeyedTable
//   routes them to devices), so a call makes one exchange per owner, every
//   owner's request sent before any answer is awaited. An owner that is the
//   calling task runs its part in place, without MPI. A step count (tick(),
//   after sparse SGD's scatter) goes one way: no answer is awaited, and the
//   owner counts it before this task's next request, which arrives after it.
// - A training step travels as data (KeyedTrainingStep: the op, its
//   hyperparameters, the gradient's rows); the owner runs the same kernel
//   on its rows (training/keyed_training.h), so N steps equal N local ones
//   bitwise.
// - Each owner's process runs one service thread (started when it first
//   holds a shard) that polls for requests on a communicator of its own
//   (yielding, then sleeping 0.1 ms between polls when idle) and answers
//   them in arrival order. Errors raised on the owner come back with their
//   class and message.
// - A cap (max_rows) holds for the owners' keys together, as for a table
//   sharded over devices: before a call that may insert, the table asks
//   every owner for its live keys and how many of the call's it would
//   insert, and evicts the least recently (or frequently) updated keys over
//   all owners first. Workers inserting at once may pass it by what they
//   insert together, until the next such call evicts; no owner ever holds
//   more than max_rows.
// - Creation is collective (every task creates the same dynamic variables
//   in the same order, numbering them alike); a request that reaches an
//   owner before it created the table or a slot is retried for up to 60 s.
#pragma once

#include <mpi.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "distributed/mpi_window.h"
#include "runtime/keyed_table.h"

namespace varstate::internal {

class KeyedService : public std::enable_shared_from_this<KeyedService> {
 public:
  // Collective over context->comm (two MPI_Comm_dup).
  KeyedService(std::shared_ptr<MpiContext> context, int rank);
  ~KeyedService();
  KeyedService(const KeyedService&) = delete;
  KeyedService& operator=(const KeyedService&) = delete;

  // Creates a table named `name` whose shards the ranks `owners` hold (in
  // shard order, distinct). Every task calls it, in the same order.
  std::shared_ptr<KeyedTable> make_table(const std::string& name, DType key_dtype,
                                         const std::vector<int>& owners, KeyedPolicy policy);

  // Ends the service thread; later calls of this process's tables throw
  // UnavailableError. `free_comms`: frees the communicators (collective;
  // false once a task died).
  void stop(bool free_comms);

  // --- For RemoteKeyedTable (mpi_keyed_table.cc).
  struct Shard;
  // One request per owner (`requests[i]` for owners[i], empty for none):
  // the answers, in that order. Throws what the owner raised.
  std::vector<std::string> call(const std::string& table, const std::vector<int>& owners,
                                std::vector<std::string>& requests);
  // The same for requests nobody waits for (the owners answer nothing):
  // returns once they have left. A task's requests reach an owner in the
  // order it sent them, so its later ones see their effect.
  void post(const std::string& table, const std::vector<int>& owners,
            std::vector<std::string>& requests);
  // Registers this task's shard of table `id` (its DeviceKeyedTable).
  void hold(int64_t id, std::shared_ptr<Shard> shard);
  int rank() const { return rank_; }
  const std::string& task_name(int rank) const;

 private:
  void run();
  // The answer to one request (for a shard of this task).
  std::string handle(const std::string& request);
  // A request nobody waits for: handled once the table and its members
  // exist here (waiting up to 60 s); a failure is written to stderr.
  void handle_one_way(const std::string& request);
  // Sends `reply` to `dest` with `tag`, polling until it went (or the
  // service stops, or `dest` died).
  void send_reply(std::string reply, int dest, int tag);
  int next_tag();
  // UnavailableError naming `table` and `owner` once the service stopped.
  void check_running(const std::string& table, int owner) const;
  // Sends `request` to `owner` with reply tag `tag` (written into it);
  // UnavailableError when MPI refuses.
  MPI_Request send_request(const std::string& table, int owner, std::string& request, int tag);
  // UnavailableError naming `table` when `owner`'s process has exited.
  void check_alive(const std::string& table, int owner);

  std::shared_ptr<MpiContext> context_;
  const int rank_;
  MPI_Comm requests_ = MPI_COMM_NULL;
  MPI_Comm replies_ = MPI_COMM_NULL;
  MPI_Datatype unit_ = MPI_DATATYPE_NULL;  // kUnit bytes
  int tag_limit_ = 32767;
  std::atomic<int> tag_{0};
  std::atomic<int64_t> tables_{0};  // created so far (the next table's id)

  std::mutex mu_;  // held_, thread_
  std::unordered_map<int64_t, std::shared_ptr<Shard>> held_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stopped_{false};
};

}  // namespace varstate::internal
