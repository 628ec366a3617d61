// Reads of a variable through its caching device: after 0 updates the
// cached copy is returned as is; after 1 update it is refreshed (a copy of
// the variable). Reported: time per read, and for the refreshing read the
// copy bandwidth as a ratio of the same-run copy limit.
//
// BM_initializer_rss: resident memory for N MiB of initializer-made
// variables (get_variable + glorot_uniform, then the initializers), as a
// ratio of N (rss_per_byte; TensorFlow: 1.035 for 1 GiB; goal <= 1.05).
#include <fstream>
#include <string>

#include "bench_util.h"
#include "runtime/variable_access.h"
#include "varstate/device_manager.h"
#include "varstate/initializers.h"
#include "varstate/placement.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

namespace varstate::bench {
namespace {

constexpr int64_t kMiB = 1 << 20;

void cached_read(benchmark::State& state, bool gpu_variable, int updates_per_read) {
  auto& dm = DeviceManager::instance();
  Device* device = gpu_variable ? gpu_or_skip(state) : &dm.cpu();
  if (!device) return;
  reset_default_graph();
  const size_t bytes = static_cast<size_t>(state.range(0) * kMiB);
  const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
  DeviceScope scope(device->name());
  Variable v(Tensor::zeros(DType::kFloat, {n}, *device), {.caching_device = "/cpu:0"});
  Session().run(v.initializer());
  v.value();
  double limit = gpu_variable ? limit_gbps(Limit::kDeviceToHost, bytes, device)
                              : limit_gbps(Limit::kHostMemcpy, bytes);
  uint64_t copies_before = v.cache_copies();
  int64_t reads = 0;
  // A refresh moves the whole variable once (host copy: read + write).
  double moved =
      updates_per_read > 0 ? (gpu_variable ? 1.0 : 2.0) * static_cast<double>(bytes) : 0.0;
  run_timed(state, moved > 0 ? moved : 1.0, limit, 10, gpu_variable ? device : nullptr, [&] {
    if (updates_per_read > 0) internal::mark_updated(v);  // an update without touching the bytes
    benchmark::DoNotOptimize(v.value().raw_data());
    ++reads;
  });
  state.counters["copies_per_read"] = static_cast<double>(v.cache_copies() - copies_before) /
                                      static_cast<double>(std::max<int64_t>(reads, 1));
  if (updates_per_read == 0) {
    state.counters.erase("GBps");
    state.counters.erase("ratio");
    state.counters.erase("limit_GBps");
  }
}

void BM_cpu_cached_read_no_update(benchmark::State& s) { cached_read(s, false, 0); }
void BM_cpu_cached_read_after_update(benchmark::State& s) { cached_read(s, false, 1); }
void BM_gpu_cached_read_no_update(benchmark::State& s) { cached_read(s, true, 0); }
void BM_gpu_cached_read_after_update(benchmark::State& s) { cached_read(s, true, 1); }

void args(benchmark::internal::Benchmark* b) {
  b->Arg(sizes_mib({64}, {16})[0])->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(20);
}

// VmRSS of this process, bytes.
int64_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  int64_t kib = 0;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> kib;
      break;
    }
  }
  return kib * 1024;
}

void BM_initializer_rss(benchmark::State& state) {
  const int64_t bytes = state.range(0) * kMiB;
  const int64_t rows = 1024, cols = 16 * kMiB / (rows * int64_t{sizeof(float)});  // 16 MiB each
  for (auto _ : state) {
    reset_default_graph();
    DeviceScope scope("/cpu:0");
    const int64_t before = resident_bytes();
    {
      for (int64_t i = 0; i < bytes / (16 * kMiB); ++i) {
        get_variable(
            "w" + std::to_string(i),
            {.shape = {rows, cols}, .initializer = glorot_uniform_initializer({.seed = 1})});
      }
      Session().run(global_variables_initializer());
    }
    state.counters["rss_per_byte"] =
        static_cast<double>(resident_bytes() - before) / static_cast<double>(bytes);
    reset_default_graph();
  }
}
BENCHMARK(BM_initializer_rss)->Arg(256)->Arg(1024)->Iterations(1)->Unit(benchmark::kMillisecond);

BENCHMARK(BM_cpu_cached_read_no_update)->Apply(args);
BENCHMARK(BM_cpu_cached_read_after_update)->Apply(args);
BENCHMARK(BM_gpu_cached_read_no_update)->Apply(args);
BENCHMARK(BM_gpu_cached_read_after_update)->Apply(args);

}  // namespace
}  // namespace varstate::bench
