// Where splitting a CPU kernel over the thread pool starts to pay: each op
// at doubling sizes, run alternately on the calling thread alone (every
// threshold of kernels/cpu/eigen_support.h set out of reach) and split
// over the pool (every threshold 0), medians of interleaved repetitions,
// so that both sides see the same load. Prints, per op, the time of both
// and their ratio at each size, and the crossover: the smallest size from
// which the pool wins at every larger size. The thresholds of
// ParallelThresholds come from these crossovers.
//   bench_threading [OUT.json] [MACHINE]
// A plain timed program (not Google Benchmark): the interleaving is the
// point. Run it with the default pool (VARSTATE_CPU_THREADS unset).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/common.h"
#include "kernels/cpu/dense_update.h"
#include "kernels/cpu/eigen_support.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gather.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/random.h"
#include "kernels/cpu/scatter.h"
#include "timing.h"

namespace cpu = varstate::kernels::cpu;
using varstate::bench::median;
using varstate::bench::seconds_of_call;
using varstate::kernels::BinaryGeometry;
using varstate::kernels::BinaryOp;
using varstate::kernels::DenseUpdateOp;
using varstate::kernels::ScatterOp;

namespace {

constexpr int64_t kWidth = 16;           // scatter/gather rows of 64 bytes
constexpr int64_t kTableRows = 1 << 20;  // a 64 MiB table
constexpr int kReps = 15;

// One op at one size: `run` does the work of `work` units (the threshold's).
struct Case {
  std::string op;
  std::string unit;
  int64_t work;
  std::function<void()> run;
};

void set_all(int64_t value) { cpu::parallel_thresholds() = cpu::ParallelThresholds::all(value); }

struct Buffers {
  std::vector<float> table = std::vector<float>(kTableRows * kWidth, 1.0f);
  std::vector<float> a, b, out;
  std::vector<int64_t> indices;
  explicit Buffers(int64_t max_elems) : a(max_elems, 1.0f), b(max_elems, 2.0f), out(max_elems) {
    std::mt19937_64 gen(7);
    std::uniform_int_distribution<int64_t> row(0, kTableRows - 1);
    indices.resize(max_elems / kWidth + 1);
    for (auto& i : indices) i = row(gen);
  }
};

std::vector<Case> cases_for(Buffers& buf, int64_t elems) {
  const int64_t m = std::max<int64_t>(1, elems / kWidth);  // scatter/gather updates
  const int64_t row_bytes = kWidth * sizeof(float);
  std::vector<Case> cases;
  for (ScatterOp op : {ScatterOp::kUpdate, ScatterOp::kAdd}) {
    const std::string name = op == ScatterOp::kUpdate ? "scatter_update" : "scatter_add";
    cases.push_back({name, "bytes", m * (3 * row_bytes + 8), [&buf, op, m] {
                       cpu::scatter<float, int64_t>(op, buf.table.data(), kTableRows, kWidth,
                                                    buf.indices.data(), m, buf.a.data(), false,
                                                    true);
                     }});
  }
  cases.push_back({"gather", "bytes", 2 * m * row_bytes, [&buf, m, row_bytes] {
                     cpu::gather_rows<int64_t>(buf.table.data(), row_bytes, buf.indices.data(), m,
                                               buf.out.data());
                   }});
  cases.push_back({"dense_assign_add", "bytes", 3 * elems * 4, [&buf, elems] {
                     cpu::dense_update<float>(DenseUpdateOp::kAdd, buf.a.data(), buf.b.data(),
                                              elems, false);
                   }});
  cases.push_back({"random_uniform", "elements", elems, [&buf, elems] {
                     cpu::random_uniform<float>(buf.out.data(), elems, 0, 1, 2, 0.0f, 1.0f);
                   }});
  cases.push_back({"random_normal", "elements", 3 * elems, [&buf, elems] {
                     cpu::random_normal<float>(buf.out.data(), elems, 0, 1, 2, 0.0f, 1.0f);
                   }});
  // The bandwidth limit: a plain copy split the same way (dense threshold).
  // Its pool speedup bounds what any bandwidth-bound op can gain from a
  // second thread on this machine.
  cases.push_back({"memcpy_limit", "bytes", 2 * elems * 4, [&buf, elems] {
                     cpu::for_ranges(elems, 1024, 2 * elems * 4,
                                     cpu::parallel_thresholds().dense_update_bytes,
                                     [&buf](int64_t first, int64_t last) {
                                       std::memcpy(buf.out.data() + first, buf.a.data() + first,
                                                   static_cast<size_t>(last - first) * 4);
                                     });
                   }});
  cases.push_back({"elementwise_add", "bytes", 3 * elems * 4, [&buf, elems] {
                     BinaryGeometry g;
                     g.n = elems;
                     cpu::arithmetic<float>(BinaryOp::kAdd, buf.a.data(), buf.b.data(),
                                            buf.out.data(), g);
                   }});
  return cases;
}

struct Point {
  int64_t work;
  double serial_s, pool_s;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string out_path = argc > 1 ? argv[1] : "";
  const std::string machine = argc > 2 ? argv[2] : "";
  const int64_t kMinElems = 1 << 10, kMaxElems = 1 << 24;
  Buffers buf(kMaxElems);
  const cpu::ParallelThresholds saved = cpu::parallel_thresholds();
  std::vector<std::string> order;
  std::vector<std::vector<Point>> points;
  for (int64_t elems = kMinElems; elems <= kMaxElems; elems *= 2) {
    std::vector<Case> cases = cases_for(buf, elems);
    // More calls per timing for small sizes, so each timing spans >= ~1 ms.
    const int calls = static_cast<int>(std::clamp<int64_t>((int64_t{1} << 18) / elems, 1, 256));
    for (size_t c = 0; c < cases.size(); ++c) {
      if (points.size() <= c) {
        order.push_back(cases[c].op);
        points.emplace_back();
      }
      auto timed = [&] {
        for (int k = 0; k < calls; ++k) cases[c].run();
      };
      std::vector<double> serial, pool;
      for (int r = 0; r < kReps; ++r) {
        set_all(std::numeric_limits<int64_t>::max());
        serial.push_back(seconds_of_call(timed) / calls);
        set_all(0);
        pool.push_back(seconds_of_call(timed) / calls);
      }
      points[c].push_back({cases[c].work, median(serial), median(pool)});
    }
  }
  cpu::parallel_thresholds() = saved;

