// Element-wise c = a + b on float32 tensors of 4 MiB, 64 MiB and 1 GiB,
// CPU and GPU, against the same-run copy limit. a + b moves 3n bytes (read
// a and b, write c); the limit copy is counted the same way (read + write).
// The timed call includes allocating c, as every user of operator+ pays.
//
// BM_cpu_elementwise/OP/DTYPE: add, multiply, divide and maximum of two
// tensors of 64M elements (16M on a quick run) in float32, bfloat16 and
// float16; BM_cpu_cast/FROM/TO: a cast of 64M elements between the
// floating types; BM_cpu_assign_add/DTYPE: a += b in place, 64M elements.
// Each against the copy limit for its bytes (elements
// times the bytes read and written per element). bench/compare_math_ops.py
// runs them against TensorFlow's and PyTorch's same ops.
#include <functional>
#include <string>
#include <utility>

#include "bench_util.h"
#include "varstate/dense_update.h"
#include "varstate/device_manager.h"
#include "varstate/math_ops.h"
#include "varstate/tensor.h"

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

int64_t dtype_case_elements() { return quick_run() ? int64_t{16} << 20 : int64_t{64} << 20; }

// Values in [0.5, 2): every op's result is a normal number.
Tensor operand(DType dtype, int64_t n, float offset) {
  Tensor t = Tensor::zeros(DType::kFloat, {n});
  float* p = t.data<float>();
  for (int64_t i = 0; i < n; ++i)
    p[i] = 0.5f + static_cast<float>((i * 7919) % 1499) / 1000.f + offset;
  return t.cast(dtype);
}

void run_dtype_case(benchmark::State& state, int64_t n, size_t bytes_per_element,
                    const std::function<void()>& call) {
  const size_t bytes = static_cast<size_t>(n) * bytes_per_element;
  // Two untimed calls: the first results' blocks come fresh from the OS (a
  // page fault per page); from the third call on, a result reuses the
  // block the call before last freed (device/cpu_device.cc's cache), as in
  // a training loop.
  call();
  call();
  // The limit copies the same bytes: half read, half written.
  run_timed(state, static_cast<double>(bytes), limit_gbps(Limit::kHostMemcpy, bytes / 2), 1,
            nullptr, call);
}

const bool registered = [] {
  const std::pair<const char*, Tensor (*)(const Tensor&, const Tensor&)> ops[] = {
      {"add", add}, {"multiply", multiply}, {"divide", divide}, {"maximum", maximum}};
  const DType floats[] = {DType::kFloat, DType::kBFloat16, DType::kHalf};
  for (const auto& [op_name, op] : ops) {
    for (DType dtype : floats) {
      const std::string name =
          std::string("BM_cpu_elementwise/") + op_name + "/" + std::string(dtype_name(dtype));
      benchmark::RegisterBenchmark(name.c_str(),
                                   [op = op, dtype](benchmark::State& state) {
                                     const int64_t n = dtype_case_elements();
                                     const Tensor a = operand(dtype, n, 0.f);
                                     const Tensor b = operand(dtype, n, 0.25f);
                                     Tensor c;
                                     run_dtype_case(state, n, 3 * dtype_size(dtype),
                                                    [&] { c = op(a, b); });
                                   })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(5);
    }
  }
  for (DType dtype : floats) {
    const std::string name = "BM_cpu_assign_add/" + std::string(dtype_name(dtype));
    benchmark::RegisterBenchmark(name.c_str(),
                                 [dtype](benchmark::State& state) {
                                   const int64_t n = dtype_case_elements();
                                   Tensor a = operand(dtype, n, 0.f);
                                   const Tensor b = operand(dtype, n, 0.f);
                                   run_dtype_case(state, n, 3 * dtype_size(dtype),
                                                  [&] { assign_add(a, b); });
                                 })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(5);
  }
  const std::pair<DType, DType> casts[] = {
      {DType::kFloat, DType::kBFloat16}, {DType::kBFloat16, DType::kFloat},
      {DType::kFloat, DType::kHalf},     {DType::kHalf, DType::kFloat},
      {DType::kFloat, DType::kDouble},   {DType::kDouble, DType::kFloat}};
  for (const auto& [from, to] : casts) {
    const std::string name =
        "BM_cpu_cast/" + std::string(dtype_name(from)) + "/" + std::string(dtype_name(to));
    benchmark::RegisterBenchmark(name.c_str(),
                                 [from = from, to = to](benchmark::State& state) {
                                   const int64_t n = dtype_case_elements();
                                   const Tensor a = operand(from, n, 0.f);
                                   Tensor c;
                                   run_dtype_case(state, n, dtype_size(from) + dtype_size(to),
                                                  [&] { c = a.cast(to); });
                                 })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(5);
  }
  return true;
}();

}  // namespace
}  // namespace varstate::bench
