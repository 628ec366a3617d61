// Saver failures: every bad restore leaves the variables untouched; failed,
// interrupted (fault injection) and killed saves leave the previous
// checkpoint as the latest, and it restores bit-exactly.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/fault_injection_file_system.h"
#include "checkpoint/file_system.h"
#include "runtime/variable_access.h"
#include "test_util.h"
#include "varstate/checkpoint_state.h"
#include "varstate/placement.h"
#include "varstate/replica_device_setter.h"
#include "varstate/saver.h"
#include "varstate/variables.h"

namespace varstate {
namespace {

using testing::TempDir;

Tensor pattern(int64_t n, int64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>((i * 7 + seed * 13) % 1000) + 0.25f;
  return Tensor::from_vector<float>(v, TensorShape{n});
}

std::string bytes_of(const Tensor& t) {
  Tensor h = t.to_host();
  return std::string(static_cast<const char*>(h.raw_data()), h.nbytes());
}

// Three variables whose values are a function of `step`.
struct Model {
  Graph graph;
  std::vector<Variable> vars;
  explicit Model(int64_t n = 1000) {
    auto guard = graph.as_default();
    DeviceScope ps(replica_device_setter(2));
    for (int i = 0; i < 3; ++i)
      vars.emplace_back(pattern(n + i, 0), VariableOptions{.name = "v" + std::to_string(i)});
    Session sess;
    sess.run(global_variables_initializer());
  }
  void set_step(int64_t step) {
    for (size_t i = 0; i < vars.size(); ++i) {
      internal::set_value(
          vars[i], pattern(vars[i].shape().num_elements(), step * 10 + static_cast<int64_t>(i)));
    }
  }
  bool holds_step(int64_t step) const {
    for (size_t i = 0; i < vars.size(); ++i) {
      if (bytes_of(vars[i].value()) !=
          bytes_of(pattern(vars[i].shape().num_elements(), step * 10 + static_cast<int64_t>(i)))) {
        return false;
      }
    }
    return true;
  }
  std::vector<std::string> snapshot() const {
    std::vector<std::string> out;
    for (const auto& v : vars) out.push_back(bytes_of(v.value()));
    return out;
  }
};

}  // namespace

TEST_CASE("a failed restore leaves every variable untouched", "[saver][failure]") {
  TempDir dir;
  Session sess;
  Model saved;
  saved.set_step(1);
  Saver saver({.sharded = true, .graph = &saved.graph});
  const std::string path = *saver.save(sess, dir / "m", {.global_step = 1}).path();

  Model target;
  target.set_step(5);
  const auto before = target.snapshot();
  auto check_untouched = [&] { CHECK(target.snapshot() == before); };

  SECTION("missing key") {
    Variable extra(Tensor(1.f), {.name = "zz_extra", .graph = &target.graph});
    sess.run(extra.initializer());
    std::vector<Variable> list = target.vars;
    list.push_back(extra);
    Saver s({.var_list = list, .graph = &target.graph});
    CHECK_THROWS_AS(s.restore(sess, path), NotFoundError);
    CHECK_THROWS_WITH(
        s.restore(sess, path),
        Catch::Contains("Key \"zz_extra\" not found in checkpoint") && Catch::Contains(path));
    check_untouched();
    CHECK(extra.value().scalar<float>() == 1.f);
  }
  SECTION("dtype mismatch") {
    Variable wrong(Tensor::zeros(DType::kInt32, TensorShape{1002}),
                   {.name = "v2", .graph = &target.graph});
    Saver s({.var_list = std::map<std::string, Variable>{{"v0", target.vars[0]}, {"v2", wrong}},
             .graph = &target.graph});
    CHECK_THROWS_AS(s.restore(sess, path), InvalidArgumentError);
    CHECK_THROWS_WITH(s.restore(sess, path), Catch::Contains("int32") && Catch::Contains("float"));
    check_untouched();
  }
  SECTION("shape mismatch names the variable and both shapes") {
    Variable wrong(Tensor::zeros(DType::kFloat, TensorShape{3}),
                   {.name = "zz", .graph = &target.graph});
    Saver s({.var_list = std::map<std::string, Variable>{{"v0", target.vars[0]}, {"v2", wrong}},
             .graph = &target.graph});
    CHECK_THROWS_WITH(s.restore(sess, path), Catch::Contains("\"zz\"") && Catch::Contains("[3]") &&
                                                 Catch::Contains("[1002]"));
    check_untouched();
  }
  SECTION("flipped byte: DataLossError naming file and tensor") {
    const std::string data = dir / "m-1.data-00000-of-00002";
    REQUIRE(std::filesystem::exists(data));
    std::string bytes = testing::read_file(data);
    bytes[bytes.size() - 5] ^= 0x10;  // inside the last tensor of shard 0
    testing::write_file(data, bytes);
    Saver s({.graph = &target.graph});
    CHECK_THROWS_AS(s.restore(sess, path), DataLossError);
    CHECK_THROWS_WITH(s.restore(sess, path), Catch::Contains(data) && Catch::Contains("\"v2\"") &&
                                                 Catch::Contains("crc32c mismatch"));
    check_untouched();
  }
  SECTION("truncated or missing data shard") {
    const std::string data = dir / "m-1.data-00001-of-00002";
    Saver s({.graph = &target.graph});
    std::string bytes = testing::read_file(data);
    testing::write_file(data, bytes.substr(0, bytes.size() / 2));
    CHECK_THROWS_AS(s.restore(sess, path), DataLossError);
    check_untouched();
    std::filesystem::remove(data);
    CHECK_THROWS_AS(s.restore(sess, path), NotFoundError);
    check_untouched();
  }
  SECTION("corrupt index") {
    const std::string index = dir / "m-1.index";
    std::string bytes = testing::read_file(index);
    bytes[10] ^= 0x55;
    testing::write_file(index, bytes);
    Saver s({.graph = &target.graph});
    CHECK_THROWS_AS(s.restore(sess, path), DataLossError);
    check_untouched();
  }
  SECTION("nothing at the path") {
    Saver s({.graph = &target.graph});
    CHECK_THROWS_AS(s.restore(sess, dir / "no-such-checkpoint"), ValueError);
    check_untouched();
  }
  SECTION("sequential restore validates before assigning") {
    const std::string data = dir / "m-1.data-00001-of-00002";
    std::string bytes = testing::read_file(data);
    bytes[bytes.size() - 3] ^= 0x01;
    testing::write_file(data, bytes);
    Saver s({.restore_sequentially = true, .graph = &target.graph});
    CHECK_THROWS_AS(s.restore(sess, path), DataLossError);
    check_untouched();
  }
  SECTION("partitioned tensor without sufficient slices") {
    Graph g;
    Variable part(
        Tensor::zeros(DType::kFloat, TensorShape{2}),
        {.name = "p", .graph = &g, .save_slice_info = SaveSliceInfo{"v0", {2000}, {0}, {2}}});
    CHECK_THROWS_AS(
        Saver({.var_list = std::vector<Variable>{part}, .graph = &g}).restore(sess, path),
        InvalidArgumentError);  // full shape differs
  }
}

TEST_CASE("saving an uninitialized variable fails before writing", "[saver][failure]") {
  Graph g;
  TempDir dir;
  Session sess;
  Variable v(VariableOptions{.dtype = DType::kFloat,
                             .expected_shape = TensorShape{2},
                             .variable_def = VariableDef{.variable_name = "u:0"},
                             .graph = &g});
  Saver saver({.graph = &g});
  CHECK_THROWS_WITH(saver.save(sess, dir / "m"), Catch::Contains("uninitialized value u"));
  CHECK_FALSE(std::filesystem::exists(dir / "m.index"));
}

TEST_CASE("injected I/O faults mid-save keep the previous checkpoint", "[saver][failure][fault]") {
  const FileOp ops[] = {FileOp::kCreate, FileOp::kAppend, FileOp::kSync,
                        FileOp::kClose,  FileOp::kRename, FileOp::kSyncDir};
  for (bool sharded : {false, true}) {
    for (FileOp op : ops) {
      for (int nth : {1, 2, 3, 5}) {
        CAPTURE(sharded, static_cast<int>(op), nth);
        TempDir dir;
        Session sess;
        FaultInjectionFileSystem fs(default_file_system());
        Model model;
        Saver saver({.sharded = sharded, .graph = &model.graph, .file_system = &fs});
        model.set_step(1);
        saver.save(sess, dir / "m", {.global_step = 1});
        model.set_step(2);
        fs.fail_nth(op, nth);
        bool failed = false;
        try {
          saver.save(sess, dir / "m", {.global_step = 2});
        } catch (const UnavailableError&) {
          failed = true;
        }
        fs.clear_faults();
        const auto latest = latest_checkpoint(dir.path());
        REQUIRE(latest.has_value());
        if (failed) {
          CHECK(*latest == dir / "m-1");
        } else {
          CHECK(*latest == dir / "m-2");  // the fault hit an operation the save did not reach
        }
        model.set_step(9);
        saver.restore(sess, *latest);
        CHECK(model.holds_step(failed ? 1 : 2));

        // A simulated crash after the failure loses nothing that was synced.
        if (failed) {
          fs.drop_unsynced_data();
          model.set_step(9);
          saver.restore(sess, *latest_checkpoint(dir.path()));
          CHECK(model.holds_step(1));
        }
      }
    }
  }
}

// Names of the entries of `dir`, sorted.
std::set<std::string> entries(const std::filesystem::path& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.insert(e.path().filename().string());
  }
  return out;
}

