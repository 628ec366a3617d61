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
//
// BM_cpu_floor_division/OP/DTYPE/DIVISOR: floordiv or floormod of 64M
// elements (16M quick) of int32, int64 (hashes of both signs) or float32
// (floordiv only), by one scalar (1,000,003: ids into buckets) or by a
// tensor of divisors of both signs, against the copy limit for the bytes
// read and written.
//
// BM_cpu_matmul/DTYPE/N: an N x N matrix product (N 256, 1024, 2048; 2048
// left out on a quick run) in float32, float64, bfloat16 and float16,
// against the same-run multiply-add limit: the pool's threads each running
// independent fused multiply-adds on registers, as wide as the GEMM build
// this CPU runs (cpu_isa_with_fma), in float (float64: in double). The 16-bit
// products are summed in float, so their limit is float's.
#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "bench_util.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/parallel.h"
#include "varstate/dense_update.h"
#include "varstate/device_manager.h"
#include "varstate/math_ops.h"
#include "varstate/random_ops.h"
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

// Dividends of both signs spread over the whole type: the top bits of i
// times 2^64 / golden ratio (as bench/compare_math_ops.py builds them);
// divisors ((i * 7919) % 1999) - 999, 0 replaced by 1000. float32: the
// integers' values (int32's scaled by 2^-16).
Tensor division_operand(DType dtype, int64_t n, bool divisor) {
  Tensor t = Tensor::zeros(dtype, {n});
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    int64_t d = (i * 7919) % 1999 - 999;
    if (d == 0) d = 1000;
    if (dtype == DType::kInt64) {
      t.data<int64_t>()[i] = divisor ? d : static_cast<int64_t>(h);
    } else if (dtype == DType::kInt32) {
      t.data<int32_t>()[i] = divisor ? static_cast<int32_t>(d) : static_cast<int32_t>(h >> 32);
    } else {
      t.data<float>()[i] = divisor ? static_cast<float>(d)
                                   : static_cast<float>(static_cast<int32_t>(h >> 32)) / 65536.f;
    }
  }
  return t;
}

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

// Multiply-adds a thread runs: kFmaRounds rounds of 12 independent chains
// (enough to cover the latency of two FMA pipes), one vector each. x < 1
// and y small: the chains converge to y / (1 - x), normal numbers. Each
// variant returns the sum of its lanes (kept in a sink).
constexpr int kChains = 12;
constexpr int64_t kFmaRounds = int64_t{1} << 22;

#define VARSTATE_FMA_CHAINS(NAME, TARGET, V, SET1, FMA, WIDTH)      \
  TARGET double NAME() {                                            \
    const V x = SET1(0.5), y = SET1(1e-3);                          \
    V acc[kChains];                                                 \
    for (int c = 0; c < kChains; ++c) acc[c] = x;                   \
    for (int64_t r = 0; r < kFmaRounds; ++r) {                      \
      for (int c = 0; c < kChains; ++c) acc[c] = FMA(acc[c], x, y); \
    }                                                               \
    alignas(64) double lanes[kChains * 16];                         \
    double out = 0;                                                 \
    for (int c = 0; c < kChains; ++c) {                             \
      std::memcpy(lanes, &acc[c], sizeof(V));                       \
      for (int i = 0; i < WIDTH; ++i) out += lanes[i];              \
    }                                                               \
    return out;                                                     \
  }
#define VARSTATE_TARGET(T) __attribute__((target(T)))
#define VARSTATE_MUL_ADD_PS(a, b, c) _mm_add_ps(_mm_mul_ps(a, b), c)
#define VARSTATE_MUL_ADD_PD(a, b, c) _mm_add_pd(_mm_mul_pd(a, b), c)
// (The lanes' bits are summed as doubles: only the sink reads them.)
VARSTATE_FMA_CHAINS(fma_avx512_ps, VARSTATE_TARGET("avx512f,fma"), __m512, _mm512_set1_ps,
                    _mm512_fmadd_ps, 8)
VARSTATE_FMA_CHAINS(fma_avx2_ps, VARSTATE_TARGET("avx2,fma"), __m256, _mm256_set1_ps,
                    _mm256_fmadd_ps, 4)
VARSTATE_FMA_CHAINS(fma_sse_ps, , __m128, _mm_set1_ps, VARSTATE_MUL_ADD_PS, 2)
VARSTATE_FMA_CHAINS(fma_avx512_pd, VARSTATE_TARGET("avx512f,fma"), __m512d, _mm512_set1_pd,
                    _mm512_fmadd_pd, 8)
VARSTATE_FMA_CHAINS(fma_avx2_pd, VARSTATE_TARGET("avx2,fma"), __m256d, _mm256_set1_pd,
                    _mm256_fmadd_pd, 4)
VARSTATE_FMA_CHAINS(fma_sse_pd, , __m128d, _mm_set1_pd, VARSTATE_MUL_ADD_PD, 2)
#undef VARSTATE_FMA_CHAINS
#undef VARSTATE_TARGET
#undef VARSTATE_MUL_ADD_PS
#undef VARSTATE_MUL_ADD_PD

