// Random fills of 256 MiB and 1 GiB float32 (uniform, normal, truncated
// normal) on the CPU and the GPU, against the same-run write bandwidth
// (host memset / cudaMemset of the same byte count).
//   fill  the kernel writing a preallocated tensor (as torch's in-place
//         uniform_/normal_): the generator's own speed
//   op    the public op (random_uniform(...)): allocation included, as
//         torch.rand / torch.randn
// Both count the bytes written once. bench/compare_torch_random.py measures
// PyTorch (and cuRAND through CuPy) on the same sizes.
#include "bench_util.h"
#include "kernels/cpu/random.h"
#include "varstate/device_manager.h"
#include "varstate/placement.h"
#include "varstate/random_ops.h"
#ifdef VARSTATE_HAVE_CUDA
#include "kernels/cuda/random.h"
#endif

namespace varstate::bench {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr uint64_t kSeed = 87654321, kSeed2 = 1;

enum class Dist {
  kUniform,
  kNormal,
  kTruncated
};

void args(benchmark::internal::Benchmark* b) {
  for (int64_t mib : sizes_mib({256, 1024}, {16, 64})) b->Arg(mib);
  b->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
}

void fill(Dist dist, Device& device, float* out, int64_t n) {
  if (device.is_cpu()) {
    switch (dist) {
      case Dist::kUniform:
        return kernels::cpu::random_uniform<float>(out, n, 0, kSeed, kSeed2, 0.f, 1.f);
      case Dist::kNormal:
        return kernels::cpu::random_normal<float>(out, n, 0, kSeed, kSeed2, 0.f, 1.f);
      case Dist::kTruncated:
        return kernels::cpu::truncated_normal<float>(out, n, 0, kSeed, kSeed2, 0.f, 1.f);
    }
  }
#ifdef VARSTATE_HAVE_CUDA
  cudaStream_t s = device.stream();
  switch (dist) {
    case Dist::kUniform:
      return kernels::cuda::random_uniform<float>(out, n, 0, kSeed, kSeed2, 0.f, 1.f, s);
    case Dist::kNormal:
      return kernels::cuda::random_normal<float>(out, n, 0, kSeed, kSeed2, 0.f, 1.f, s);
    case Dist::kTruncated:
      return kernels::cuda::truncated_normal<float>(out, n, 0, kSeed, kSeed2, 0.f, 1.f, s);
  }
#endif
}

Tensor op(Dist dist, int64_t n) {
  switch (dist) {
    case Dist::kUniform:
      return random_uniform({n}, {.seed = 1});
    case Dist::kNormal:
      return random_normal({n}, {.seed = 1});
    case Dist::kTruncated:
      break;
  }
  return truncated_normal({n}, {.seed = 1});
}

void random_bench(benchmark::State& state, Device* device, Dist dist, bool in_place) {
  const size_t bytes = static_cast<size_t>(state.range(0) * kMiB);
  const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
  const bool cpu = device->is_cpu();
  const double limit =
      cpu ? limit_gbps(Limit::kHostMemset, bytes) : limit_gbps(Limit::kDeviceMemset, bytes, device);
  DeviceScope scope(device->name());
  Tensor out = Tensor::zeros(DType::kFloat, {n}, *device);  // touched: no page faults in `fill`
  const int reps = cpu ? 1 : 5;
  run_timed(state, static_cast<double>(bytes), limit, reps, cpu ? nullptr : device, [&] {
    if (in_place) {
      fill(dist, *device, static_cast<float*>(out.raw_data()), n);
    } else {
      out = Tensor();  // release before allocating the next, as a training loop would
      out = op(dist, n);
    }
  });
}

Device* cpu() { return &DeviceManager::instance().cpu(); }

#define VARSTATE_RANDOM_BENCH(name, dist)                                                \
  void BM_cpu_##name##_fill(benchmark::State& s) { random_bench(s, cpu(), dist, true); } \
  void BM_cpu_##name##_op(benchmark::State& s) { random_bench(s, cpu(), dist, false); }  \
  void BM_gpu_##name##_fill(benchmark::State& s) {                                       \
    if (Device* g = gpu_or_skip(s)) random_bench(s, g, dist, true);                      \
  }                                                                                      \
  void BM_gpu_##name##_op(benchmark::State& s) {                                         \
    if (Device* g = gpu_or_skip(s)) random_bench(s, g, dist, false);                     \
  }                                                                                      \
  BENCHMARK(BM_cpu_##name##_fill)->Apply(args);                                          \
  BENCHMARK(BM_cpu_##name##_op)->Apply(args);                                            \
  BENCHMARK(BM_gpu_##name##_fill)->Apply(args);                                          \
  BENCHMARK(BM_gpu_##name##_op)->Apply(args);

VARSTATE_RANDOM_BENCH(random_uniform, Dist::kUniform)
VARSTATE_RANDOM_BENCH(random_normal, Dist::kNormal)
VARSTATE_RANDOM_BENCH(truncated_normal, Dist::kTruncated)
#undef VARSTATE_RANDOM_BENCH

}  // namespace
}  // namespace varstate::bench
