// The cost of dirty-row marks (runtime/dirty_rows_internal.h) in the CPU
// scatter kernel: scatter_update of 65,536 rows of 16 floats (--width) into a
// 1M-row table, the kernel with marks (as a variable's scatter runs it)
// against the kernel without, on one table and on the same table split
// into 4 parts (a partitioned variable's scatter_parts), uniform and
// Zipf-like ids. The two sides alternate call by call, so a loaded
// machine's slow spells hit both; medians of the per-call times.
//   bench_dirty_marks [--calls N] [--width FLOATS] [--out OUT.json] [--machine NAME]
// The "variable_*" cases time the public scatter_update on a Variable that
// no saver tracks (no take yet: it keeps no marks) against one that an
// incremental saver tracks: what a program pays for marks it never uses
// (nothing) and what it pays once it saves incrementally.
// A plain timed program (not Google Benchmark): the interleaving is the
// point.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/common.h"
#include "kernels/cpu/scatter.h"
#include "runtime/dirty_rows_internal.h"
#include "timing.h"
#include "varstate/device_manager.h"
#include "varstate/graph.h"
#include "varstate/scatter.h"
#include "varstate/session.h"
#include "varstate/variable.h"

namespace cpu = varstate::kernels::cpu;
using varstate::bench::median;
using varstate::bench::seconds_of_call;
using varstate::kernels::ScatterOp;

namespace {

constexpr int64_t kRows = 1 << 20;
constexpr int64_t kUpdates = 65536;
constexpr int kParts = 4;

std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  return fallback;
}

// Uniform ids, or Zipf-like (exponent 1.1) over a shuffled vocabulary.
std::vector<int64_t> make_ids(bool zipf, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids(static_cast<size_t>(kUpdates));
  if (!zipf) {
    for (auto& i : ids) i = static_cast<int64_t>(rng() % static_cast<uint64_t>(kRows));
    return ids;
  }
  std::vector<double> cdf(static_cast<size_t>(kRows));
  double sum = 0;
  for (int64_t r = 0; r < kRows; ++r) cdf[static_cast<size_t>(r)] = sum += std::pow(r + 1, -1.1);
  std::vector<int64_t> perm(static_cast<size_t>(kRows));
  for (int64_t r = 0; r < kRows; ++r) perm[static_cast<size_t>(r)] = r;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::uniform_real_distribution<double> u(0, sum);
  for (auto& i : ids) {
    const auto k = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
    i = perm[static_cast<size_t>(std::min<int64_t>(k, kRows - 1))];
  }
  return ids;
}

struct Result {
  std::string name;
  double plain_s;
  double marked_s;
};

// Alternates plain() and marked() `calls` times; medians of each.
Result interleave(const std::string& name, int calls, const std::function<void()>& plain,
                  const std::function<void()>& marked) {
  std::vector<double> a, b;
  plain();
  marked();
  for (int c = 0; c < calls; ++c) {
    a.push_back(seconds_of_call(plain));
    b.push_back(seconds_of_call(marked));
  }
  return {name, median(a), median(b)};
}

// scatter_update through the API on an untracked and a tracked Variable.
Result variable_case(const std::string& name, int calls, int64_t width,
                     const std::vector<int64_t>& ids) {
  using namespace varstate;
  Graph graph;
  auto make = [&](const char* var_name) {
    Variable v(Tensor::zeros(DType::kFloat, {kRows, width}), {.name = var_name, .graph = &graph});
    Session().run(v.initializer());
    return v;
  };
  Variable untracked = make("untracked"), tracked = make("tracked");
  internal::dirty_rows(tracked).take(kRows, 0);  // as an incremental save's base does
  const Tensor indices = Tensor::from_vector<int64_t>(ids);
  const Tensor updates = Tensor::filled(DType::kFloat, {kUpdates, width}, Tensor(2.0f),
                                        DeviceManager::instance().cpu());
  return interleave(
      name, calls, [&] { scatter_update(untracked, indices, updates); },
      [&] { scatter_update(tracked, indices, updates); });
}

int run(int argc, char** argv) {
  const int calls = std::stoi(arg(argc, argv, "--calls", "401"));
  const std::string out = arg(argc, argv, "--out", "");
  const std::string machine = arg(argc, argv, "--machine", "unnamed");
  const int64_t kWidth = std::stoll(arg(argc, argv, "--width", "16"));
  std::vector<float> table(static_cast<size_t>(kRows * kWidth), 1.0f);
  std::vector<float> updates(static_cast<size_t>(kUpdates * kWidth), 2.0f);
  std::unique_ptr<std::atomic<uint8_t>[]> marks(new std::atomic<uint8_t>[kRows]);
  std::vector<std::unique_ptr<std::atomic<uint8_t>[]>> part_marks;
  std::vector<std::atomic<uint8_t>*> part_mark_ptrs;
  std::vector<float*> parts;
  std::vector<int64_t> begin;
  for (int k = 0; k <= kParts; ++k) begin.push_back(kRows / kParts * k);
  for (int k = 0; k < kParts; ++k) {
    parts.push_back(table.data() + begin[static_cast<size_t>(k)] * kWidth);
    part_marks.emplace_back(new std::atomic<uint8_t>[kRows / kParts]);
    part_mark_ptrs.push_back(part_marks.back().get());
  }
  std::vector<Result> results;
  for (const bool zipf : {false, true}) {
    const std::vector<int64_t> ids = make_ids(zipf, 7);
    const std::string dist = zipf ? "zipf" : "uniform";
    auto whole = [&](std::atomic<uint8_t>* m) {
      return [&, m] {
        cpu::scatter<float, int64_t>(ScatterOp::kUpdate, table.data(), kRows, kWidth, ids.data(),
                                     kUpdates, updates.data(), false, true, m);
      };
    };
    results.push_back(interleave("table_" + dist, calls, whole(nullptr), whole(marks.get())));
    auto split = [&](std::atomic<uint8_t>* const* m) {
      return [&, m] {
        cpu::scatter_parts<float, int64_t>(ScatterOp::kUpdate, parts.data(), begin.data(), kParts,
                                           kWidth, ids.data(), kUpdates, updates.data(), false, m);
      };
    };
    results.push_back(
        interleave("parts4_" + dist, calls, split(nullptr), split(part_mark_ptrs.data())));
    results.push_back(variable_case("variable_" + dist, calls, kWidth, ids));
  }
  std::string json = "{\n  \"bench\": \"dirty_marks\", \"machine\": \"" + machine +
                     "\",\n  \"rows\": " + std::to_string(kRows) +
                     ", \"row_width\": " + std::to_string(kWidth) +
                     ", \"updates\": " + std::to_string(kUpdates) +
                     ", \"calls\": " + std::to_string(calls) + ",\n  \"cases\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s\n    {\"case\": \"%s\", \"plain_s\": %.7f, \"marked_s\": %.7f, "
                  "\"marks_cost\": %.4f}",
                  i == 0 ? "" : ",", r.name.c_str(), r.plain_s, r.marked_s,
                  (r.marked_s - r.plain_s) / r.plain_s);
    json += buf;
  }
  json += "\n  ]\n}\n";
  std::fputs(json.c_str(), stdout);
  if (!out.empty()) std::ofstream(out) << json;
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
