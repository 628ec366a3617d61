// What users run never destroys an incremental chain nor leaves debris:
// compaction refuses an output that is a file of its own chain or a
// checkpoint the state file keeps, and one whose paths are directories,
// before writing anything; it sweeps what killed compactions left;
// retention deletes a chain newest first, and the next save removes deltas
// whose base a cut-short deletion removed and meta graphs whose checkpoint
// is gone. The kill tests SIGKILL a child saving or compacting at random
// points (a random file operation, or a random time) and count what is
// left, and check that every listed checkpoint restores (a dense table's
// rows and a dynamic table's keys written and erased, by their deltas).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/file_system.h"
#include "runtime/variable_access.h"
#include "test_util.h"
#include "varstate/checkpoint_chain.h"
#include "varstate/checkpoint_state.h"
#include "varstate/dynamic_variable.h"
#include "varstate/error.h"
#include "varstate/saver.h"
#include "varstate/scatter.h"
#include "varstate/variables.h"

namespace varstate {
namespace {

using testing::TempDir;

// 2048 rows of 4 floats (32 KiB): a delta holds the rows a step changes.
constexpr int64_t kRows = 2048;
constexpr int64_t kWidth = 4;

// The rows step `s` changes (to s * 1000 + column).
std::vector<int64_t> rows_of(int64_t s) {
  std::set<int64_t> rows{(s * 7) % kRows, (s * 131 + 5) % kRows, (s * 977 + 11) % kRows};
  return {rows.begin(), rows.end()};
}

// The table after steps 1..s, computed without the library.
std::vector<float> table_at(int64_t s) {
  std::vector<float> t(static_cast<size_t>(kRows * kWidth));
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(i);
  for (int64_t step = 1; step <= s; ++step) {
    for (int64_t r : rows_of(step)) {
      for (int64_t c = 0; c < kWidth; ++c)
        t[static_cast<size_t>(r * kWidth + c)] = step * 1000.f + c;
    }
  }
  return t;
}

int64_t step_of(const std::string& p) { return std::stoll(p.substr(p.rfind('-') + 1)); }

// The dynamic table's keys: step `s` writes three (two of a small key space,
// so keys come back, and a new one) and erases one.
constexpr int64_t kDynDim = 4;
std::vector<int64_t> keys_written_by(int64_t s) {
  return {(s * 7) % 50, (s * 13 + 5) % 50, 100 + s};
}
int64_t key_erased_by(int64_t s) { return (s * 11) % 50; }
float dyn_value(int64_t s, size_t j, int64_t c) { return static_cast<float>(s * 100 + j * 10) + c; }

// The dynamic table after steps 1..s, computed without the library.
std::map<int64_t, std::vector<float>> dyn_at(int64_t s) {
  std::map<int64_t, std::vector<float>> t;
  for (int64_t step = 1; step <= s; ++step) {
    const std::vector<int64_t> keys = keys_written_by(step);
    for (size_t j = 0; j < keys.size(); ++j) {
      auto& row = t[keys[j]];
      row.resize(kDynDim);
      for (int64_t c = 0; c < kDynDim; ++c) row[static_cast<size_t>(c)] = dyn_value(step, j, c);
    }
    t.erase(key_erased_by(step));
  }
  return t;
}

// A table trained by scatters and a dynamic table written by key, and the
// step they hold.
struct Model {
  Graph graph;
  Variable table;
  DynamicVariable dyn;
  Model() : table(make_table(graph)), dyn(make_dyn(graph)) {}
  // A dynamic table (keys written and erased each step), on the host as
  // the table.
  static DynamicVariable make_dyn(Graph& g) {
    auto guard = g.as_default();
    DeviceScope on_host("/cpu:0");
    DynamicVariable d = get_dynamic_variable("dyn", {.dim = kDynDim});
    d.variable().initializer().run();
    return d;
  }
  static Variable make_table(Graph& g) {
    auto guard = g.as_default();
    // The kill tests fork: a child may not use GPUs its parent set up (CUDA's
    // rule, and the emulated GPUs' workers are not in the child), so the
    // model stays on the CPU whatever the binary's test device.
    DeviceScope on_host("/cpu:0");
    Variable v(Tensor::from_vector<float>(table_at(0), {kRows, kWidth}), {.name = "table"});
    v.initializer().run();
    return v;
  }
  // Every element -7, a state no step holds.
  void clear() {
    internal::set_value(table, Tensor::from_vector<float>(std::vector<float>(kRows * kWidth, -7.f),
                                                          {kRows, kWidth}));
    dyn.insert(Tensor::from_vector<int64_t>({-7}),
               Tensor::from_vector<float>(std::vector<float>(kDynDim, -7.f), {1, kDynDim}));
  }
  void step(int64_t s) {
    const std::vector<int64_t> rows = rows_of(s);
    const auto n = static_cast<int64_t>(rows.size());
    std::vector<float> values;
    for (size_t i = 0; i < rows.size(); ++i) {
      for (int64_t c = 0; c < kWidth; ++c) values.push_back(s * 1000.f + c);
    }
    scatter_update(table, Tensor::from_vector<int64_t>(rows, {n}),
                   Tensor::from_vector<float>(values, {n, kWidth}));
    const std::vector<int64_t> keys = keys_written_by(s);
    std::vector<float> dyn_rows;
    for (size_t j = 0; j < keys.size(); ++j) {
      for (int64_t c = 0; c < kDynDim; ++c) dyn_rows.push_back(dyn_value(s, j, c));
    }
    dyn.insert(Tensor::from_vector<int64_t>(keys),
               Tensor::from_vector<float>(dyn_rows, {static_cast<int64_t>(keys.size()), kDynDim}));
    dyn.erase(Tensor::from_vector<int64_t>({key_erased_by(s)}));
  }
  bool holds(int64_t s) const {
    if (table.value().to_vector<float>() != table_at(s)) return false;
    const KeysAndValues kv = dyn.export_rows();
    const std::vector<int64_t> keys = kv.keys.to_vector<int64_t>();
    const std::vector<float> values = kv.values.to_vector<float>();
    std::map<int64_t, std::vector<float>> got;
    for (size_t i = 0; i < keys.size(); ++i) {
      got[keys[i]] = std::vector<float>(values.begin() + static_cast<ptrdiff_t>(i * kDynDim),
                                        values.begin() + static_cast<ptrdiff_t>((i + 1) * kDynDim));
    }
    return got == dyn_at(s);
  }
};

// Restores `path` into a fresh model; true if it then holds step `step`'s values.
bool restores_to(const std::string& path, int64_t step) {
  Session sess;
  Model fresh;
  fresh.clear();
  Saver({.graph = &fresh.graph}).restore(sess, path);
  return fresh.holds(step);
}

// Forwards to the default file system, counting the calls that change the
// directory; SIGKILLs the process before the `kill_at`-th (never when 0),
// and records the files deleted.
class KillingFileSystem final : public FileSystem {
 public:
  explicit KillingFileSystem(int64_t kill_at = 0) : kill_at_(kill_at) {}
  std::unique_ptr<WritableFile> new_writable_file(const std::string& path) override {
    tick();
    return base_.new_writable_file(path);
  }
  std::unique_ptr<RandomAccessFile> new_random_access_file(const std::string& path) override {
    return base_.new_random_access_file(path);
  }
  bool file_exists(const std::string& path) override { return base_.file_exists(path); }
  uint64_t file_size(const std::string& path) override { return base_.file_size(path); }
  void delete_file(const std::string& path) override {
    tick();
    base_.delete_file(path);
    deleted.push_back(basename_of(path));
  }
  void rename_file(const std::string& from, const std::string& to) override {
    tick();
    base_.rename_file(from, to);
  }
  std::vector<std::string> list_dir(const std::string& dir) override { return base_.list_dir(dir); }
  void create_dir(const std::string& dir) override { base_.create_dir(dir); }
  void delete_dir(const std::string& dir) override {
    tick();
    base_.delete_dir(dir);
  }
  void sync_dir(const std::string& dir) override { base_.sync_dir(dir); }

