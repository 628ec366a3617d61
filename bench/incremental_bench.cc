// Incremental checkpoints against full ones, in one run (varstate/
// checkpoint_chain.h): embedding tables of --mib MiB in all (float32 rows of
// 64 elements, four tables), then
//   - full save vs delta save with 1 % and 10 % of the rows changed (time
//     and bytes on disk; best of --reps, each delta timed next to a full
//     save of the same values: the disk's speed drifts over a run);
//   - restore of base + 10 deltas (1 % each) vs restore of a full
//     checkpoint of the same values (medians of --reps interleaved pairs,
//     and the worst pair's ratio);
//   - compaction of that chain vs a full save of the same variables, with
//     sync on (both fsync every file, the default) and off (Saver's
//     {.sync = false}; compaction through the unsynced file system):
//     medians of --reps interleaved pairs, after one untimed pair;
//   - delta bytes vs the bytes of the rows it holds (ids included);
//   - the dirty rows' cost in a scatter_update of 65,536 rows: the kernel
//     with the tracked variable's log append minus without, over the call.
// The load averages at the start and the end go into the JSON.
// A plain timed program (not Google Benchmark): it prints one JSON object,
// written to --out too. Files go to --dir (default /tmp/varstate_incr_bench).
//   bench_incremental [--mib N] [--reps N] [--dir D] [--out FILE]
// With --sweep, only save time and bytes vs the fraction of rows changed
// (0.1 % to 50 %), full save vs delta save, each delta timed next to a full
// save of the same values; bench/plot_incremental_sweep.py draws it.
//   bench_incremental --sweep [--mib N] [--reps N] [--dir D] [--out FILE]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/file_system.h"
#include "checkpoint/unsynced_file_system.h"
#include "kernels/cpu/scatter.h"
#include "runtime/dirty_rows.h"
#include "timing.h"
#include "varstate/checkpoint_chain.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/saver.h"
#include "varstate/scatter.h"
#include "varstate/variables.h"

namespace varstate {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kWidth = 64;  // float32 elements per row: 256-byte rows
constexpr int kTables = 4;

double seconds(const std::function<void()>& body) {
  const auto t0 = Clock::now();
  body();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double best_of(int reps, const std::function<void()>& setup, const std::function<void()>& body) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    setup();
    best = std::min(best, seconds(body));
  }
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void remove_checkpoint(const std::string& prefix) {
  namespace fs = std::filesystem;
  const fs::path p(prefix);
  for (const auto& e : fs::directory_iterator(p.parent_path())) {
    if (e.path().filename().string().rfind(p.filename().string() + ".", 0) == 0) {
      fs::remove(e.path());
    }
  }
}

std::string load_average() {
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) != 3) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%.2f, %.2f, %.2f]", load[0], load[1], load[2]);
  return buf;
}

// Compaction of `head` into `dir` vs a full save of the session's variables
// there, sync on or off: medians of `reps` interleaved pairs.
struct CompactVsSave {
  double compact_s, full_s;
};
CompactVsSave compact_vs_save(Session& sess, const std::string& head, const std::string& dir,
                              bool sync, int reps) {
  const std::unique_ptr<FileSystem> unsynced =
      internal::unsynced_file_system(*default_file_system());
  FileSystem* fs = sync ? nullptr : unsynced.get();
  Saver saver({.max_to_keep = 0, .sync = sync});
  const std::string compacted = dir + "/compacted", saved = dir + "/saved";
  const auto [c, f] = bench::alternating(
      reps, [&] { compact_checkpoint(head, compacted, fs); },
      [&] { saver.save(sess, saved, {.write_meta_graph = false}); },
      [&] {
        remove_checkpoint(compacted);
        remove_checkpoint(saved);
      });
  return {median(c), median(f)};
}

uint64_t checkpoint_bytes(const std::string& prefix) {
  namespace fs = std::filesystem;
  uint64_t n = 0;
  const fs::path p(prefix);
  for (const auto& e : fs::directory_iterator(p.parent_path())) {
    const std::string name = e.path().filename().string();
    if (name.rfind(p.filename().string() + ".", 0) == 0 && e.path().extension() != ".meta") {
      n += e.file_size();
    }
  }
  return n;
}

