// The cost of dirty-row tracking (runtime/dirty_rows.h) for the
// CPU scatter: scatter_update of 65,536 rows of 16 floats (--width) into a
// 1M-row table, uniform and Zipf-like ids. The two sides alternate block by
// block (4 calls each), so a loaded machine's slow spells hit both: each
// side's time is the median of its blocks, divided by 4, and the cost the
// median over the block pairs of marked / plain - 1.
//   bench_dirty_marks [--calls N] [--width FLOATS] [--out OUT.json] [--machine NAME]
// Cases:
//  - variable_*_append: the public scatter_update on a Variable no saver
//    tracks against one an incremental saver tracks and takes every 4 calls
//    (the log never overflows): the cost of logging the rows. The take's
//    own time (fold of 4 calls' entries + reading the bitmap) is reported
//    apart, as take_s, and is not in marked_s.
//  - variable_*_no_takes: the same with no take after the first: every 4th
//    call's append hands a full log to a pool thread to fold into the
//    bitmap (or, with one pool thread, folds it itself once, after which
//    the kernel marks bytes of rows under 256 bytes until a take that never
//    comes).
//  - parts4_*_append / parts4_*_no_takes: the same on a PartitionedVariable
//    of 4 parts (its scatter writes every part in one kernel call), every
//    part tracked and taken every 4 calls, or never again.
//  - log: DirtyRows alone: ns per appended index, and ns per entry of a fold.
// A plain timed program (not Google Benchmark): the interleaving is the
// point.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "runtime/dirty_rows.h"
#include "timing.h"
#include "varstate/device_manager.h"
#include "varstate/graph.h"
#include "varstate/partitioned_variable.h"
#include "varstate/scatter.h"
#include "varstate/session.h"
#include "varstate/variable.h"

using varstate::bench::median;
using varstate::bench::seconds_of_call;

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
  return varstate::bench::random_positions(kRows, kUpdates, zipf, seed);
}

struct Result {
  std::string name;
  double plain_s;      // per call
  double marked_s;     // per call
  double take_s = -1;  // per take (the append cases), else -1
  // The median over adjacent block pairs of marked / plain - 1: a slow
  // spell of a shared machine slows both blocks of a pair.
  double cost = 0;
};

constexpr int kBlock = 4;

// Times blocks of kBlock calls of plain() and of marked(), `calls` / kBlock
// pairs of them, after_marked() (untimed) after each pair: medians per
// call. The pairs take turns at going first (bench::alternating), so that
// the block timed right after after_marked() (a take reads the bitmap and
// the log, and evicts the scatters' rows from the caches) is plain's in
// half of them and marked's in the other half. (Until 2026-12-02 plain
// always came first, and the append cases read up to 5 % low.)
Result interleave(
    const std::string& name, int calls, const std::function<void()>& plain,
    const std::function<void()>& marked, const std::function<void()>& after_marked = [] {}) {
  auto block = [](const std::function<void()>& fn) {
    return [&fn] {
      for (int c = 0; c < kBlock; ++c) fn();
    };
  };
  auto [a, b] = varstate::bench::alternating(std::max(calls / kBlock, 1), block(plain),
                                             block(marked), after_marked);
  std::vector<double> ratio;
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] /= kBlock;
    b[i] /= kBlock;
    ratio.push_back(b[i] / a[i] - 1);
  }
  return {name, median(a), median(b), -1, median(ratio)};
}

// scatter_update through the API on an untracked and a tracked Variable,
// the tracked one taken every kBlock calls (`takes`) or never again.
Result variable_case(const std::string& name, int calls, int64_t width,
                     const std::vector<int64_t>& ids, bool takes) {
  using namespace varstate;
  Graph graph;
  auto make = [&](const char* var_name) {
    Variable v(Tensor::zeros(DType::kFloat, {kRows, width}), {.name = var_name, .graph = &graph});
    Session().run(v.initializer());
    return v;
  };
  Variable untracked = make("untracked"), tracked = make("tracked");
  internal::DirtyRows& dirty = internal::dirty_rows(tracked);
  uint64_t generation = dirty.take(kRows, 0).generation;  // as an incremental save's base does
  const Tensor indices = Tensor::from_vector<int64_t>(ids);
  const Tensor updates = Tensor::filled(DType::kFloat, {kUpdates, width}, Tensor(2.0f),
                                        DeviceManager::instance().cpu());
  std::vector<double> take_times;
  Result r = interleave(
      name, calls, [&] { scatter_update(untracked, indices, updates); },
      [&] { scatter_update(tracked, indices, updates); },
      [&] {
        if (!takes) return;
        take_times.push_back(
            seconds_of_call([&] { generation = dirty.take(kRows, generation).generation; }));
      });
  if (takes) r.take_s = median(take_times);
  return r;
}