  std::vector<std::string> deleted;

 private:
  void tick() {
    if (++ops_ == kill_at_) raise(SIGKILL);
  }
  FileSystem& base_ = *default_file_system();
  int64_t kill_at_;
  int64_t ops_ = 0;
};

// The names in `dir`.
std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.insert(e.path().filename().string());
  }
  return out;
}

// Every file of `dir` and its bytes.
std::map<std::string, std::string> contents_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const std::string& name : names_in(dir)) {
    const std::string path = join_path(dir, name);
    out[name] = std::filesystem::is_directory(path) ? "<dir>" : testing::read_file(path);
  }
  return out;
}

// Saves steps 0..last (0 a base, then deltas: at most `deltas` per base) of
// `model` to "<dir>/m" with `saver`.
void save_steps(Saver& saver, Session& sess, Model& model, const std::string& dir, int64_t last,
                bool meta = true) {
  for (int64_t s = 0; s <= last; ++s) {
    if (s > 0) model.step(s);
    saver.save(sess, join_path(dir, "m"),
               {.global_step = s, .write_meta_graph = meta, .incremental = true});
  }
}

// A fresh model restored from `checkpoint` holds step_of(checkpoint).
void check_restores(const std::string& checkpoint) {
  CAPTURE(checkpoint);
  Session sess;
  Model model;
  model.clear();
  Saver({.graph = &model.graph}).restore(sess, checkpoint);
  CHECK(model.holds(step_of(checkpoint)));
}

