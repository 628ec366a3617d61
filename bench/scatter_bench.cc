// Sparse row updates (scatter_update / scatter_add / scatter_mul) of an
// [N, D] table through the public API, CPU and GPU, against the same-run
// copy bandwidth.
//   bytes moved = 3 * M * D * elem (read updates, read and write rows)
//               + M * index bytes
// Counters: GBps, limit_GBps, ratio (see bench_util.h) and Mupdates_per_s
// (million update rows per second).
//
// Configurations (name: scatter/<dev>/<op>/<path>/N<rows>xD<width>/M<updates>/
// <indices>/<index dtype>/<dtype>[/nocheck]):
//   main     N = 1,000,000, D in {64, 256}, M in {65,536, 1,048,576},
//            uniform and Zipf(1.05) indices, update/add/mul, atomic and
//            deterministic paths (the CPU has one path: "serial-order");
//   sweep    D in {1, 4, 32, 128, 512} with int32 and int64 indices;
//   bf16     bfloat16 tables; f16 float16 tables (the CPU only);
//   onerow   every update on row 0 (worst-case contention);
//   nocheck  the kernel alone, without the bounds check the API runs,
//            next to the same API call ("checked"): their ratio is the cost
//            of checking and dispatch (the CPU kernel now checks in its
//            first pass, so on the CPU both check);
//   tf       (VARSTATE_BENCH_SET=tf, instead of the sets above) the shapes
//            of bench/compare_tf_ops.py: [1,000,000, 16] and [100,000, 64],
//            M in {1,024, 65,536, 1,048,576}, uniform and Zipf, every
//            scatter op and gather (tf.gather: reads M rows into a new
//            tensor; bytes moved 2 * M * D * elem).
// On the CPU the default set keeps to tables of at most 256 MiB and skips
// D = 256 (a 2-core machine runs it in a few minutes); set
// VARSTATE_BENCH_FULL=1 for the whole set. The GPU always runs it all.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "kernels/cpu/scatter.h"
#include "varstate/device_manager.h"
#include "varstate/gather.h"
#include "varstate/graph.h"
#include "varstate/placement.h"
#include "varstate/scatter.h"
#include "varstate/session.h"
#include "varstate/variable.h"
#ifdef VARSTATE_HAVE_CUDA
#include "kernels/cuda/scatter.h"
#endif

