// mpi_test modes where a task dies under a job that lets the others run on:
// "die_in_save", "die_in_op", "die_in_create", "die_holding_lock" (np 4).
#include <chrono>
#include <csignal>
#include <thread>

#include "distributed/mpi_window.h"
#include "mpi_test_util.h"

namespace varstate::mpi_test {
namespace {

// ---------------------------------------------------------------------------
// A task dying under a job that lets the others run on (mpirun --mca
// orte_abort_on_non_zero_status 0): every survivor gets an UnavailableError
// naming the dead task within seconds, prints "survivor ok", and exits
// without finalizing MPI (which would wait for the dead task).

double seconds_since(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

[[noreturn]] void survive(Cluster& cluster, const std::string& error, double seconds) {
  EXPECT(error.find("task /job:ps/task:1 (rank 1") != std::string::npos);
  EXPECT(error.find("has exited") != std::string::npos);
  EXPECT(seconds < 30);
  cluster.shutdown();  // local only: a task has died
  std::fprintf(stderr, "[rank %d] survivor %s after %.1f s: %s\n", g_rank,
               g_failures ? "FAILED" : "ok", seconds, error.c_str());
  // mpirun ends the job once a process exits without finalizing: give the
  // other survivors (each noticing within ~0.2 s) time to report first.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::_Exit(g_failures ? 1 : 0);
}

// ps task 1 dies in the middle of writing its shard of step 2.
void die_in_save(Cluster& cluster, const std::string& dir) {
  DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
  Model m = build_model(2);
  DyingFileSystem dying(/*limit=*/24);
  DistributedSaver saver(cluster, {.file_system = cluster.rank() == 1 ? &dying : nullptr});
  if (cluster.is_chief()) set_model(m, 1);
  cluster.barrier();
  saver.save(dir + "/model", 1);
  dying.armed = true;
  cluster.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    saver.save(dir + "/model", 2);
  } catch (const UnavailableError& e) {
    survive(cluster, e.what(), seconds_since(t0));
  }
  EXPECT(false);  // the save cannot succeed without ps task 1
}

// ps task 1 is killed (SIGKILL) while the workers scatter into its
// variable and ps task 0 waits in join().
void die_in_op(Cluster& cluster) {
  DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
  Variable a(Tensor::zeros(DType::kFloat, {64, 8}), {.name = "a"});  // ps 0
  Variable b(Tensor::zeros(DType::kFloat, {64, 8}), {.name = "b"});  // ps 1
  if (cluster.is_chief()) Session().run(std::vector<Op>{a.initializer(), b.initializer()});
  cluster.barrier();
  if (cluster.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::fprintf(stderr, "[rank 1] killing itself mid-operation, as the test asks\n");
    raise(SIGKILL);
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (cluster.job_name() == "ps") cluster.join();
    while (seconds_since(t0) < 60) scatter_add(b, i64({1, 2, 1}), Tensor(1.f));
  } catch (const UnavailableError& e) {
    survive(cluster, e.what(), seconds_since(t0));
  }
  EXPECT(false);
}

// ps task 1 dies before the tasks create a variable together: the
// creation (collective) raises naming it rather than waiting for it.
void die_in_create(Cluster& cluster) {
  if (cluster.rank() == 1) {
    std::fprintf(stderr, "[rank 1] killing itself before a creation, as the test asks\n");
    raise(SIGKILL);
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
    Variable a(Tensor::zeros(DType::kFloat, {64, 8}), {.name = "a"});
  } catch (const UnavailableError& e) {
    EXPECT(std::string(e.what()).find("creating \"a\"") != std::string::npos);
    survive(cluster, e.what(), seconds_since(t0));
  }
  EXPECT(false);
}

// worker task 1 dies holding ps task 0's exclusive lock (an assign), as
// worker task 0 keeps updating a variable there: worker 0's lock request
// can never be granted, and its lock watchdog ends it within seconds with
// the error naming the dead task; the ps tasks notice in join().
void die_holding_lock(Cluster& cluster) {
  DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
  Variable a(Tensor::zeros(DType::kFloat, {64, 8}), {.name = "a"});  // ps 0
  if (cluster.is_chief()) Session().run(std::vector<Op>{a.initializer()});
  cluster.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  if (cluster.rank() == 3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    internal::set_epoch_locked_hook([](int lock_type, int) {
      if (lock_type != MPI_LOCK_EXCLUSIVE) return;
      std::fprintf(stderr, "[rank 3] killing itself holding ps task 0's lock, as the test asks\n");
      raise(SIGKILL);
    });
    a.assign(Tensor::zeros(DType::kFloat, {64, 8}));
  }
  try {
    if (cluster.job_name() == "ps") cluster.join();
    while (seconds_since(t0) < 60) scatter_add(a, i64({1, 2, 1}), Tensor(1.f));
  } catch (const UnavailableError& e) {
    const std::string error = e.what();
    // Worker 0 waits on the dead task's lock: its error names that task.
    // A ps task notices whichever worker exits first in join(): the dead
    // one, or worker 0 once its watchdog has ended it (on a loaded machine
    // that can come first).
    const bool names_dead = error.find("task /job:worker/task:1 (rank 3") != std::string::npos;
    const bool names_ended = error.find("task /job:worker/task:0 (rank 2") != std::string::npos;
    EXPECT(names_dead || (cluster.job_name() == "ps" && names_ended));
    cluster.shutdown();
    std::fprintf(stderr, "[rank %d] survivor %s after %.1f s: %s\n", g_rank,
                 g_failures ? "FAILED" : "ok", seconds_since(t0), error.c_str());
    std::this_thread::sleep_for(std::chrono::seconds(2));
    std::_Exit(g_failures ? 1 : 0);
  }
  EXPECT(false);
}

}  // namespace

int run_failure(const std::string& mode, const std::string& dir) {
  Cluster cluster({.ps_tasks = 2});
  if (mode == "die_in_save") die_in_save(cluster, dir);
  if (mode == "die_in_op") die_in_op(cluster);
  if (mode == "die_in_create") die_in_create(cluster);
  if (mode == "die_holding_lock") die_holding_lock(cluster);
  return finish(&cluster);
}

}  // namespace varstate::mpi_test
