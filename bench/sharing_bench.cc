// Sharing variables:
//   get_variable_reuse/N/hot   get_variable lookups of existing variables in
//                          a reusing scope with N variables in the graph,
//                          always among the same 1,000 names (a fixed
//                          working set): lookups_per_s should not fall as N
//                          grows (O(1) in the number of variables);
//   get_variable_reuse/N/cold  uniform over all N names: also pays the cache
//                          misses of a working set that grows with N.
//   partitioned_scatter_add/<dev>
//                          scatter_add of M = 65,536 uniform int64 rows into
//                          a 4,000,000 x 64 float32 embedding: through a
//                          PartitionedVariable of 4 parts spread over the
//                          devices (round_robin_gpus(): the GPUs, or the
//                          CPU), and directly on one unpartitioned variable,
//                          timed alternately in the same run.
//                          ratio_vs_unpartitioned = partitioned rows/s /
//                          unpartitioned rows/s (target >= 0.9).
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "varstate/device_manager.h"
#include "varstate/gather.h"
#include "varstate/gradient.h"
#include "varstate/partitioned_variable.h"
#include "varstate/placement.h"
#include "varstate/scatter.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

namespace varstate::bench {
namespace {

void BM_get_variable_reuse(benchmark::State& state) {
  reset_default_graph();
  const int64_t n = state.range(0);
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    names.push_back("layer" + std::to_string(i % 100) + "_v" + std::to_string(i));
  {
    auto model = variable_scope("model");
    for (const auto& name : names) {
      get_variable(name, {.shape = TensorShape{1}, .initializer = zeros_initializer()});
    }
  }
  auto model = variable_scope("model", {.reuse = true});
  std::mt19937_64 rng(7);
  const bool hot = state.range(1) == 1;
  const uint64_t span = hot ? 1000 : static_cast<uint64_t>(n);
  std::vector<size_t> order(4096);
  for (auto& i : order) i = static_cast<size_t>(rng() % span);
  if (hot) {
    // The same 1,000 names, spread over the table.
    for (auto& i : order) i = static_cast<size_t>(i * static_cast<uint64_t>(n) / 1000);
  }
  state.SetLabel(hot ? "hot" : "cold");
  size_t k = 0;
  for (auto _ : state) {
    GetVariableResult v = get_variable(names[order[k++ & 4095]]);
    benchmark::DoNotOptimize(&v);
  }
  state.counters["lookups_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void partitioned_scatter_add(benchmark::State& state, bool gpu) {
  auto& dm = DeviceManager::instance();
  Device* device = gpu ? gpu_or_skip(state) : &dm.cpu();
  if (!device) return;
  reset_default_graph();
  const int64_t rows = quick_run() ? 1'000'000 : 4'000'000, width = 64,
                m = 65'536;  // quick: varstate bench
  std::optional<Variable> whole;
  {
    DeviceScope on(device->name());
    whole.emplace(get_variable(
        "whole", {.shape = TensorShape{rows, width}, .initializer = zeros_initializer()}));
  }
  std::optional<PartitionedVariable> parts;
  {
    DeviceScope spread(round_robin_gpus());
    parts.emplace(get_variable("emb", {.shape = TensorShape{rows, width},
                                       .initializer = zeros_initializer(),
                                       .partitioner = fixed_size_partitioner(4)}));
  }
  Session sess;
  sess.run(global_variables_initializer());
  std::mt19937_64 rng(20261124);
  std::vector<int64_t> idx(static_cast<size_t>(m));
  for (auto& i : idx) i = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
  Tensor indices = Tensor::from_vector<int64_t>(idx);
  Tensor updates = Tensor::filled(DType::kFloat, {m, width}, Tensor(0.5f), *device);
  if (gpu) indices = indices.to(*device);
  const int reps = 4;
  auto time = [&](const std::function<void()>& body) {
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) body();
    if (gpu) device->synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // One untimed call each: first-touch costs stay out of the figures.
  scatter_add(*whole, indices, updates);
  parts->scatter_add(indices, updates);
  if (gpu) device->synchronize();
  double t_whole = 0, t_parts = 0;
  for (auto _ : state) {
    t_whole += time([&] { scatter_add(*whole, indices, updates); });
    const double s = time([&] { parts->scatter_add(indices, updates); });
    t_parts += s;
    state.SetIterationTime(s);
  }
  const double updates_done =
      static_cast<double>(state.iterations()) * reps * static_cast<double>(m);
  state.counters["Mrows_per_s_partitioned"] = updates_done / t_parts / 1e6;
  state.counters["Mrows_per_s_unpartitioned"] = updates_done / t_whole / 1e6;
  state.counters["ratio_vs_unpartitioned"] = t_whole / t_parts;
  state.counters["parts"] = static_cast<double>(parts->size());
}

// The backward pass of an embedding lookup on a partitioned table of the
// main job's shape (50,000 x 16, as `varstate demo`'s user table):
// gather_gradients splits a batch's ids and gradient rows by part
// (TensorFlow's embedding_lookup gradient). Arguments: parts, ids.
void BM_partitioned_gather_gradients(benchmark::State& state) {
  reset_default_graph();
  const int64_t parts = state.range(0), n = state.range(1), rows = 50'000, width = 16;
  const PartitionedVariable table =
      get_variable("table", {.shape = TensorShape{rows, width},
                             .initializer = zeros_initializer(),
                             .partitioner = fixed_size_partitioner(parts)});
  std::mt19937_64 rng(20261201);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (auto& i : idx) i = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
  const Tensor ids = Tensor::from_vector<int64_t>(idx);
  const Tensor grads =
      Tensor::filled(DType::kFloat, {n, width}, Tensor(0.5f), DeviceManager::instance().cpu());
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<GradientAndVariable> g = gather_gradients(table, ids, grads);
    benchmark::DoNotOptimize(g.data());
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  state.counters["ns_per_id"] =
      seconds * 1e9 / (static_cast<double>(state.iterations()) * static_cast<double>(n));
}

void BM_partitioned_scatter_add_cpu(benchmark::State& s) { partitioned_scatter_add(s, false); }
void BM_partitioned_scatter_add_gpu(benchmark::State& s) { partitioned_scatter_add(s, true); }

BENCHMARK(BM_get_variable_reuse)->ArgsProduct({{1'000, 10'000, 100'000}, {1, 0}});
BENCHMARK(BM_partitioned_gather_gradients)
    ->ArgNames({"parts", "ids"})
    ->ArgsProduct({{2, 4, 8, 16, 64}, {8'192, 65'536}});
BENCHMARK(BM_partitioned_scatter_add_cpu)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10);
BENCHMARK(BM_partitioned_scatter_add_gpu)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20);

}  // namespace
}  // namespace varstate::bench