// The same on a PartitionedVariable of kParts parts of kRows / kParts rows:
// every part tracked, all taken together every kBlock calls (as an
// incremental save takes them) or never again.
Result partitioned_case(const std::string& name, int calls, int64_t width,
                        const std::vector<int64_t>& ids, bool takes) {
  using namespace varstate;
  Graph graph;
  auto make = [&](const std::string& var_name) {
    std::vector<Variable> parts;
    for (int k = 0; k < kParts; ++k) {
      parts.emplace_back(
          Tensor::zeros(DType::kFloat, {kRows / kParts, width}),
          VariableOptions{.name = var_name + "/part_" + std::to_string(k), .graph = &graph});
      Session().run(parts.back().initializer());
    }
    return PartitionedVariable(var_name, TensorShape({kRows, width}), DType::kFloat,
                               std::move(parts), {kParts, 1});
  };
  PartitionedVariable untracked = make("untracked"), tracked = make("tracked");
  std::vector<uint64_t> generations;
  for (const Variable& part : tracked.variables()) {
    generations.push_back(internal::dirty_rows(part).take(kRows / kParts, 0).generation);
  }
  const Tensor indices = Tensor::from_vector<int64_t>(ids);
  const Tensor updates = Tensor::filled(DType::kFloat, {kUpdates, width}, Tensor(2.0f),
                                        DeviceManager::instance().cpu());
  std::vector<double> take_times;
  Result r = interleave(
      name, calls, [&] { untracked.scatter_update(indices, updates); },
      [&] { tracked.scatter_update(indices, updates); },
      [&] {
        if (!takes) return;
        take_times.push_back(seconds_of_call([&] {
          for (int k = 0; k < kParts; ++k) {
            const Variable& part = tracked.variables()[static_cast<size_t>(k)];
            generations[static_cast<size_t>(k)] =
                internal::dirty_rows(part).take(kRows / kParts, generations[k]).generation;
          }
        }));
      });
  if (takes) r.take_s = median(take_times);
  return r;
}

// DirtyRows alone, fed kUpdates ids per record: the calls that fill the log
// (append only) against those that fold a full log first.
std::vector<Result> log_cases(int calls, const std::vector<int64_t>& ids) {
  using namespace varstate;
  // Folds on this thread: back-to-back appends would otherwise wait for the
  // pool thread's fold of the previous log, and time that instead.
  internal::DirtyRows::set_background_folds_for_testing(false);
  internal::DirtyRows dirty;
  dirty.take(kRows, 0);
  const Tensor indices = Tensor::from_vector<int64_t>(ids);
  const int64_t per_fold = internal::DirtyRows::log_capacity(kRows) / kUpdates;
  std::vector<double> append, fold;
  for (int c = 0; c < calls; ++c) {
    const uint64_t folds = dirty.folds();
    const double s = seconds_of_call([&] { dirty.record(kRows, indices); });
    (dirty.folds() != folds ? fold : append).push_back(s);
  }
  const double append_s = median(append);
  const double fold_s = fold.empty() ? append_s : median(fold);
  internal::DirtyRows::set_background_folds_for_testing(std::nullopt);
  return {{"log_append_ns_per_index", 0, append_s / kUpdates * 1e9},
          {"log_fold_ns_per_entry", 0,
           (fold_s - append_s) / static_cast<double>(per_fold * kUpdates) * 1e9}};
}

int run(int argc, char** argv) {
  const int calls = std::stoi(arg(argc, argv, "--calls", "401"));
  const std::string out = arg(argc, argv, "--out", "");
  const std::string machine = arg(argc, argv, "--machine", "unnamed");
  const int64_t kWidth = std::stoll(arg(argc, argv, "--width", "16"));
  std::vector<Result> results;
  for (const bool zipf : {false, true}) {
    const std::vector<int64_t> ids = make_ids(zipf, 7);
    const std::string dist = zipf ? "zipf" : "uniform";
    results.push_back(partitioned_case("parts4_" + dist + "_append", calls, kWidth, ids, true));
    results.push_back(partitioned_case("parts4_" + dist + "_no_takes", calls, kWidth, ids, false));
    results.push_back(variable_case("variable_" + dist + "_append", calls, kWidth, ids, true));
    results.push_back(variable_case("variable_" + dist + "_no_takes", calls, kWidth, ids, false));
    if (!zipf) {
      for (const Result& r : log_cases(calls, ids)) results.push_back(r);
    }
  }
  std::string json = "{\n  \"bench\": \"dirty_marks\", \"machine\": \"" + machine +
                     "\",\n  \"rows\": " + std::to_string(kRows) +
                     ", \"row_width\": " + std::to_string(kWidth) +
                     ", \"updates\": " + std::to_string(kUpdates) +
                     ", \"calls\": " + std::to_string(calls) + ",\n  \"cases\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    char buf[320];
    if (r.plain_s == 0) {  // a log case: one figure
      std::snprintf(buf, sizeof buf, "%s\n    {\"case\": \"%s\", \"value\": %.4f}",
                    i == 0 ? "" : ",", r.name.c_str(), r.marked_s);
    } else {
      std::snprintf(buf, sizeof buf,
                    "%s\n    {\"case\": \"%s\", \"plain_s\": %.7f, \"marked_s\": %.7f, "
                    "\"marks_cost\": %.4f%s}",
                    i == 0 ? "" : ",", r.name.c_str(), r.plain_s, r.marked_s, r.cost,
                    r.take_s < 0 ? "" : (", \"take_s\": " + std::to_string(r.take_s)).c_str());
    }
    json += buf;
  }
  json += "\n  ]\n}\n";
  std::fputs(json.c_str(), stdout);
  if (!out.empty()) std::ofstream(out) << json;
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