struct Tables {
  std::vector<Variable> vars;
  int64_t rows = 0;  // per table
  std::mt19937_64 rng{2026};

  // Sets `fraction` of each table's rows (distinct, random) to new values;
  // returns the rows changed in all.
  int64_t change(double fraction) {
    const auto n = static_cast<int64_t>(fraction * static_cast<double>(rows));
    for (Variable& v : vars) {
      std::vector<int64_t> ids(static_cast<size_t>(rows));
      for (int64_t i = 0; i < rows; ++i) ids[static_cast<size_t>(i)] = i;
      std::shuffle(ids.begin(), ids.end(), rng);
      ids.resize(static_cast<size_t>(n));
      std::sort(ids.begin(), ids.end());
      std::vector<float> values(static_cast<size_t>(n * kWidth), static_cast<float>(rng() % 1000));
      scatter_update(v, Tensor::from_vector<int64_t>(ids, {n}),
                     Tensor::from_vector<float>(values, {n, kWidth}));
    }
    return n * kTables;
  }
};

std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  return fallback;
}

// The dirty rows' share of a CPU scatter_update of 65,536 rows of 16 floats
// into a 1M-row table: the kernel followed by the log append of a tracked
// variable (runtime/dirty_rows.h; no take, so the log's overflow
// folds are included) against the kernel alone.
std::pair<double, double> marking_cost(int reps) {
  const int64_t rows = 1 << 20, n = 65536, width = 16;
  std::vector<float> table(static_cast<size_t>(rows * width)),
      updates(static_cast<size_t>(n * width));
  std::mt19937_64 rng(7);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (auto& i : ids) i = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
  const Tensor id_tensor = Tensor::from_vector<int64_t>(ids);
  internal::DirtyRows dirty;
  dirty.take(rows, 0);
  auto scatter = [&](bool tracked) {
    return [&, tracked] {
      for (int k = 0; k < 50; ++k) {
        kernels::cpu::scatter<float, int64_t>(kernels::ScatterOp::kUpdate, table.data(), rows,
                                              width, ids.data(), n, updates.data(), false, true);
        if (tracked) dirty.record(rows, id_tensor);
      }
    };
  };
  // Interleaved, best of each: a loaded machine's slow spells hit both.
  double plain = 1e30, marked = 1e30;
  for (int r = 0; r < 4 * reps; ++r) {
    plain = std::min(plain, seconds(scatter(false)));
    marked = std::min(marked, seconds(scatter(true)));
  }
  return {marked / 50, (marked - plain) / plain};
}

// Full vs delta save at each fraction of rows changed. The delta policy is
// opened up (max_delta_fraction 1) so that every save is a delta, and each
// delta extends the same base (a chain of up to 1000).
std::string sweep(Session& sess, Tables& t, int reps, const std::string& dir) {
  const SaveOptions no_meta{.write_meta_graph = false};
  Saver full({.max_to_keep = 1});
  Saver inc({.max_to_keep = 0, .max_deltas_per_base = 1000, .max_delta_fraction = 1.0});
  int step = 0;
  auto save = [&](Saver& saver, const std::string& name, bool incremental) {
    SaveOptions o = no_meta;
    o.global_step = int64_t{++step};
    o.incremental = incremental;
    return *saver.save(sess, dir + "/" + name, o).path();
  };
  save(inc, "inc", true);  // the base
  const double row_bytes = kWidth * 4;
  std::string out = "{\n  \"table_mib\": " + std::to_string(t.rows * kTables * kWidth * 4 >> 20) +
                    ", \"tables\": " + std::to_string(kTables) +
                    ", \"rows_per_table\": " + std::to_string(t.rows) +
                    ", \"row_bytes\": " + std::to_string(static_cast<int>(row_bytes)) +
                    ",\n  \"sweep\": [";
  bool first = true;
  for (double f : {0.001, 0.01, 0.05, 0.10, 0.25, 0.50}) {
    double delta_s = 1e30, full_s = 1e30;
    uint64_t delta_bytes = 0, full_bytes = 0;
    int64_t rows = 0;
    for (int r = 0; r < reps; ++r) {
      rows = t.change(f);
      std::string p;
      delta_s = std::min(delta_s, seconds([&] { p = save(inc, "inc", true); }));
      delta_bytes = checkpoint_bytes(p);
      full_s = std::min(full_s, seconds([&] { p = save(full, "full", false); }));
      full_bytes = checkpoint_bytes(p);
    }
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s\n    {\"fraction\": %.4f, \"rows\": %lld, \"full_save_s\": %.4f, "
                  "\"delta_save_s\": %.4f, \"full_bytes\": %llu, \"delta_bytes\": %llu, "
                  "\"speedup\": %.2f}",
                  first ? "" : ",", f, static_cast<long long>(rows), full_s, delta_s,
                  static_cast<unsigned long long>(full_bytes),
                  static_cast<unsigned long long>(delta_bytes), full_s / delta_s);
    out += buf;
    first = false;
  }
  return out + "\n  ]\n}\n";
}

