// Element-wise c = a + b on float32 tensors of 4 MiB, 64 MiB and 1 GiB,
// CPU and GPU, against the same-run copy limit. a + b moves 3n bytes (read
// a and b, write c); the limit copy is counted the same way (read + write).
// The timed call includes allocating c, as every user of operator+ pays.
#include "bench_util.h"
#include "varstate/device_manager.h"
#include "varstate/math_ops.h"

namespace varstate::bench {
namespace {

constexpr int64_t kMiB = 1 << 20;

void args(benchmark::internal::Benchmark* b) {
  for (int64_t mib : sizes_mib({4, 64, 1024}, {1, 4, 16, 64})) b->Arg(mib);
  b->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
}

int reps(size_t bytes) {
  return bytes >= (size_t{256} << 20) ? 2 : bytes >= (size_t{32} << 20) ? 10 : 100;
}

void add_bench(benchmark::State& state, Device* device) {
  const size_t bytes = static_cast<size_t>(state.range(0) * kMiB);
  const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
  Tensor a = Tensor::zeros(DType::kFloat, {n}, *device);
  Tensor b = Tensor::zeros(DType::kFloat, {n}, *device);
  double limit = device->is_cpu() ? limit_gbps(Limit::kHostMemcpy, bytes)
                                  : limit_gbps(Limit::kDeviceCopy, bytes, device);
  Tensor c;
  run_timed(state, 3.0 * static_cast<double>(bytes), limit, reps(bytes),
            device->is_cpu() ? nullptr : device, [&] { c = a + b; });
}

void BM_cpu_add(benchmark::State& s) { add_bench(s, &DeviceManager::instance().cpu()); }
void BM_gpu_add(benchmark::State& s) {
  if (Device* g = gpu_or_skip(s)) add_bench(s, g);
}

BENCHMARK(BM_cpu_add)->Apply(args);
BENCHMARK(BM_gpu_add)->Apply(args);

}  // namespace
}  // namespace varstate::bench
