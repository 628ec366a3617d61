// Reads of a variable through its caching device: after 0 updates the
// cached copy is returned as is; after 1 update it is refreshed (a copy of
// the variable). Reported: time per read, and for the refreshing read the
// copy bandwidth as a ratio of the same-run copy limit.
#include "bench_util.h"
#include "runtime/variable_internal.h"
#include "varstate/device_manager.h"
#include "varstate/placement.h"
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

BENCHMARK(BM_cpu_cached_read_no_update)->Apply(args);
BENCHMARK(BM_cpu_cached_read_after_update)->Apply(args);
BENCHMARK(BM_gpu_cached_read_no_update)->Apply(args);
BENCHMARK(BM_gpu_cached_read_after_update)->Apply(args);

}  // namespace
}  // namespace varstate::bench