// Checks what a sequence of killed runs left in `dir` once a clean save
// ran: no temporary file or folder, no data shard or meta graph without
// its index, and every checkpoint whole (its chain intact) and restoring
// its step. Returns the number of checkpoints.
size_t check_no_debris(const std::string& dir) {
  std::set<std::string> indexes, others;
  for (const std::string& name : names_in(dir)) {
    CAPTURE(name);
    CHECK(name.find("_temp_") == std::string::npos);
    CHECK(name.find(".tempstate") == std::string::npos);
    if (name.ends_with(".index")) {
      indexes.insert(name.substr(0, name.size() - 6));
    } else if (name != "checkpoint") {
      others.insert(name.substr(0, name.find('.')));
    }
  }
  for (const std::string& c : others) {
    CAPTURE(c);
    CHECK(indexes.count(c) == 1);
  }
  for (const std::string& c : indexes) {
    CAPTURE(c);
    CHECK_NOTHROW(checkpoint_chain(join_path(dir, c)));
    check_restores(join_path(dir, c));
  }
  return indexes.size();
}

}  // namespace

TEST_CASE("compaction refuses an output that is a file of its own chain", "[compact][safety]") {
  TempDir dir;
  Session sess;
  Model model;
  {
    auto guard = model.graph.as_default();
    Saver saver({.max_to_keep = 0, .graph = &model.graph});
    save_steps(saver, sess, model, dir.path(), 4);
  }
  const std::map<std::string, std::string> before = contents_of(dir.path());
  struct Case {
    std::string input, output, role;
  };
  for (const Case& c : {Case{"m-4", "m-1", "its delta"}, Case{"m-4", "m-2", "its delta"},
                        Case{"m-4", "m-0", "its base"}, Case{"m-4", "m-4", "the checkpoint itself"},
                        Case{"m-2", "m-0", "its base"}}) {
    CAPTURE(c.input, c.output);
    const std::string in = dir / c.input;
    // The same file through another spelling of its path too.
    for (const std::string& out : {dir / c.output, dir.path() + "/./" + c.output}) {
      CHECK_THROWS_AS(compact_checkpoint(in, out), InvalidArgumentError);
      CHECK_THROWS_WITH(compact_checkpoint(in, out),
                        Catch::Contains("compacting checkpoint \"" + in + "\"") &&
                            Catch::Contains("is a file of the chain being compacted (" + c.role));
    }
    CHECK(contents_of(dir.path()) == before);
  }
  for (int64_t s = 0; s <= 4; ++s) check_restores(dir / ("m-" + std::to_string(s)));
}

TEST_CASE("compaction refuses a checkpoint the state file lists or needs", "[compact][safety]") {
  TempDir dir;
  Session sess;
  Model model;
  {
    Saver saver({.max_to_keep = 2, .graph = &model.graph, .max_deltas_per_base = 10});
    save_steps(saver, sess, model, dir.path(), 4);
  }
  // The state file lists m-3 and m-4; both need m-0, m-1 and m-2, which
  // retention keeps. Compacting m-2 onto m-4 would make the latest hold
  // step 2's values.
  const std::map<std::string, std::string> before = contents_of(dir.path());
  for (const std::string out : {"m-4", "m-3"}) {
    CAPTURE(out);
    CHECK_THROWS_AS(compact_checkpoint(dir / "m-2", dir / out), FailedPreconditionError);
    CHECK_THROWS_WITH(
        compact_checkpoint(dir / "m-2", dir / out),
        Catch::Contains("\"" + (dir / out) + "\" is a checkpoint that \"" + (dir / "checkpoint") +
                        "\" lists or that a checkpoint it "
                        "lists needs"));
  }
  // A copy of m-2 elsewhere onto m-1, which m-4 needs: refused too.
  TempDir other;
  compact_checkpoint(dir / "m-2", other / "m-2");
  CHECK_THROWS_AS(compact_checkpoint(other / "m-2", dir / "m-1"), FailedPreconditionError);
  CHECK(contents_of(dir.path()) == before);
  const std::optional<CheckpointState> state = get_checkpoint_state(dir.path());
  REQUIRE(state.has_value());
  CHECK(state->all_model_checkpoint_paths == std::vector<std::string>{dir / "m-3", dir / "m-4"});
  for (const std::string& p : state->all_model_checkpoint_paths) check_restores(p);
  // A new name in the same folder is fine.
  compact_checkpoint(dir / "m-2", dir / "export");
  CHECK(restores_to(dir / "export", 2));
}