  double load[3] = {};
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    std::fclose(f);
  }
  std::string json = "{\n  \"machine\": \"" + machine + "\",\n  \"pool_threads\": " +
                     std::to_string(cpu::eigen_device().numThreads()) +
                     ",\n  \"loadavg_after\": " + std::to_string(load[0]) + ",\n  \"ops\": [\n";
  for (size_t c = 0; c < points.size(); ++c) {
    // Crossover: the smallest work from which the pool is faster at every size.
    int64_t crossover = -1;
    for (size_t k = points[c].size(); k-- > 0;) {
      if (points[c][k].pool_s >= points[c][k].serial_s) break;
      crossover = points[c][k].work;
    }
    std::printf("%s (crossover: %lld)\n%14s %12s %12s %8s\n", order[c].c_str(),
                static_cast<long long>(crossover), "work", "serial_us", "pool_us", "speedup");
    json += "    {\"op\": \"" + order[c] + "\", \"crossover\": " + std::to_string(crossover) +
            ", \"points\": [";
    for (size_t k = 0; k < points[c].size(); ++k) {
      const Point& p = points[c][k];
      std::printf("%14lld %12.1f %12.1f %8.2f\n", static_cast<long long>(p.work), p.serial_s * 1e6,
                  p.pool_s * 1e6, p.serial_s / p.pool_s);
      json += std::string(k ? ", " : "") + "{\"work\": " + std::to_string(p.work) +
              ", \"serial_us\": " + std::to_string(p.serial_s * 1e6) +
              ", \"pool_us\": " + std::to_string(p.pool_s * 1e6) + "}";
    }
    json += std::string("]}") + (c + 1 < points.size() ? "," : "") + "\n";
  }
  json += "  ]\n}\n";
  std::printf("load average after the run: %.2f\n", load[0]);
  if (!out_path.empty()) std::ofstream(out_path) << json;
  return 0;
}
