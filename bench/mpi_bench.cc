// Multi-process benchmark (distributed/), run by mpirun with
// 2 ps tasks and the rest workers:
//   mpirun --oversubscribe -np 6 build/bench/bench_mpi [OUT.json] [MACHINE]
// 1. scatter_add throughput: every worker adds batches of random rows into
//    a 2-part embedding whose parts sit on the two ps tasks, against the
//    same batches applied in one process to a local 2-part embedding.
// 2. remote read bandwidth: Variable::value() of a variable on ps task 0,
//    against a raw MPI_Get of the same bytes from a plain window on the same
//    task, in the same run; and a cached read of an unchanged variable.
// Rank 2 (the first worker) writes the JSON.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "varstate/varstate.h"

using namespace varstate;

namespace {

constexpr int64_t kRows = 100'000;
constexpr int64_t kWidth = 64;
constexpr int64_t kBatch = 256;
constexpr int kBatches = 100;             // per worker
constexpr int64_t kReadFloats = 1 << 21;  // 8 MiB
constexpr int kReads = 40;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<Tensor> batches(int seed, int count) {
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::uniform_int_distribution<int64_t> row(0, kRows - 1);
  std::vector<Tensor> out;
  for (int b = 0; b < count; ++b) {
    std::vector<int64_t> ids(kBatch);
    for (auto& id : ids) id = row(rng);
    out.push_back(Tensor::from_vector<int64_t>(ids));
  }
  return out;
}

// Seconds each measurement took; throughput figures are derived in the JSON.
struct Timings {
  double remote_scatter = 0, local_scatter = 0;          // every worker's batches
  double remote_read = 0, raw_get = 0, cached_read = 0;  // kReads reads each
};

// 1. Remote scatter_add: every worker adds its batches into `emb` (parts on
// the ps tasks) at once. Seconds from the first to the last, on every rank.
double time_remote_scatter(Cluster& cluster, PartitionedVariable& emb, const Tensor& updates) {
  const std::vector<Tensor> mine = batches(cluster.rank(), kBatches);
  cluster.barrier();
  const double t0 = now();
  if (cluster.job_name() == "worker") {
    for (const Tensor& ids : mine) emb.scatter_add(ids, updates);
  }
  cluster.barrier();
  return now() - t0;
}

// The same batches, every worker's, applied in one process to a local
// 2-part embedding. Seconds (run by the reporter only).
double time_local_scatter(Cluster& cluster, PartitionedVariable& emb_local, const Tensor& updates) {
  std::vector<std::vector<Tensor>> all;
  for (int r = 2; r < cluster.size(); ++r) all.push_back(batches(r, kBatches));
  const double t0 = now();
  for (const auto& b : all) {
    for (const Tensor& ids : b) emb_local.scatter_add(ids, updates);
  }
  return now() - t0;
}

// 2. Reads from ps task 0: Variable::value() of `big` against a raw MPI_Get
// of as many bytes from `raw`, interleaved so that both see the same load
// on the shared machine; then cached reads of the unchanged `big_cached`.
// (Run by the reporter only.)
void time_reads(const Variable& big, const Variable& big_cached, MPI_Win raw, Timings& t) {
  Tensor v = big.value();
  std::vector<float> buffer(kReadFloats);
  for (int i = 0; i < kReads; ++i) {
    double t0 = now();
    v = big.value();
    t.remote_read += now() - t0;
    t0 = now();
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, raw);
    MPI_Get(buffer.data(), kReadFloats * 4, MPI_BYTE, 0, 0, kReadFloats * 4, MPI_BYTE, raw);
    MPI_Win_unlock(0, raw);
    t.raw_get += now() - t0;
  }
  v = big_cached.value();
  const double t0 = now();
  for (int i = 0; i < kReads; ++i) v = big_cached.value();
  t.cached_read = now() - t0;
}