TEST_CASE("SaverOptions::sync = false writes the same checkpoint without syncing",
          "[saver][fault]") {
  for (bool sharded : {false, true}) {
    CAPTURE(sharded);
    TempDir synced_dir, unsynced_dir;
    Session sess;
    Model model, twin;  // two graphs, so that both savers are named "save"
    model.set_step(3);
    twin.set_step(3);
    FaultInjectionFileSystem synced_fs(default_file_system()), unsynced_fs(default_file_system());
    Saver synced({.sharded = sharded, .graph = &twin.graph, .file_system = &synced_fs});
    Saver unsynced(
        {.sharded = sharded, .graph = &model.graph, .file_system = &unsynced_fs, .sync = false});
    synced.save(sess, synced_dir / "m", {.global_step = 3});
    unsynced.save(sess, unsynced_dir / "m", {.global_step = 3});
    CHECK(synced_fs.count(FileOp::kSync) > 0);
    CHECK(synced_fs.count(FileOp::kSyncDir) > 0);
    CHECK(unsynced_fs.count(FileOp::kSync) == 0);
    CHECK(unsynced_fs.count(FileOp::kSyncDir) == 0);
    CHECK(unsynced_fs.count(FileOp::kRename) == synced_fs.count(FileOp::kRename));

    // The same files (the state file names its own directory), and they restore.
    const std::set<std::string> names = entries(synced_dir.path());
    REQUIRE(names == entries(unsynced_dir.path()));
    for (const std::string& name : names) {
      CAPTURE(name);
      if (name == "checkpoint") continue;
      CHECK(read_file_to_string(*default_file_system(), synced_dir / name) ==
            read_file_to_string(*default_file_system(), unsynced_dir / name));
    }
    model.set_step(9);
    unsynced.restore(sess, *latest_checkpoint(unsynced_dir.path()));
    CHECK(model.holds_step(3));
  }
}

