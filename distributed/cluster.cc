#include "varstate/cluster.h"
#include "distributed/cluster_collectives.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "distributed/mpi_keyed_table.h"
#include "distributed/mpi_storage.h"
#include "runtime/remote_storage.h"
#include "varstate/device_spec.h"
#include "varstate/error.h"

namespace varstate {
namespace {

std::atomic<Cluster*> g_current{nullptr};

}  // namespace

struct Cluster::Impl {
  std::shared_ptr<internal::MpiContext> shared = std::make_shared<internal::MpiContext>();
  bool owns_mpi = false;
  bool joined = false;
  bool shut_down = false;
  int rank = 0;
  int size = 1;
  std::string job;
  int task = 0;
  std::vector<std::string> jobs;
  std::map<std::string, std::vector<int>> ranks_of_job;  // job -> rank by position
  std::map<std::string, std::vector<int>> tasks_of_job;  // job -> task index by position
  std::vector<std::pair<std::string, int>> task_of_rank;
  ClusterSpec spec;
  MPI_Comm job_comm = MPI_COMM_NULL;  // this task's job (barrier(job))
  std::unique_ptr<internal::LockWatchdog> watchdog;
  // Serves the shards of dynamic variables this task holds.
  std::shared_ptr<internal::KeyedService> keyed;

  [[noreturn]] void fail(int rc, const std::string& what) const {
    throw AbortedError(what + " on " +
                       (task_of_rank.empty() ? "rank " + std::to_string(rank)
                                             : shared->task_names[static_cast<size_t>(rank)]) +
                       " failed: " + internal::mpi_error_string(rc));
  }
  void check(int rc, const std::string& what) const {
    if (rc != MPI_SUCCESS) fail(rc, what);
  }