TEST_CASE("compaction onto a directory fails before it writes anything", "[compact][safety]") {
  TempDir dir;
  Session sess;
  Model model;
  {
    Saver saver({.max_to_keep = 0, .graph = &model.graph});
    save_steps(saver, sess, model, dir.path(), 2);
  }
  TempDir out;
  for (const std::string blocked : {"o.index", "o.data-00000-of-00001", "o.meta"}) {
    CAPTURE(blocked);
    std::filesystem::create_directory(out / blocked);
    const auto before = contents_of(out.path());
    CHECK_THROWS_AS(compact_checkpoint(dir / "m-2", out / "o"), FailedPreconditionError);
    CHECK_THROWS_WITH(compact_checkpoint(dir / "m-2", out / "o"),
                      Catch::Contains("\"" + (out / blocked) + "\" is a directory"));
    CHECK(contents_of(out.path()) == before);  // nothing written, nothing deleted
    std::filesystem::remove(out / blocked);
  }
}

TEST_CASE("compaction removes what killed compactions to its output left",
          "[compact][safety][kill]") {
  TempDir dir;
  Session sess;
  Model model;
  {
    Saver saver({.max_to_keep = 0, .graph = &model.graph});
    save_steps(saver, sess, model, dir.path(), 3);
  }
  TempDir out;
  // A fixed leftover of each kind, and a file of another checkpoint, kept.
  testing::write_file(out / "o.data-00000-of-00001.tempstate42", "x");
  testing::write_file(out / "o.index.tempstate7", "x");
  testing::write_file(out / "o-5.index.tempstate9", "x");
  compact_checkpoint(dir / "m-3", out / "o");
  CHECK(names_in(out.path()) == std::set<std::string>{"o-5.index.tempstate9",
                                                      "o.data-00000-of-00001", "o.index",
                                                      "o.meta"});
  std::filesystem::remove(out / "o-5.index.tempstate9");

  // Children compacting again and again, killed at a random file operation
  // or after a random time; then one compaction that succeeds.
  constexpr int kRuns = 16;
  std::mt19937_64 gen(testing::kSeed + 41);
  CAPTURE(testing::kSeed + 41);
  for (int run = 0; run < kRuns; ++run) {
    const bool by_ops = run % 2 == 0;
    const int64_t at = std::uniform_int_distribution<int64_t>(1, 40)(gen);
    const int delay_us = std::uniform_int_distribution<int>(0, 20000)(gen);
    CAPTURE(run, by_ops, at, delay_us);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // Never returns into the test runner: an error ends it with 3.
      try {
        KillingFileSystem fs(by_ops ? at : 0);
        for (;;) compact_checkpoint(dir / "m-3", out / "o", &fs);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "killed-compaction child: %s\n", e.what());
      }
      _exit(3);
    }
    if (!by_ops) {
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      kill(child, SIGKILL);
    }
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));
  }
  compact_checkpoint(dir / "m-3", out / "o");
  CHECK(names_in(out.path()) ==
        std::set<std::string>{"o.data-00000-of-00001", "o.index", "o.meta"});
  CHECK(restores_to(out / "o", 3));
}

TEST_CASE("retention deletes a chain newest first", "[saver][incremental][safety]") {
  TempDir dir;
  Session sess;
  Model model;
  KillingFileSystem fs;  // records the deletions
  // m-0 base, m-1 and m-2 deltas, m-3 a new base: saving m-4 drops the
  // last checkpoint that needed m-0..m-2 (max_to_keep 2).
  Saver saver(
      {.max_to_keep = 2, .graph = &model.graph, .file_system = &fs, .max_deltas_per_base = 2});
  save_steps(saver, sess, model, dir.path(), 4);
  std::vector<std::string> indexes;
  for (const std::string& f : fs.deleted) {
    if (f.ends_with(".index")) indexes.push_back(f);
  }
  CHECK(indexes == std::vector<std::string>{"m-2.index", "m-1.index", "m-0.index"});
  CHECK(check_no_debris(dir.path()) == 2);
}