TEST_CASE("a directory in a save's way fails it before anything is written", "[saver][failure]") {
  for (bool sharded : {false, true}) {
    const std::string data = sharded ? "m-2.data-00001-of-00002" : "m-2.data-00000-of-00001";
    for (const std::string& in_the_way :
         {std::string("m-2.index"), data, std::string("m-2.meta")}) {
      CAPTURE(sharded, in_the_way);
      TempDir dir;
      Session sess;
      Model model;
      Saver saver({.sharded = sharded, .max_to_keep = 1, .graph = &model.graph});
      model.set_step(1);
      saver.save(sess, dir / "m", {.global_step = 1});
      std::filesystem::create_directory(dir / in_the_way);
      const std::set<std::string> before = entries(dir.path());
      model.set_step(2);
      CHECK_THROWS_MATCHES(
          saver.save(sess, dir / "m", {.global_step = 2}), FailedPreconditionError,
          Catch::Message("saving checkpoint \"" + dir / "m-2" + "\": \"" + dir / in_the_way +
                         "\" is a directory, where the save must write a file; move it out of "
                         "the way"));
      CHECK(entries(dir.path()) == before);  // nothing new, m-1 not deleted
      CHECK(saver.last_checkpoints() == std::vector<std::string>{dir / "m-1"});
      REQUIRE(latest_checkpoint(dir.path()) == dir / "m-1");
      model.set_step(9);
      saver.restore(sess, dir / "m-1");
      CHECK(model.holds_step(1));
    }
  }
  SECTION("a directory named as the state file") {
    TempDir dir;
    Session sess;
    Model model;
    Saver saver({.graph = &model.graph});
    std::filesystem::create_directory(dir / "checkpoint");
    model.set_step(1);
    CHECK_THROWS_WITH(saver.save(sess, dir / "m", {.global_step = 1}),
                      Catch::Contains("\"" + dir / "checkpoint" + "\" is a directory"));
    CHECK(entries(dir.path()) == std::set<std::string>{"checkpoint"});
    CHECK(saver.last_checkpoints().empty());
  }
}

TEST_CASE("a save failing after its files are written removes them", "[saver][failure][fault]") {
  // The state file's rename fails: the new checkpoint is complete but would
  // be unlisted, so the save deletes it.
  for (bool sharded : {false, true}) {
    CAPTURE(sharded);
    TempDir dir;
    Session sess;
    FaultInjectionFileSystem fs(default_file_system());
    Model model;
    Saver saver({.sharded = sharded, .max_to_keep = 1, .graph = &model.graph, .file_system = &fs});
    model.set_step(1);
    const int renames_before = fs.count(FileOp::kRename);
    saver.save(sess, dir / "m", {.global_step = 1});
    const int renames = fs.count(FileOp::kRename) - renames_before;  // the state file's is last
    const std::set<std::string> before = entries(dir.path());
    model.set_step(2);
    fs.fail_nth(FileOp::kRename, renames);
    CHECK_THROWS_AS(saver.save(sess, dir / "m", {.global_step = 2}), UnavailableError);
    fs.clear_faults();
    CHECK(entries(dir.path()) == before);
    CHECK(saver.last_checkpoints() == std::vector<std::string>{dir / "m-1"});
    // The next save goes on from the list as it was: m-1 leaves, m-3 stays.
    model.set_step(3);
    saver.save(sess, dir / "m", {.global_step = 3});
    CHECK(latest_checkpoint(dir.path()) == dir / "m-3");
    CHECK_FALSE(std::filesystem::exists(dir / "m-1.index"));
  }
}

