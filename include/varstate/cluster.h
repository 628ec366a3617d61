// Cluster: this process as one task of a multi-process job launched by MPI
// (mpirun), and variables that live on other tasks. Built when varstate is
// configured with MPI (VARSTATE_MPI, defines VARSTATE_HAVE_MPI).
//
//   int main(int argc, char** argv) {
//     Cluster cluster({.ps_tasks = 1});          // rank 0: /job:ps/task:0, others workers
//     DeviceScope ps(replica_device_setter({.ps_tasks = 1}));
//     Variable w(Tensor::zeros(DType::kFloat, {1000, 64}), {.name = "w"});  // on ps task 0
//     if (cluster.job_name() == "ps") { cluster.join(); return 0; }
//     if (cluster.is_chief()) Session().run(w.initializer());
//     cluster.barrier();
//     w.scatter_add(IndexedSlices(grads, ids));  // one exchange with the ps
//   }
//
// Ranks map to tasks in job order: "ps" first, then "worker", then the
// other jobs of the ClusterSpec in name order; within a job, by task index.
// Without a ClusterSpec: the first `ps_tasks` ranks are /job:ps, the rest
// /job:worker.
//
// Remote variables: while a Cluster is alive, a Variable whose placement
// (Variable::placement(), e.g. from replica_device_setter) names a job and
// task of the cluster keeps its value in that task's memory (an MPI window
// per variable), and every read and update goes there through one-sided
// MPI operations, from any task (the owner included). Creating one is
// collective: every task must create the same cluster variables (shape
// and dtype fully defined, not string) in the same order, as TensorFlow 1's
// between-graph replication builds the same graph in every task. A
// placement naming a task the cluster lacks raises NotFoundError. What
// stays out, each an UnimplementedError naming the variable: string
// variables (their elements have no fixed size for an MPI window), and
// growing or shrinking a remote variable (assign with validate_shape=false
// and a value of another shape): its window is sized once, with every
// task's agreement, when it is created.
// Variables without a job in their placement stay in this process.
//
// Ops: reads are MPI_Get; assign one put under the owner's exclusive lock;
// assign_add/sub one MPI_Get_accumulate(SUM) (sub adds the negation).
// Sparse ops move rows, not tables: gather and scatter_update/add/sub/mul/
// min/max (of a Variable or a PartitionedVariable) reduce their indices to
// the distinct rows first -- a scatter's duplicates combined locally with
// the op's own semantics (float sums of duplicates are rounded once, not
// once per duplicate; update keeps the last) -- and move exactly those rows
// plus their offsets, in one accumulate (REPLACE, SUM, PROD, MIN, MAX) or
// one get through an indexed datatype. The parts of one partitioned
// variable that sit on one task share one MPI window, so a partitioned
// gather or scatter is one exchange per owning task (8 parts on 2 ps tasks:
// 2), the owners' exchanges overlapped. scatter_div, float16/bfloat16
// arithmetic and slice assigns read-modify-write the touched rows under
// the owner's exclusive lock (exact for integers). The Tensor returned by
// a scatter_* on a single remote Variable is a read of its whole value
// (that op's contract); PartitionedVariable scatters return nothing and
// move rows only. count_up_to is a compare-and-swap loop. Concurrent
// updates from many tasks lose nothing. Validation is the single-process
// API's and happens before anything is sent. A caching device caches
// remote reads, refreshed only when the owner's version counter moved.
// ref() of a remote variable is a snapshot, not a live view. Training ops
// and optimizers (varstate/training_ops.h, optimizers.h) run on remote
// variables, their slots on the same task: one atomic read-modify-write of
// the batch's rows of the variable and its slots under the owner's
// exclusive locks.
//
// Progress: the owner does not serve requests (passive-target RMA:
// MPI_Win_lock / MPI_Win_unlock per operation). A ps task only has to stay
// in the job: join() waits, polling MPI (which also gives transports that
// need target progress a chance to run), until every task has called
// join() or shutdown(). Requires MPI_THREAD_SERIALIZED or better; MPI calls
// of one process are serialized by the Cluster.
//
// Errors of MPI calls surface as UnavailableError (AbortedError for a
// failed collective) naming the task and rank.
//
// A dead task. MPI (without ULFM) cannot continue a job once a rank has
// died, so the guarantee is a clear error instead of a hang: under
// mpirun's default, the launcher ends every rank within seconds of one
// exiting abnormally. When the launcher lets the others run on (OpenMPI:
// --mca orte_abort_on_non_zero_status 0), every task notices a dead task
// of its own host: the polled waits of barrier(), join() and
// DistributedSaver's collectives check the peers' processes every ~0.1 s,
// and every remote op checks its owner's before it starts, each raising
// UnavailableError("... task /job:ps/task:1 (rank 1, process N) has
// exited; the job cannot continue ...") within a second. shutdown() after
// that frees nothing collectively and does not finalize MPI: the process
// should exit and the job restart from the last checkpoint, which a save
// interrupted by the death never replaced. A task on another host is only
// noticed through the launcher (its default ends the job). A task that
// dies while holding an owner's exclusive lock (scatter_div, float16
// arithmetic) blocks the ops on that owner that follow.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "varstate/replica_device_setter.h"

namespace varstate {

namespace internal {
struct ClusterAccess;  // distributed/cluster_collectives.h
}

struct ClusterOptions {
  // Jobs and tasks (the task count of the spec must equal the MPI world
  // size: InvalidArgumentError otherwise). Addresses are informational.
  std::optional<ClusterSpec> cluster_spec = std::nullopt;
  // Without a spec: the first ps_tasks ranks form /job:ps, the rest
  // /job:worker (0: every rank is a worker).
  int ps_tasks = 0;
};

class Cluster {
 public:
  // Initializes MPI (MPI_Init_thread) unless the program already did, and
  // maps this rank to a task. Only one Cluster may exist at a time
  // (AlreadyExistsError). Collective: every rank constructs it.
  explicit Cluster(ClusterOptions options = {});
  // shutdown().
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // The active cluster, or nullptr.
  static Cluster* current();

  int rank() const;
  int size() const;
  const std::string& job_name() const;
  int task_index() const;
  // "/job:worker/task:1"
  std::string task_name() const;
  // /job:worker/task:0, or rank 0 when there is no worker job.
  bool is_chief() const;
  // The jobs in rank order, and their task counts.
  const std::vector<std::string>& jobs() const;
  int num_tasks(const std::string& job) const;
  // NotFoundError naming the task when the cluster has none such.
  int rank_of(const std::string& job, int task) const;
  std::string task_name_of_rank(int rank) const;
  const ClusterSpec& cluster_spec() const;

  // Blocks until every task calls barrier() (AbortedError on failure).
  void barrier();
  // Blocks until every task of this task's job calls barrier(job) (e.g.
  // the workers of a synchronous step, while the ps tasks wait elsewhere):
  // only those tasks take part, so idle tasks of other jobs delay nothing.
  // InvalidArgumentError when `job` is not this task's job; otherwise as
  // barrier().
  void barrier(const std::string& job);
  // Waits (polling MPI, yielding the CPU) until every task has called
  // join() or shutdown(): what a ps task does after building the graph.
  // UnavailableError when a task of this host has died meanwhile.
  void join();
  // join(), then frees every remote variable's window (collective) and
  // finalizes MPI if the Cluster initialized it. Remote variables used
  // afterwards raise UnavailableError. Idempotent.
  void shutdown();

 private:
  friend struct internal::ClusterAccess;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace varstate