// Flops of one thread's run (2 a lane a multiply-add), its result to sink.
template <typename E>
double fma_run(kernels::cpu::Isa isa, std::atomic<double>& sink) {
  using kernels::cpu::Isa;
  constexpr bool kFloat = std::is_same_v<E, float>;
  const int bytes = isa == Isa::kAvx512 ? 64 : isa == Isa::kAvx2 ? 32 : 16;
  double out = 0;
  switch (isa) {
    case Isa::kAvx512:
      out = kFloat ? fma_avx512_ps() : fma_avx512_pd();
      break;
    case Isa::kAvx2:
      out = kFloat ? fma_avx2_ps() : fma_avx2_pd();
      break;
    case Isa::kBaseline:
      out = kFloat ? fma_sse_ps() : fma_sse_pd();
      break;
  }
  sink.store(out, std::memory_order_relaxed);
  return 2.0 * (bytes / static_cast<double>(sizeof(E))) * kChains * static_cast<double>(kFmaRounds);
}

// GFLOP/s of the multiply-add limit in E (float or double) on as many
// threads as the pool has (VARSTATE_CPU_THREADS, else one a core): the
// calling thread and pool threads (run_shards), best of 3.
template <typename E>
double fma_limit_gflops() {
  const kernels::cpu::Isa isa = kernels::cpu::cpu_isa_with_fma();
  const int64_t threads = kernels::cpu::pool_threads();
  std::atomic<double> sink{0};
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    std::atomic<double> flops{0};
    auto shard = [&](int64_t) {
      const double f = fma_run<E>(isa, sink);
      double seen = flops.load();
      while (!flops.compare_exchange_weak(seen, seen + f)) {
      }
    };
    const auto t0 = std::chrono::steady_clock::now();
    kernels::cpu::run_shards(threads, shard);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, flops.load() / s / 1e9);
  }
  return best;
}

void matmul_case(benchmark::State& state, DType dtype, int64_t n) {
  const Tensor a = random_normal({n, n}, {.seed = 1}).cast(dtype);
  const Tensor b = random_normal({n, n}, {.seed = 2}).cast(dtype);
  Tensor c = matmul(a, b);  // untimed: the result's block, the pool awake
  c = matmul(a, b);
  const double limit =
      dtype == DType::kDouble ? fma_limit_gflops<double>() : fma_limit_gflops<float>();
  const int reps = n <= 256 ? 50 : n <= 1024 ? 3 : 1;
  double total = 0;
  int64_t calls = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) c = matmul(a, b);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    state.SetIterationTime(s);
    total += s;
    ++calls;
  }
  const double gflops =
      2.0 * static_cast<double>(n * n * n) / (total / static_cast<double>(calls)) / 1e9;
  state.counters["GFLOPps"] = gflops;
  state.counters["limit_GFLOPps"] = limit;
  state.counters["ratio"] = gflops / limit;
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
  for (const char* op_name : {"floordiv", "floormod"}) {
    for (DType dtype : {DType::kInt32, DType::kInt64, DType::kFloat}) {
      for (bool by_scalar : {true, false}) {
        if (dtype == DType::kFloat && (by_scalar || std::string(op_name) == "floormod")) continue;
        const std::string name = std::string("BM_cpu_floor_division/") + op_name + "/" +
                                 std::string(dtype_name(dtype)) +
                                 (by_scalar ? "/scalar" : "/tensor");
        const bool mod = std::string(op_name) == "floormod";
        benchmark::RegisterBenchmark(name.c_str(),
                                     [dtype, by_scalar, mod](benchmark::State& state) {
                                       const int64_t n = dtype_case_elements();
                                       const Tensor a = division_operand(dtype, n, false);
                                       const Tensor b = by_scalar
                                                            ? Tensor(int64_t{1000003}).cast(dtype)
                                                            : division_operand(dtype, n, true);
                                       Tensor c;
                                       const size_t bytes = (by_scalar ? 2 : 3) * dtype_size(dtype);
                                       run_dtype_case(state, n, bytes, [&] {
                                         c = mod ? varstate::mod(a, b) : floordiv(a, b);
                                       });
                                     })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond)
            ->Iterations(5);
      }
    }
  }
  for (DType dtype : {DType::kFloat, DType::kDouble, DType::kBFloat16, DType::kHalf}) {
    for (int64_t n : {256, 1024, 2048}) {
      if (quick_run() && n > 1024) continue;
      const std::string name =
          "BM_cpu_matmul/" + std::string(dtype_name(dtype)) + "/" + std::to_string(n);
      benchmark::RegisterBenchmark(
          name.c_str(), [dtype, n](benchmark::State& state) { matmul_case(state, dtype, n); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(5);
    }
  }
  return true;
}();

}  // namespace
}  // namespace varstate::bench
