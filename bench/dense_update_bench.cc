// Dense updates and host<->device transfers on float32 tensors of 4 MiB,
// 64 MiB and 1 GiB, against same-run copy limits.
//   assign      moves 2n bytes (read value, write target)
//   assign_add  moves 3n bytes (read both, write target)
#include "bench_util.h"
#include "varstate/dense_update.h"
#include "varstate/device_manager.h"

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

void update_bench(benchmark::State& state, Device* device, bool add) {
  const size_t bytes = static_cast<size_t>(state.range(0) * kMiB);
  const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
  Tensor target = Tensor::zeros(DType::kFloat, {n}, *device);
  Tensor value = Tensor::zeros(DType::kFloat, {n}, *device);
  double limit = device->is_cpu() ? limit_gbps(Limit::kHostMemcpy, bytes)
                                  : limit_gbps(Limit::kDeviceCopy, bytes, device);
  // The limit copy moves 2n bytes; so does assign; assign_add moves 3n.
  double moved = (add ? 3.0 : 2.0) * static_cast<double>(bytes);
  run_timed(state, moved, limit, reps(bytes), device->is_cpu() ? nullptr : device, [&] {
    if (add) {
      assign_add(target, value);
    } else {
      assign(target, value);
    }
  });
}

void BM_cpu_assign(benchmark::State& s) {
  update_bench(s, &DeviceManager::instance().cpu(), false);
}
void BM_cpu_assign_add(benchmark::State& s) {
  update_bench(s, &DeviceManager::instance().cpu(), true);
}
void BM_gpu_assign(benchmark::State& s) {
  if (Device* g = gpu_or_skip(s)) update_bench(s, g, false);
}
void BM_gpu_assign_add(benchmark::State& s) {
  if (Device* g = gpu_or_skip(s)) update_bench(s, g, true);
}

// Tensor::to() between host and GPU: pageable host tensors, staged.
void transfer_bench(benchmark::State& state, bool to_device) {
  Device* gpu = gpu_or_skip(state);
  if (!gpu) return;
  auto& cpu = DeviceManager::instance().cpu();
  const size_t bytes = static_cast<size_t>(state.range(0) * kMiB);
  const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
  Tensor host = Tensor::zeros(DType::kFloat, {n}, cpu);
  Tensor dev = Tensor::zeros(DType::kFloat, {n}, *gpu);
  double limit = limit_gbps(to_device ? Limit::kHostToDevice : Limit::kDeviceToHost, bytes, gpu);
  run_timed(state, static_cast<double>(bytes), limit, reps(bytes) / 2 + 1, gpu, [&] {
    if (to_device) {
      copy_bytes(*gpu, dev.raw_data(), cpu, host.raw_data(), bytes);
    } else {
      copy_bytes(cpu, host.raw_data(), *gpu, dev.raw_data(), bytes);
    }
  });
}

void BM_host_to_device(benchmark::State& s) { transfer_bench(s, true); }
void BM_device_to_host(benchmark::State& s) { transfer_bench(s, false); }

BENCHMARK(BM_cpu_assign)->Apply(args);
BENCHMARK(BM_cpu_assign_add)->Apply(args);
BENCHMARK(BM_gpu_assign)->Apply(args);
BENCHMARK(BM_gpu_assign_add)->Apply(args);
BENCHMARK(BM_host_to_device)->Apply(args);
BENCHMARK(BM_device_to_host)->Apply(args);

}  // namespace
}  // namespace varstate::bench