// The results as JSON, to stdout and to `out`.
void write_json(const std::string& out, const std::string& machine, int ranks, int workers,
                const Timings& t) {
  const double remote_rows = static_cast<double>(workers) * kBatches * kBatch;
  const double bytes = static_cast<double>(kReadFloats) * 4 * kReads;
  char json[4096];
  std::snprintf(
      json, sizeof json,
      "{\n  \"benchmark\": \"mpi\",\n  \"machine\": \"%s\",\n  \"ranks\": %d,\n  \"ps_tasks\": "
      "2,\n"
      "  \"workers\": %d,\n  \"embedding\": [%lld, %lld],\n  \"batch_rows\": %lld,\n"
      "  \"batches_per_worker\": %d,\n"
      "  \"remote_scatter_add_rows_per_s\": %.0f,\n  \"local_scatter_add_rows_per_s\": %.0f,\n"
      "  \"remote_over_local\": %.3f,\n"
      "  \"read_bytes\": %lld,\n  \"remote_read_GBps\": %.3f,\n  \"raw_mpi_get_GBps\": %.3f,\n"
      "  \"remote_read_over_raw_get\": %.3f,\n  \"cached_unchanged_reads_per_s\": %.0f\n}\n",
      machine.c_str(), ranks, workers, static_cast<long long>(kRows),
      static_cast<long long>(kWidth), static_cast<long long>(kBatch), kBatches,
      remote_rows / t.remote_scatter, remote_rows / t.local_scatter,
      t.local_scatter / t.remote_scatter, static_cast<long long>(kReadFloats * 4),
      bytes / t.remote_read / 1e9, bytes / t.raw_get / 1e9, t.raw_get / t.remote_read,
      kReads / t.cached_read);
  std::fputs(json, stdout);
  std::ofstream(out) << json;
}

// The measurements on a running cluster, which it then shuts down; rank 2
// (the first worker) reports.
void run(Cluster& cluster, const std::string& out, const std::string& machine) {
  const bool reporter = cluster.rank() == 2;
  const Tensor updates =
      Tensor::filled(DType::kFloat, {kBatch, kWidth}, Tensor(1.f), DeviceManager::instance().cpu());
  PartitionedVariable emb_local =
      get_variable("emb_local", {.shape = {kRows, kWidth},
                                 .initializer = zeros_initializer(),
                                 .partitioner = fixed_size_partitioner(2)});
  DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
  PartitionedVariable emb = get_variable("emb", {.shape = {kRows, kWidth},
                                                 .initializer = zeros_initializer(),
                                                 .partitioner = fixed_size_partitioner(2)});
  Variable big(Tensor::zeros(DType::kFloat, {kReadFloats}), {.name = "big"});  // ps task 0
  Variable big_cached(Tensor::zeros(DType::kFloat, {kReadFloats}),
                      {.caching_device = "/device:CPU:0", .name = "big_cached"});  // ps task 1
  // A plain window of the same bytes on ps task 0, for raw MPI_Get.
  float* raw_base = nullptr;
  MPI_Win raw;
  const MPI_Aint raw_bytes = cluster.rank() == 0 ? kReadFloats * 4 : 0;
  MPI_Win_allocate(raw_bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &raw_base, &raw);
  if (cluster.is_chief()) {
    Session().run(std::vector<Op>{emb.initializer(), big.initializer(), big_cached.initializer(),
                                  emb_local.initializer()});
  }
  cluster.barrier();

  Timings t;
  t.remote_scatter = time_remote_scatter(cluster, emb, updates);
  if (reporter) t.local_scatter = time_local_scatter(cluster, emb_local, updates);
  cluster.barrier();
  if (reporter) time_reads(big, big_cached, raw, t);  // the others wait
  cluster.barrier();
  const bool exact = emb.as_tensor().to_host().num_elements() == kRows * kWidth;
  if (reporter) {
    write_json(out, machine, cluster.size(), cluster.num_tasks("worker"), t);
    if (!exact) std::fprintf(stderr, "unexpected embedding size\n");
  }
  MPI_Win_free(&raw);
  cluster.shutdown();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "bench/results/mpi-vm-2cpu-nogpu.json";
  const std::string machine =
      argc > 2
          ? argv[2]
          : "2-core CPU VM, no GPU, OpenMPI 4.1.4, shared-memory transport, ranks oversubscribed";
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  {
    Cluster cluster({.ps_tasks = 2});
    run(cluster, out, machine);
  }
  MPI_Finalize();
  return 0;
}