namespace varstate::bench {
namespace {

enum class Dist {
  kUniform,
  kZipf,
  kOneRow
};
enum class BenchOp {
  kUpdate,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMin,
  kMax,
  kGather
};

struct Config {
  bool gpu = false;
  BenchOp op = BenchOp::kAdd;
  bool deterministic = false;
  int64_t rows = 1'000'000;
  int64_t width = 64;
  int64_t updates = 65'536;
  Dist dist = Dist::kUniform;
  DType index_dtype = DType::kInt64;
  DType dtype = DType::kFloat;
  // The kernel alone ("nocheck"), or the API call named "checked" to pair with it.
  bool nocheck = false;
  bool checked = false;
};

const char* op_label(BenchOp op) {
  switch (op) {
    case BenchOp::kUpdate:
      return "update";
    case BenchOp::kAdd:
      return "add";
    case BenchOp::kSub:
      return "sub";
    case BenchOp::kMul:
      return "mul";
    case BenchOp::kDiv:
      return "div";
    case BenchOp::kMin:
      return "min";
    case BenchOp::kMax:
      return "max";
    case BenchOp::kGather:
      break;
  }
  return "gather";
}
const char* dist_label(Dist d) {
  return d == Dist::kUniform ? "uniform" : d == Dist::kZipf ? "zipf1.05" : "onerow";
}

std::string name_of(const Config& c) {
  const bool gather = c.op == BenchOp::kGather;
  std::string s = std::string(gather ? "gather/" : "scatter/") + (c.gpu ? "gpu/" : "cpu/") +
                  (gather ? "" : op_label(c.op) + std::string("/")) +
                  (c.gpu ? (c.deterministic ? "deterministic" : "atomic") : "serial-order") + "/N" +
                  std::to_string(c.rows) + "xD" + std::to_string(c.width) + "/M" +
                  std::to_string(c.updates) + "/" + dist_label(c.dist) + "/" +
                  (c.index_dtype == DType::kInt32 ? "i32" : "i64") + "/" +
                  (c.dtype == DType::kFloat  ? "f32"
                   : c.dtype == DType::kHalf ? "f16"
                                             : "bf16");
  return c.nocheck ? s + "/nocheck" : c.checked ? s + "/checked" : s;
}

// Row numbers drawn from Zipf(s) over `rows` ranks (inverse CDF), ranks
// scattered over the table by a multiplicative permutation so that hot rows
// are not neighbours.
std::vector<int64_t> draw_indices(Dist dist, int64_t rows, int64_t m, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<int64_t> out(m);
  if (dist == Dist::kOneRow) return out;
  if (dist == Dist::kUniform) {
    std::uniform_int_distribution<int64_t> any(0, rows - 1);
    for (auto& x : out) x = any(gen);
    return out;
  }
  static std::vector<double> cdf;
  static int64_t cdf_rows = 0;
  if (cdf_rows != rows) {
    cdf.assign(rows, 0.0);
    double sum = 0;
    for (int64_t k = 0; k < rows; ++k) cdf[k] = sum += std::pow(double(k + 1), -1.05);
    for (auto& c : cdf) c /= sum;
    cdf_rows = rows;
  }
  std::uniform_real_distribution<double> u(0.0, 1.0);
  constexpr uint64_t kPrime = 2'654'435'761ull;
  for (auto& x : out) {
    const int64_t rank = std::lower_bound(cdf.begin(), cdf.end(), u(gen)) - cdf.begin();
    x = static_cast<int64_t>((static_cast<uint64_t>(std::min(rank, rows - 1)) * kPrime) %
                             static_cast<uint64_t>(rows));
  }
  return out;
}

// Update values: small random numbers; for mul factors 1 +- 2^-10 so that
// products neither overflow nor stop changing the row.
Tensor make_updates(const Config& c, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<float> v(c.updates * c.width);
  if (c.op == BenchOp::kMul || c.op == BenchOp::kDiv) {
    for (auto& x : v) x = gen() % 2 ? 1.f + 1.f / 1024 : 1.f - 1.f / 1024;
  } else {
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (auto& x : v) x = d(gen);
  }
  Tensor t = Tensor::from_vector<float>(v, {c.updates, c.width});
  return c.dtype == DType::kFloat ? t : t.cast(c.dtype);
}

Tensor apply(BenchOp op, Variable& v, const Tensor& i, const Tensor& u, const UpdateOptions& o) {
  switch (op) {
    case BenchOp::kUpdate:
      return scatter_update(v, i, u, o);
    case BenchOp::kAdd:
      return scatter_add(v, i, u, o);
    case BenchOp::kSub:
      return scatter_sub(v, i, u, o);
    case BenchOp::kMul:
      return scatter_mul(v, i, u, o);
    case BenchOp::kDiv:
      return scatter_div(v, i, u, o);
    case BenchOp::kMin:
      return scatter_min(v, i, u, o);
    case BenchOp::kMax:
      return scatter_max(v, i, u, o);
    case BenchOp::kGather:
      return gather(v, i);
  }
  return {};
}

kernels::ScatterOp kernel_op(BenchOp op) {
  return op == BenchOp::kUpdate ? kernels::ScatterOp::kUpdate
         : op == BenchOp::kAdd  ? kernels::ScatterOp::kAdd
                                : kernels::ScatterOp::kMul;
}

// The kernel alone on the variable's buffer (float32 tables, int64 indices).
void kernel_only(const Config& c, Tensor& table, const Tensor& indices, const Tensor& updates) {
  const auto* idx = static_cast<const int64_t*>(indices.raw_data());
  auto* t = static_cast<float*>(table.raw_data());
  const auto* u = static_cast<const float*>(updates.raw_data());
  if (!c.gpu) {
    kernels::cpu::scatter<float, int64_t>(kernel_op(c.op), t, c.rows, c.width, idx, c.updates, u,
                                          false, c.deterministic);
    return;
  }
#ifdef VARSTATE_HAVE_CUDA
  Device& device = table.device();
  const kernels::cuda::ScratchAllocator scratch{
      [&device](size_t bytes) { return device.allocate(bytes); },
      [&device](void* ptr) { device.deallocate(ptr); }};
  kernels::cuda::scatter<float, int64_t>(kernel_op(c.op), t, c.rows, c.width, idx, c.updates, u,
                                         false, c.deterministic, nullptr, scratch, device.stream());
#endif
}

void run(benchmark::State& state, const Config& c) {
  Device* device = &DeviceManager::instance().cpu();
  if (c.gpu && !(device = gpu_or_skip(state))) return;
  constexpr int kIndexSets = 4;  // fresh indices for consecutive calls
  std::vector<Tensor> indices, updates;
  for (int k = 0; k < kIndexSets; ++k) {
    Tensor i = Tensor::from_vector<int64_t>(draw_indices(c.dist, c.rows, c.updates, 7 + k));
    if (c.index_dtype == DType::kInt32) i = i.cast(DType::kInt32);
    indices.push_back(i.to(*device));
    updates.push_back(make_updates(c, 11 + k).to(*device));
  }
  Graph graph;
  DeviceScope scope(device->name());
  const float initial = c.op == BenchOp::kMul || c.op == BenchOp::kDiv ? 1.f : 0.f;
  Variable table(
      [&] {
        return Tensor::filled(c.dtype, {c.rows, c.width}, Tensor(initial), *device);
      },
      {.name = "emb",
       .dtype = c.dtype,
       .expected_shape = TensorShape{c.rows, c.width},
       .graph = &graph});
  Session().run(table.initializer());
  Tensor buffer = table.ref();

  const double elem = static_cast<double>(dtype_size(c.dtype));
  const double moved = (c.op == BenchOp::kGather ? 2.0 : 3.0) * c.updates * c.width * elem +
                       double(c.updates) * dtype_size(c.index_dtype);
  const size_t copy_bytes = static_cast<size_t>(c.updates * c.width * elem);
  const double limit = c.gpu ? limit_gbps(Limit::kDeviceCopy, copy_bytes, device)
                             : limit_gbps(Limit::kHostMemcpy, copy_bytes);
  const int reps = moved >= 256e6 ? 2 : moved >= 32e6 ? 5 : c.gpu ? 50 : 10;
  int call = 0;
  const UpdateOptions options{.deterministic = c.deterministic};
  auto body = [&] {
    const int k = call++ % kIndexSets;
    if (c.nocheck) {
      kernel_only(c, buffer, indices[k], updates[k]);
    } else {
      apply(c.op, table, indices[k], updates[k], options);
    }
  };
  // One untimed call per index set first (as bench/compare_tf_ops.py runs
  // each TensorFlow op once before timing it): the limit's copy above has
  // just evicted the caches, and a first call sets up the variable's marks.
  for (int k = 0; k < kIndexSets; ++k) body();
  if (c.gpu) device->synchronize();
  run_timed(state, moved, limit, reps, c.gpu ? device : nullptr, body);
  table.sync();
  state.counters["Mupdates_per_s"] = state.counters["GBps"] * 1e9 / moved * c.updates / 1e6;
}

bool full_cpu_set() {
  const char* v = std::getenv("VARSTATE_BENCH_FULL");
  return v != nullptr && std::string(v) == "1";
}

void add(const Config& c) {
  benchmark::RegisterBenchmark(name_of(c).c_str(), [c](benchmark::State& s) { run(s, c); })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(5);
}

// Quick run: the main set's three ops on a 64 MiB table, uniform indices,
// 16Ki to 256Ki updates (throughput vs batch size).
void register_quick(bool gpu) {
  for (int64_t m : {int64_t{16'384}, int64_t{65'536}, int64_t{262'144}}) {
    for (BenchOp op : {BenchOp::kUpdate, BenchOp::kAdd, BenchOp::kMul}) {
      add({.gpu = gpu, .op = op, .rows = 262'144, .width = 64, .updates = m});
    }
  }
}

// The shapes of bench/compare_tf_ops.py.
void register_tf(bool gpu) {
  for (auto [rows, width] : {std::pair<int64_t, int64_t>{1'000'000, 16}, {100'000, 64}}) {
    for (int64_t m : {int64_t{1'024}, int64_t{65'536}, int64_t{1'048'576}}) {
      for (Dist dist : {Dist::kUniform, Dist::kZipf}) {
        for (BenchOp op : {BenchOp::kUpdate, BenchOp::kAdd, BenchOp::kSub, BenchOp::kMul,
                           BenchOp::kDiv, BenchOp::kMin, BenchOp::kMax, BenchOp::kGather}) {
          add({.gpu = gpu, .op = op, .rows = rows, .width = width, .updates = m, .dist = dist});
        }
      }
    }
  }
}

bool tf_set() {
  const char* v = std::getenv("VARSTATE_BENCH_SET");
  return v != nullptr && std::string(v) == "tf";
}

void register_for(bool gpu) {
  if (tf_set()) return register_tf(gpu);
  if (quick_run()) return register_quick(gpu);
  const bool full = gpu || full_cpu_set();
  const std::vector<bool> paths = gpu ? std::vector<bool>{false, true} : std::vector<bool>{false};
  // main set
  for (int64_t width : {int64_t{64}, int64_t{256}}) {
    if (width == 256 && !full) continue;
    for (int64_t m : {int64_t{65'536}, int64_t{1'048'576}}) {
      for (Dist dist : {Dist::kUniform, Dist::kZipf}) {
        for (BenchOp op : {BenchOp::kUpdate, BenchOp::kAdd, BenchOp::kMul}) {
          for (bool det : paths) {
            add({.gpu = gpu,
                 .op = op,
                 .deterministic = det,
                 .width = width,
                 .updates = m,
                 .dist = dist});
          }
        }
      }
    }
  }
  // row-width sweep, both index dtypes; tables of <= 256 MiB on the CPU default set
  for (int64_t width : {int64_t{1}, int64_t{4}, int64_t{32}, int64_t{128}, int64_t{512}}) {
    const int64_t rows =
        full ? 1'000'000 : std::min<int64_t>(1'000'000, (int64_t{64} << 20) / width);
    for (DType index_dtype : {DType::kInt32, DType::kInt64}) {
      for (bool det : paths) {
        add({.gpu = gpu,
             .op = BenchOp::kAdd,
             .deterministic = det,
             .rows = rows,
             .width = width,
             .updates = 65'536,
             .index_dtype = index_dtype});
      }
    }
  }
  // bfloat16, worst-case contention, bounds-check cost
  for (bool det : paths) {
    for (BenchOp op : {BenchOp::kAdd, BenchOp::kMul}) {
      add({.gpu = gpu, .op = op, .deterministic = det, .dtype = DType::kBFloat16});
      if (!gpu) add({.gpu = gpu, .op = op, .deterministic = det, .dtype = DType::kHalf});
      add({.gpu = gpu, .op = op, .deterministic = det, .dist = Dist::kOneRow});
    }
    for (int64_t m : {int64_t{65'536}, int64_t{1'048'576}}) {
      for (bool nocheck : {false, true}) {
        add({.gpu = gpu,
             .op = BenchOp::kAdd,
             .deterministic = det,
             .updates = m,
             .nocheck = nocheck,
             .checked = !nocheck});
      }
    }
  }
}

const bool registered = [] {
  register_for(false);
  register_for(true);
  return true;
}();

}  // namespace
}  // namespace varstate::bench