TEST_CASE("a save killed at a random point never corrupts the latest checkpoint",
          "[saver][failure][kill]") {
  // All runs share one directory, as a job restarted after each preemption
  // would: what the killed saves leave must not accumulate.
  constexpr int kRuns = 20;
  std::mt19937_64 gen(testing::kSeed);
  CAPTURE(testing::kSeed);
  TempDir dir;
  {
    Session sess;
    Model model(1 << 18);
    Saver saver({.graph = &model.graph});
    model.set_step(1);
    saver.save(sess, dir / "m", {.global_step = 1});
  }
  auto step_of = [](const std::string& p) { return std::stoll(p.substr(p.rfind('-') + 1)); };
  for (int run = 0; run < kRuns; ++run) {
    CAPTURE(run);
    const bool sharded = run % 2 == 1;
    const std::optional<CheckpointState> before = get_checkpoint_state(dir.path());
    REQUIRE(before.has_value());
    const int64_t first_step = step_of(before->model_checkpoint_path) + 1;
    std::uniform_int_distribution<int> delay_us(0, 60000);
    const int delay = delay_us(gen);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // A restarted job: recover the listed checkpoints, keep saving new
      // steps until killed. On the CPU whatever the binary's test device: a
      // forked child may not use the GPUs its parent set up (CUDA's rule).
      // It never returns into the test runner: an error ends it with 3,
      // which the parent reports.
      try {
        DeviceScope on_host("/cpu:0");
        Session sess;
        Model model(1 << 18);
        Saver saver({.sharded = sharded, .max_to_keep = 3, .graph = &model.graph});
        saver.recover_last_checkpoints(before->all_model_checkpoint_paths);
        for (int64_t step = first_step;; ++step) {
          model.set_step(step);
          saver.save(sess, dir / "m", {.global_step = step});
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "killed-save child: %s\n", e.what());
      }
      std::_Exit(3);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    CAPTURE(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    REQUIRE(WIFSIGNALED(status));

    const auto latest = latest_checkpoint(dir.path());
    REQUIRE(latest.has_value());
    const int64_t step = step_of(*latest);
    CAPTURE(delay, step);
    Session sess;
    Model model(1 << 18);
    model.set_step(0);
    Saver({.graph = &model.graph}).restore(sess, *latest);
    CHECK(model.holds_step(step));
    // Every checkpoint the state file lists restores too.
    const std::optional<CheckpointState> state = get_checkpoint_state(dir.path());
    REQUIRE(state.has_value());
    for (const std::string& p : state->all_model_checkpoint_paths) {
      CAPTURE(p);
      Saver({.graph = &model.graph}).restore(sess, p);
      CHECK(model.holds_step(step_of(p)));
    }
  }

  // One more save by a restarted job removes what the killed saves left:
  // temporary folders and files, and data whose index a cut-short deletion
  // removed. No index remains without its data.
  Session sess;
  Model model(1 << 18);
  const std::optional<CheckpointState> state = get_checkpoint_state(dir.path());
  REQUIRE(state.has_value());
  Saver saver({.max_to_keep = 3, .graph = &model.graph});
  saver.recover_last_checkpoints(state->all_model_checkpoint_paths);
  const int64_t last = step_of(state->model_checkpoint_path) + 1;
  model.set_step(last);
  saver.save(sess, dir / "m", {.global_step = last});
  std::set<std::string> indexes, data;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    CAPTURE(name);
    CHECK(name.find("_temp_") == std::string::npos);
    CHECK(name.find(".tempstate") == std::string::npos);
    if (name.ends_with(".index")) indexes.insert(name.substr(0, name.size() - 6));
    const auto d = name.find(".data-");
    if (d != std::string::npos) data.insert(name.substr(0, d));
  }
  CHECK(indexes == data);
  for (const std::string& c : indexes) {
    CAPTURE(c);
    CHECK(checkpoint_exists(dir / c));
    model.set_step(0);
    Saver({.graph = &model.graph}).restore(sess, dir / c);
    CHECK(model.holds_step(step_of(c)));
  }
}

}  // namespace varstate