int run(int argc, char** argv) {
  const int64_t mib = std::stoll(arg(argc, argv, "--mib", "256"));
  const int reps = std::stoi(arg(argc, argv, "--reps", "3"));
  const std::string dir = arg(argc, argv, "--dir", "/tmp/varstate_incr_bench");
  const std::string out = arg(argc, argv, "--out", "");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string load_start = load_average();

  Session sess;
  Tables t;
  t.rows = mib * (int64_t{1} << 20) / kTables / (kWidth * 4);
  for (int k = 0; k < kTables; ++k) {
    t.vars.emplace_back(Tensor::zeros(DType::kFloat, {t.rows, kWidth}),
                        VariableOptions{.name = "emb_" + std::to_string(k)});
  }
  sess.run(global_variables_initializer());
  if (std::find_if(argv + 1, argv + argc,
                   [](const char* a) { return std::string(a) == "--sweep"; }) != argv + argc) {
    const std::string json = sweep(sess, t, reps, dir);
    std::fputs(json.c_str(), stdout);
    if (!out.empty()) std::ofstream(out) << json;
    std::filesystem::remove_all(dir);
    return 0;
  }
  const SaveOptions no_meta{.write_meta_graph = false};
  Saver full({.max_to_keep = 1});
  int step = 0;
  auto full_save = [&] {
    SaveOptions o = no_meta;
    o.global_step = int64_t{++step};
    return *full.save(sess, dir + "/full", o).path();
  };
  std::string last_full;
  const double t_full = best_of(
      reps, [] {}, [&] { last_full = full_save(); });
  const uint64_t full_bytes = checkpoint_bytes(last_full);

  // Delta saves at 1 % and 10 %: a base, then each rep changes rows and saves.
  Saver inc({.max_to_keep = 0, .max_deltas_per_base = 1000});
  auto inc_save = [&] {
    SaveOptions o = no_meta;
    o.global_step = int64_t{++step};
    o.incremental = true;
    return *inc.save(sess, dir + "/inc", o).path();
  };
  inc_save();
  // Each delta is timed next to a full save of the same values, so that
  // both see the disk in the same state.
  struct Delta {
    double fraction, seconds, full_seconds;
    uint64_t bytes;
    int64_t rows;
  };
  std::vector<Delta> deltas;
  for (double f : {0.01, 0.10}) {
    Delta d{f, 1e30, 1e30, 0, 0};
    for (int r = 0; r < reps; ++r) {
      d.rows = t.change(f);
      std::string p;
      d.seconds = std::min(d.seconds, seconds([&] { p = inc_save(); }));
      d.full_seconds = std::min(d.full_seconds, seconds([&] { full_save(); }));
      d.bytes = checkpoint_bytes(p);
    }
    deltas.push_back(d);
  }

  // A chain of base + 10 deltas of 1 %, against a full save of the same values.
  Saver chain_saver({.max_to_keep = 0, .max_deltas_per_base = 10});
  SaveOptions o = no_meta;
  o.incremental = true;
  o.global_step = int64_t{0};
  chain_saver.save(sess, dir + "/chain", o);
  std::string head;
  for (int k = 1; k <= 10; ++k) {
    t.change(0.01);
    o.global_step = int64_t{k};
    head = *chain_saver.save(sess, dir + "/chain", o).path();
  }
  const size_t links = checkpoint_chain(head).size();
  const std::string same = full_save();
  Saver restorer({.max_to_keep = 0});
  const auto [restores_full, restores_chain] = bench::alternating(
      reps, [&] { restorer.restore(sess, same); }, [&] { restorer.restore(sess, head); }, [] {});
  double restore_worst = 0;
  for (int r = 0; r < reps; ++r) {
    restore_worst = std::max(restore_worst, restores_chain[static_cast<size_t>(r)] /
                                                restores_full[static_cast<size_t>(r)]);
  }
  const double t_restore_full = median(restores_full);
  const double t_restore_chain = median(restores_chain);
  std::filesystem::create_directories(dir + "/compaction");
  const CompactVsSave synced = compact_vs_save(sess, head, dir + "/compaction", true, reps);
  const CompactVsSave unsynced = compact_vs_save(sess, head, dir + "/compaction", false, reps);
  const double t_read_chain = best_of(
      reps, [] {},
      [&] {
        auto reader = open_checkpoint(head);
        for (const TensorInfo& info : reader->list()) reader->read(info.name);
      });
  const auto [t_scatter, mark_share] = marking_cost(reps);

  char buf[4096];
  const Delta& d1 = deltas[0];
  const Delta& d10 = deltas[1];
  const double row_bytes = kWidth * 4;
  std::snprintf(
      buf, sizeof buf,
      "{\n  \"table_mib\": %lld, \"tables\": %d, \"rows_per_table\": %lld, \"row_bytes\": %.0f,\n"
      "  \"full_save_s\": %.4f, \"full_bytes\": %llu,\n"
      "  \"delta_1pct_save_s\": %.4f, \"delta_1pct_bytes\": %llu, \"delta_1pct_rows\": %lld,\n"
      "  \"delta_10pct_save_s\": %.4f, \"delta_10pct_bytes\": %llu, \"delta_10pct_rows\": %lld,\n"
      "  \"speedup_1pct\": %.2f, \"size_ratio_1pct\": %.2f, \"speedup_10pct\": %.2f,\n"
      "  \"delta_bytes_per_row_bytes_1pct\": %.4f, \"delta_bytes_per_row_bytes_10pct\": %.4f,\n"
      "  \"chain_links\": %zu, \"restore_full_s\": %.4f, \"restore_chain_s\": %.4f,\n"
      "  \"restore_chain_vs_full\": %.2f, \"restore_chain_vs_full_worst\": %.2f, "
      "\"read_chain_s\": %.4f,\n"
      "  \"compact_sync_s\": %.4f, \"full_save_sync_s\": %.4f, "
      "\"compact_vs_full_save_sync\": %.2f,\n"
      "  \"compact_nosync_s\": %.4f, \"full_save_nosync_s\": %.4f, "
      "\"compact_vs_full_save_nosync\": %.2f,\n"
      "  \"scatter_65536_s\": %.6f, \"dirty_marks_share_of_scatter\": %.4f,\n"
      "  \"reps\": %d, \"load_average_start\": %s, \"load_average_end\": %s\n}\n",
      static_cast<long long>(mib), kTables, static_cast<long long>(t.rows), row_bytes, t_full,
      static_cast<unsigned long long>(full_bytes), d1.seconds,
      static_cast<unsigned long long>(d1.bytes), static_cast<long long>(d1.rows), d10.seconds,
      static_cast<unsigned long long>(d10.bytes), static_cast<long long>(d10.rows),
      d1.full_seconds / d1.seconds, static_cast<double>(full_bytes) / static_cast<double>(d1.bytes),
      d10.full_seconds / d10.seconds,
      static_cast<double>(d1.bytes) / (static_cast<double>(d1.rows) * row_bytes),
      static_cast<double>(d10.bytes) / (static_cast<double>(d10.rows) * row_bytes), links,
      t_restore_full, t_restore_chain, t_restore_chain / t_restore_full, restore_worst,
      t_read_chain, synced.compact_s, synced.full_s, synced.compact_s / synced.full_s,
      unsynced.compact_s, unsynced.full_s, unsynced.compact_s / unsynced.full_s, t_scatter,
      mark_share, reps, load_start.c_str(), load_average().c_str());
  std::fputs(buf, stdout);
  if (!out.empty()) std::ofstream(out) << buf;
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace varstate

int main(int argc, char** argv) { return varstate::run(argc, argv); }