TEST_CASE("the next save removes deltas whose base is gone and meta graphs without checkpoint",
          "[saver][incremental][safety]") {
  TempDir dir;
  Session sess;
  Model model;
  {
    // m-0 base, m-1 and m-2 deltas; m-3 a base, m-4 its delta.
    Saver saver({.max_to_keep = 10, .graph = &model.graph, .max_deltas_per_base = 2});
    save_steps(saver, sess, model, dir.path(), 4);
  }
  // What a deletion of m-0..m-2 cut short after m-0 and m-1's index (base
  // first) left, and the meta graph of a checkpoint whose deletion stopped
  // just before it; the state file lists m-3 and m-4.
  remove_checkpoint(dir / "m-0");
  std::filesystem::remove(dir / "m-1.index");
  testing::write_file(dir / "m-9.meta", "x");
  update_checkpoint_state(dir.path(), dir / "m-4", {dir / "m-3", dir / "m-4"});
  // The meta graph the user exported as "m.meta" is no leftover.
  testing::write_file(dir / "m.meta", "user's");
  {
    Saver saver({.max_to_keep = 10, .graph = &model.graph});
    saver.recover_last_checkpoints({dir / "m-3", dir / "m-4"});
    model.step(5);
    saver.save(sess, dir / "m", {.global_step = 5, .incremental = true});
  }
  const std::set<std::string> names = names_in(dir.path());
  for (const std::string gone : {"m-1.data-00000-of-00001", "m-1.meta", "m-2.index",
                                 "m-2.data-00000-of-00001", "m-2.meta", "m-9.meta"}) {
    CAPTURE(gone);
    CHECK(names.count(gone) == 0);
  }
  CHECK(names.count("m.meta") == 1);
  check_restores(dir / "m-3");
  check_restores(dir / "m-4");
  check_restores(dir / "m-5");
}

TEST_CASE("saves killed at random points leave every listed chain restorable and no debris",
          "[saver][incremental][safety][kill]") {
  // A job restarted after each kill, as the demo: it recovers the listed
  // checkpoints, goes on from the latest one and saves incrementally.
  constexpr int kRuns = 24;
  std::mt19937_64 gen(testing::kSeed + 42);
  CAPTURE(testing::kSeed + 42);
  TempDir dir;
  {
    Session sess;
    Model model;
    Saver saver({.max_to_keep = 2, .graph = &model.graph, .max_deltas_per_base = 2});
    saver.save(sess, dir / "m", {.global_step = 0, .incremental = true});
  }
  auto run_job = [&](int64_t kill_at, int64_t stop_after) {
    const std::optional<CheckpointState> state = get_checkpoint_state(dir.path());
    KillingFileSystem fs(kill_at);
    Session sess;
    Model model;
    Saver saver(
        {.max_to_keep = 2, .graph = &model.graph, .file_system = &fs, .max_deltas_per_base = 2});
    saver.recover_last_checkpoints(state->all_model_checkpoint_paths);
    const int64_t first = step_of(state->model_checkpoint_path);
    saver.restore(sess, state->model_checkpoint_path);
    for (int64_t s = first + 1; s <= first + stop_after; ++s) {
      model.step(s);
      saver.save(sess, dir / "m", {.global_step = s, .incremental = true});
    }
  };
  for (int run = 0; run < kRuns; ++run) {
    const bool by_ops = run % 3 != 2;
    const int64_t at = std::uniform_int_distribution<int64_t>(1, 120)(gen);
    const int delay_us = std::uniform_int_distribution<int>(0, 30000)(gen);
    CAPTURE(run, by_ops, at, delay_us);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      try {
        run_job(by_ops ? at : 0, 1000);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "killed-job child: %s\n", e.what());
        _exit(3);
      }
      _exit(0);
    }
    if (!by_ops) {
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      kill(child, SIGKILL);
    }
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));
    const std::optional<CheckpointState> state = get_checkpoint_state(dir.path());
    REQUIRE(state.has_value());
    for (const std::string& p : state->all_model_checkpoint_paths) check_restores(p);
  }
  // One clean run: afterwards no debris, no broken chain, and besides the
  // listed checkpoints and their links only whole, restorable checkpoints
  // of deletions that never started (as TensorFlow leaves them).
  run_job(0, 1);
  const size_t left = check_no_debris(dir.path());
  CAPTURE(left);
  CHECK(left >= 2);
}

}  // namespace varstate