  // A nonblocking barrier polled with short sleeps, so that oversubscribed
  // ranks do not spin against each other.
  void polled_barrier(const char* what, MPI_Comm comm) {
    MPI_Request request = MPI_REQUEST_NULL;
    {
      std::lock_guard lock(shared->mu);
      check(MPI_Ibarrier(comm, &request), what);
    }
    wait(request, what);
  }
  // Completes a nonblocking collective, polling with short sleeps; every
  // kLivenessPolls polls (about 0.1 s), checks that no task of this host
  // has exited, so a dead peer is an error rather than a hang.
  void wait(MPI_Request& request, const char* what) {
    constexpr int kLivenessPolls = 500;
    constexpr int kYieldPolls = 200;
    for (int polls = 1;; ++polls) {
      int done = 0;
      {
        std::lock_guard lock(shared->mu);
        check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
      }
      if (done) return;
      if (polls % kLivenessPolls == 0) alive_or_throw(what);
      // Yield first (a peer about to arrive is not kept waiting by a
      // sleeping poller; the CPU still goes to whoever is runnable), then
      // sleep between polls.
      if (polls <= kYieldPolls) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  }
  // UnavailableError naming `what` and the dead task, if one is.
  void alive_or_throw(const std::string& what) {
    try {
      internal::check_peers_alive(*shared);
    } catch (const UnavailableError& e) {
      throw UnavailableError(what + " on " + shared->task_names[static_cast<size_t>(rank)] + ": " +
                             e.what());
    }
  }
  // Every rank's process id, kept for the ranks on this host.
  void exchange_pids();

  // The rank of the task `placement` names (for variable `op_name`), or -1
  // when it names no job. NotFoundError for a task the cluster lacks.
  int owner_of(const std::string& op_name, const std::string& placement) const {
    const DeviceSpec spec_of = DeviceSpec::parse(placement);
    if (!spec_of.job) return -1;
    const std::string& job_name = *spec_of.job;
    const int task_index = spec_of.task.value_or(0);
    if (auto it = ranks_of_job.find(job_name); it != ranks_of_job.end()) {
      const auto& tasks = tasks_of_job.at(job_name);
      for (size_t i = 0; i < tasks.size(); ++i) {
        if (tasks[i] == task_index) return it->second[i];
      }
    }
    throw NotFoundError("variable " + quoted(op_name) + " is placed on /job:" + job_name +
                        "/task:" + std::to_string(task_index) +
                        ", which is not a task of the cluster (" + describe() + ")");
  }

  std::shared_ptr<internal::KeyedTable> make_keyed(const std::string& name, DType key_dtype,
                                                   const std::vector<std::string>& placements,
                                                   const internal::KeyedPolicy& policy) {
    std::vector<int> owners;
    for (const std::string& p : placements) owners.push_back(owner_of(name, p));
    const auto local = std::count(owners.begin(), owners.end(), -1);
    if (local == static_cast<std::ptrdiff_t>(owners.size())) return nullptr;
    if (local > 0) {
      throw InvalidArgumentError("dynamic variable " + quoted(name) +
                                 ": its shards' placements mix cluster tasks and devices of "
                                 "this process; shard over one kind");
    }
    return keyed->make_table(name, key_dtype, owners, policy);
  }

  std::shared_ptr<internal::RemoteStorage> make(const std::string& op_name,
                                                const std::string& placement, DType dtype,
                                                const TensorShape& shape) {
    const int owner = owner_of(op_name, placement);
    if (owner < 0) return nullptr;
    const std::string& where = shared->task_names[static_cast<size_t>(owner)];
    if (dtype == DType::kString) {
      throw UnimplementedError("variable " + quoted(op_name) + " is placed on " + where +
                               ": string variables cannot live on a cluster task (their "
                               "elements have no fixed size); place it without a job");
    }
    if (!shape.is_fully_defined()) {
      throw ValueError("variable " + quoted(op_name) + " on " + where +
                       ": a variable on a cluster task needs a fully defined shape, got " +
                       shape.to_string());
    }
    return internal::create_mpi_storage(
        shared, rank, op_name, owner, dtype, shape,
        [this](int rc, const std::string& what) { check(rc, what); });
  }

  // The steps of the constructor: joins MPI (initializing it unless the
  // program did) at a thread level Cluster's threads may use, on a
  // duplicate of the world communicator.
  void init_mpi();
  // Each job's task indices: the ClusterSpec's, else ps_tasks "ps" tasks
  // then "worker" tasks, one per rank (sets spec).
  std::map<std::string, std::vector<int>> tasks_by_job(const ClusterOptions& options);
  // Orders the jobs (ps, worker, then the others by name) and numbers their
  // tasks' ranks in that order; the count must be the world size.
  void assign_ranks(const std::map<std::string, std::vector<int>>& tasks);

  std::string describe() const {
    std::string out;
    for (const std::string& j : jobs) {
      if (!out.empty()) out += ", ";
      out += j + " with " + std::to_string(tasks_of_job.at(j).size()) + " task(s)";
    }
    return out;
  }
};

void Cluster::Impl::init_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      throw UnavailableError("MPI_Init_thread failed");
    }
    owns_mpi = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    throw FailedPreconditionError(
        "Cluster needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE; the MPI library provides "
        "level " +
        std::to_string(provided));
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check(MPI_Comm_dup(MPI_COMM_WORLD, &shared->comm), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(shared->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(shared->comm, &rank);
  MPI_Comm_size(shared->comm, &size);
  exchange_pids();
}

void Cluster::Impl::exchange_pids() {
  constexpr int kHostChars = 256;
  std::vector<char> hosts(static_cast<size_t>(kHostChars * size), '\0');
  std::vector<char> mine(kHostChars, '\0');
  ::gethostname(mine.data(), kHostChars - 1);
  check(MPI_Allgather(mine.data(), kHostChars, MPI_CHAR, hosts.data(), kHostChars, MPI_CHAR,
                      shared->comm),
        "MPI_Allgather of host names");
  const int pid = static_cast<int>(::getpid());
  shared->my_rank = rank;
  shared->local_pids.assign(static_cast<size_t>(size), 0);
  check(MPI_Allgather(&pid, 1, MPI_INT, shared->local_pids.data(), 1, MPI_INT, shared->comm),
        "MPI_Allgather of process ids");
  for (int r = 0; r < size; ++r) {
    if (std::string(hosts.data() + r * kHostChars) != std::string(mine.data())) {
      shared->local_pids[static_cast<size_t>(r)] = 0;
    }
  }
}

std::map<std::string, std::vector<int>> Cluster::Impl::tasks_by_job(const ClusterOptions& options) {
  std::map<std::string, std::vector<int>> tasks;
  if (options.cluster_spec) {
    for (const std::string& job : options.cluster_spec->jobs()) {
      tasks[job] = options.cluster_spec->task_indices(job);
    }
    spec = *options.cluster_spec;
    return tasks;
  }
  if (options.ps_tasks < 0 || options.ps_tasks > size) {
    throw InvalidArgumentError("Cluster: ps_tasks must be in [0, " + std::to_string(size) +
                               "] (the MPI world size), got " + std::to_string(options.ps_tasks));
  }
  std::map<std::string, std::vector<std::string>> dense;
  for (int r = 0; r < size; ++r) {
    const bool ps = r < options.ps_tasks;
    const std::string job = ps ? "ps" : "worker";
    tasks[job].push_back(static_cast<int>(tasks[job].size()));
    dense[job].push_back("rank" + std::to_string(r));
  }
  spec = ClusterSpec(dense);
  return tasks;
}

void Cluster::Impl::assign_ranks(const std::map<std::string, std::vector<int>>& tasks) {
  for (const char* first : {"ps", "worker"}) {
    if (tasks.count(first)) jobs.push_back(first);
  }
  for (const auto& [job, _] : tasks) {
    if (job != "ps" && job != "worker") jobs.push_back(job);
  }
  for (const std::string& job : jobs) {
    for (int t : tasks.at(job)) {
      ranks_of_job[job].push_back(static_cast<int>(task_of_rank.size()));
      tasks_of_job[job].push_back(t);
      task_of_rank.emplace_back(job, t);
    }
  }
  if (static_cast<int>(task_of_rank.size()) != size) {
    const std::string d = describe();
    MPI_Comm_free(&shared->comm);
    if (owns_mpi) MPI_Finalize();
    throw InvalidArgumentError("Cluster: the ClusterSpec has " +
                               std::to_string(task_of_rank.size()) + " tasks (" + d +
                               ") but the MPI job has " + std::to_string(size) + " ranks");
  }
  for (const auto& [job, t] : task_of_rank) {
    shared->task_names.push_back("/job:" + job + "/task:" + std::to_string(t));
  }
  job = task_of_rank[static_cast<size_t>(rank)].first;
  task = task_of_rank[static_cast<size_t>(rank)].second;
}

Cluster::Cluster(ClusterOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.init_mpi();
  // Jobs in rank order: ps, worker, then the others by name.
  m.assign_ranks(m.tasks_by_job(options));
  const int color =
      static_cast<int>(std::find(m.jobs.begin(), m.jobs.end(), m.job) - m.jobs.begin());
  m.check(MPI_Comm_split(m.shared->comm, color, m.rank, &m.job_comm), "MPI_Comm_split");
  Cluster* expected = nullptr;
  if (!g_current.compare_exchange_strong(expected, this)) {
    MPI_Comm_free(&m.job_comm);
    MPI_Comm_free(&m.shared->comm);
    throw AlreadyExistsError("Cluster: another Cluster is active in this process");
  }
  m.watchdog = std::make_unique<internal::LockWatchdog>(*m.shared);
  m.keyed = std::make_shared<internal::KeyedService>(m.shared, m.rank);
  Impl* impl = impl_.get();
  internal::set_remote_keyed_table_factory([impl](const std::string& name, DType key_dtype,
                                                  const std::vector<std::string>& placements,
                                                  const internal::KeyedPolicy& policy) {
    return impl->make_keyed(name, key_dtype, placements, policy);
  });
  internal::set_remote_storage_factory(
      [impl](const std::string& op_name, const std::string& placement, DType dtype,
             const TensorShape& shape) { return impl->make(op_name, placement, dtype, shape); },
      [impl] { internal::begin_mpi_batch(*impl->shared); },
      [impl] {
        internal::end_mpi_batch(*impl->shared, impl->rank,
                                [impl](int rc, const std::string& what) { impl->check(rc, what); });
      });
}

Cluster::~Cluster() {
  try {
    shutdown();
  } catch (const std::exception&) {
    // A destructor must not throw; the failed collective already reported
    // through the remote operations that noticed it.
  }
}

Cluster* Cluster::current() { return g_current.load(); }
int Cluster::rank() const { return impl_->rank; }
int Cluster::size() const { return impl_->size; }
const std::string& Cluster::job_name() const { return impl_->job; }
int Cluster::task_index() const { return impl_->task; }
std::string Cluster::task_name() const {
  return impl_->shared->task_names[static_cast<size_t>(impl_->rank)];
}
const std::vector<std::string>& Cluster::jobs() const { return impl_->jobs; }
const ClusterSpec& Cluster::cluster_spec() const { return impl_->spec; }

bool Cluster::is_chief() const {
  if (impl_->ranks_of_job.count("worker"))
    return impl_->job == "worker" && impl_->task == impl_->tasks_of_job.at("worker")[0];
  return impl_->rank == 0;
}

int Cluster::num_tasks(const std::string& job) const {
  auto it = impl_->tasks_of_job.find(job);
  return it == impl_->tasks_of_job.end() ? 0 : static_cast<int>(it->second.size());
}

int Cluster::rank_of(const std::string& job, int task) const {
  auto it = impl_->tasks_of_job.find(job);
  if (it != impl_->tasks_of_job.end()) {
    for (size_t i = 0; i < it->second.size(); ++i) {
      if (it->second[i] == task) return impl_->ranks_of_job.at(job)[i];
    }
  }
  throw NotFoundError("Cluster: no task /job:" + job + "/task:" + std::to_string(task) + " (" +
                      impl_->describe() + ")");
}

std::string Cluster::task_name_of_rank(int rank) const {
  if (rank < 0 || rank >= impl_->size) {
    throw InvalidArgumentError("Cluster: rank " + std::to_string(rank) + " is not in [0, " +
                               std::to_string(impl_->size) + ")");
  }
  return impl_->shared->task_names[static_cast<size_t>(rank)];
}

void Cluster::barrier() {
  if (impl_->shut_down) throw UnavailableError("Cluster::barrier: the Cluster has shut down");
  impl_->polled_barrier("MPI_Ibarrier", impl_->shared->comm);
}

void Cluster::barrier(const std::string& job) {
  Impl& m = *impl_;
  if (m.shut_down) throw UnavailableError("Cluster::barrier: the Cluster has shut down");
  if (job != m.job) {
    throw InvalidArgumentError("Cluster::barrier(" + quoted(job) + ") on " + task_name() +
                               ": a task joins the barrier of its own job only");
  }
  m.polled_barrier("MPI_Ibarrier (job)", m.job_comm);
}

void Cluster::join() {
  if (impl_->joined || impl_->shut_down) return;
  impl_->polled_barrier("MPI_Ibarrier (join)", impl_->shared->comm);
  impl_->joined = true;
}

void Cluster::shutdown() {
  Impl& m = *impl_;
  if (m.shut_down) return;
  if (m.shared->dead_rank.load() < 0) {
    try {
      join();
    } catch (const UnavailableError&) {
      if (m.shared->dead_rank.load() < 0) throw;
    }
  }
  m.shut_down = true;
  m.watchdog.reset();
  internal::set_remote_storage_factory(nullptr);
  internal::set_remote_keyed_table_factory(nullptr);
  // Every task has joined: no request comes any more.
  m.keyed->stop(/*free_comms=*/m.shared->dead_rank.load() < 0);
  Cluster* self = this;
  g_current.compare_exchange_strong(self, nullptr);
  std::lock_guard lock(m.shared->mu);
  m.shared->alive = false;
  // After a task died every collective would wait for it forever: nothing
  // is freed collectively and MPI is not finalized; the process exits.
  if (m.shared->dead_rank.load() >= 0) return;
  for (MPI_Win& win : m.shared->windows) MPI_Win_free(&win);
  m.shared->windows.clear();
  MPI_Comm_free(&m.job_comm);
  MPI_Comm_free(&m.shared->comm);
  if (m.owns_mpi) MPI_Finalize();
}

}  // namespace varstate

namespace varstate::internal {

std::string ClusterAccess::broadcast(Cluster& cluster, const std::string& value, int root) {
  Cluster::Impl& m = *cluster.impl_;
  int64_t size = static_cast<int64_t>(value.size());
  MPI_Request request = MPI_REQUEST_NULL;
  {
    std::lock_guard lock(m.shared->mu);
    m.check(MPI_Ibcast(&size, 1, MPI_INT64_T, root, m.shared->comm, &request), "MPI_Ibcast");
  }
  m.wait(request, "MPI_Ibcast");
  std::string out = m.rank == root ? value : std::string(static_cast<size_t>(size), '\0');
  {
    std::lock_guard lock(m.shared->mu);
    m.check(
        MPI_Ibcast(out.data(), static_cast<int>(size), MPI_CHAR, root, m.shared->comm, &request),
        "MPI_Ibcast");
  }
  m.wait(request, "MPI_Ibcast");
  return out;
}

std::vector<int> ClusterAccess::allgather(Cluster& cluster, int value) {
  Cluster::Impl& m = *cluster.impl_;
  std::vector<int> out(static_cast<size_t>(m.size));
  MPI_Request request = MPI_REQUEST_NULL;
  {
    std::lock_guard lock(m.shared->mu);
    m.check(MPI_Iallgather(&value, 1, MPI_INT, out.data(), 1, MPI_INT, m.shared->comm, &request),
            "MPI_Iallgather");
  }
  m.wait(request, "MPI_Iallgather");
  return out;
}

std::vector<std::string> ClusterAccess::allgather_bytes(Cluster& cluster,
                                                        const std::string& value) {
  Cluster::Impl& m = *cluster.impl_;
  const std::vector<int> sizes = allgather(cluster, static_cast<int>(value.size()));
  std::vector<int> offsets(sizes.size(), 0);
  for (size_t r = 1; r < sizes.size(); ++r) offsets[r] = offsets[r - 1] + sizes[r - 1];
  std::string all(static_cast<size_t>(offsets.back() + sizes.back()), '\0');
  MPI_Request request = MPI_REQUEST_NULL;
  {
    std::lock_guard lock(m.shared->mu);
    m.check(MPI_Iallgatherv(value.data(), static_cast<int>(value.size()), MPI_CHAR, all.data(),
                            sizes.data(), offsets.data(), MPI_CHAR, m.shared->comm, &request),
            "MPI_Iallgatherv");
  }
  m.wait(request, "MPI_Iallgatherv");
  std::vector<std::string> out;
  for (size_t r = 0; r < sizes.size(); ++r) {
    out.push_back(all.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(sizes[r])));
  }
  return out;
}

int ClusterAccess::owner_rank(const Variable& v) { return mpi_owner_rank(remote_storage(v)); }

WireStats ClusterAccess::wire_stats(Cluster& cluster) {
  return mpi_wire_stats(*cluster.impl_->shared);
}

}  // namespace varstate::internal
