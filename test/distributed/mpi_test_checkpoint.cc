// mpi_test modes of the DistributedSaver: "save" a known model (np 4),
// "restore" it into another partitioning (np 3), "check" it in one process
// with a plain Saver; "kill" (a task dies mid-save), "check_killed" and
// "save_after_kill" (the restarted job); "corrupt" (all-or-nothing restore);
// "retain" (max_to_keep across a restart).
#include <optional>

#include "mpi_test_util.h"
#include "runtime/remote_storage.h"

namespace varstate::mpi_test {
namespace {

// A checkpoint whose shard of ps task 1 is corrupt, then one missing a
// shard: restore fails on every task with the same error naming the file,
// and no task's variables change.
void test_corrupt_restore(Cluster& cluster, Model& m, const std::string& dir) {
  DistributedSaver saver(cluster);
  if (cluster.is_chief()) set_model(m, 7);
  cluster.barrier();
  const std::string path = saver.save(dir + "/model", 7);
  const std::string shard1 = path + ".data-00001-of-00002";
  const std::string shard0 = path + ".data-00000-of-00002";
  if (cluster.is_chief()) {
    corrupt_byte(shard1, 2);
    m.w.assign(Tensor::zeros(DType::kFloat, {6, 4}));
    m.emb.assign(Tensor::zeros(DType::kFloat, {10, 3}));
    m.step.assign(Tensor(int64_t{9}));
  }
  cluster.barrier();
  auto unchanged = [&] {
    EXPECT(same(m.w.value(), Tensor::zeros(DType::kFloat, {6, 4})));
    EXPECT(same(m.emb.as_tensor(), Tensor::zeros(DType::kFloat, {10, 3})));
    EXPECT(m.step.value().scalar<int64_t>() == 9);
  };
  EXPECT_THROWS(AbortedError, saver.restore(path), "/job:ps/task:1, no variable changed");
  EXPECT_THROWS(AbortedError, saver.restore(path), shard1);
  unchanged();
  cluster.barrier();
  if (cluster.is_chief()) {
    corrupt_byte(shard1, 2);  // repaired
    default_file_system()->delete_file(shard0);
  }
  cluster.barrier();
  EXPECT_THROWS(AbortedError, saver.restore(path), shard0);
  unchanged();
  cluster.barrier();
}

// Two "jobs" with max_to_keep 2 on one directory: the second recovers the
// first's list, so 2 checkpoints remain, not 4. Then a save whose index
// path is a directory fails on every task and leaves nothing new.
void test_retention(Cluster& cluster, const std::string& dir) {
  auto path = [&](int step) { return dir + "/model-" + std::to_string(step); };
  {
    DistributedSaver first(cluster, {.max_to_keep = 2});
    for (int step = 1; step <= 3; ++step) first.save(dir + "/model", step);
    EXPECT(first.last_checkpoints() == (std::vector<std::string>{path(2), path(3)}));
  }
  DistributedSaver second(cluster, {.max_to_keep = 2});
  // Rank 0's list wins, and every task agrees on it.
  second.set_last_checkpoints({path(100 + cluster.rank())});
  EXPECT(second.last_checkpoints() == std::vector<std::string>{path(100)});
  const std::optional<CheckpointState> state = get_checkpoint_state(dir);
  EXPECT(state.has_value());
  std::vector<std::string> listed =
      state ? state->all_model_checkpoint_paths : std::vector<std::string>{};
  listed.insert(listed.begin(), path(0));  // listed but gone: dropped
  second.recover_last_checkpoints(listed);
  EXPECT(second.last_checkpoints() == (std::vector<std::string>{path(2), path(3)}));
  for (int step = 4; step <= 5; ++step) second.save(dir + "/model", step);
  if (cluster.is_chief()) {
    EXPECT(indexes(dir) == 2);
    EXPECT(default_file_system()->file_exists(path(4) + ".index"));
    EXPECT(default_file_system()->file_exists(path(5) + ".index"));
  }
  cluster.barrier();

  // A directory where the index goes: every task fails, naming it on rank 0.
  if (cluster.is_chief()) default_file_system()->create_dir(path(6) + ".index");
  cluster.barrier();
  EXPECT_THROWS(AbortedError, second.save(dir + "/model", 6),
                "\"" + path(6) + ".index\" is a directory");
  if (cluster.is_chief()) {
    default_file_system()->delete_dir(path(6) + ".index");
    EXPECT(match_files(*default_file_system(), path(6) + "*").empty());
    EXPECT(temporaries(dir) == 0);
    EXPECT(latest_checkpoint(dir) == path(5));
  }
  EXPECT(second.last_checkpoints() == (std::vector<std::string>{path(4), path(5)}));
  cluster.barrier();
}

}  // namespace

int run_check(const std::string& mode, const std::string& dir) {
  // Unpartitioned here: emb restores from the saved slices.
  Variable w(Tensor::zeros(DType::kFloat, {6, 4}), {.name = "w"});
  Variable emb = get_variable("emb", {.shape = {10, 3}, .initializer = zeros_initializer()});
  Variable step(Tensor(int64_t{0}), {.name = "global_step"});
  EXPECT(internal::remote_storage(w) == nullptr);
  Saver saver;
  const auto latest = latest_checkpoint(dir);
  EXPECT(latest.has_value());
  if (mode == "check_killed") {
    EXPECT(latest && *latest == dir + "/model-1");
    EXPECT(!default_file_system()->file_exists(dir + "/model-2.index"));
  }
  if (latest) {
    saver.restore(Session(), *latest);
    EXPECT(same(w.value(), w_value()));
    EXPECT(same(emb.value(), emb_value()));
    EXPECT(step.value().scalar<int64_t>() == (mode == "check" ? 7 : 1));
    // Rank 0 wrote the meta graph: a fresh program recreates the model
    // (emb in the 2 parts the ps tasks held) and a saver for the checkpoint.
    Graph fresh;
    std::optional<Saver> imported = import_meta_graph(*latest + ".meta", {.graph = &fresh});
    EXPECT(imported.has_value());
    if (imported) {
      imported->restore(Session(), *latest);
      EXPECT(same(fresh.find_variable("w")->value(), w_value()));
      EXPECT(fresh.find_variable("global_step")->value().scalar<int64_t>() ==
             (mode == "check" ? 7 : 1));
      EXPECT(fresh.find_variable("w")->placement().find("/job:ps/task:") == 0);
      Tensor part0 = fresh.find_variable("emb/part_0")->value();
      Tensor part1 = fresh.find_variable("emb/part_1")->value();
      EXPECT(part0.shape() == TensorShape({5, 3}) && part1.shape() == TensorShape({5, 3}));
      std::vector<float> both = part0.to_vector<float>();
      for (float x : part1.to_vector<float>()) both.push_back(x);
      EXPECT(same(Tensor::from_vector<float>(both, TensorShape({10, 3})), emb_value()));
    }
  }
  std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "passed", g_failures);
  return g_failures ? 1 : 0;
}

int run_checkpoint(const std::string& mode, const std::string& dir) {
  if (mode == "save_after_kill") {
    // The restarted job: its next distributed save into the directory of
    // the killed one removes the temporary folder the dead task's save
    // left, and, the previous list recovered, the checkpoints beyond
    // max_to_keep.
    Cluster cluster({.ps_tasks = 2});
    DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
    Model m = build_model(2);
    if (cluster.is_chief()) set_model(m, 3);
    cluster.barrier();
    DistributedSaver saver(cluster, {.max_to_keep = 1});
    if (auto state = get_checkpoint_state(dir)) {
      saver.recover_last_checkpoints(state->all_model_checkpoint_paths);
    }
    EXPECT(saver.last_checkpoints() == std::vector<std::string>{dir + "/model-1"});
    if (cluster.is_chief()) EXPECT(temporaries(dir) == 1);
    cluster.barrier();
    EXPECT(saver.save(dir + "/model", 3) == dir + "/model-3");
    if (cluster.is_chief()) {
      EXPECT(temporaries(dir) == 0);
      EXPECT(latest_checkpoint(dir) == dir + "/model-3");
      EXPECT(!default_file_system()->file_exists(dir + "/model-1.index"));
      EXPECT(indexes(dir) == 1);
    }
    cluster.barrier();
    return finish(&cluster);
  }
  if (mode == "corrupt") {
    Cluster cluster({.ps_tasks = 2});
    DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
    Model m = build_model(2);
    test_corrupt_restore(cluster, m, dir);
    return finish(&cluster);
  }
  if (mode == "retain") {
    Cluster cluster({.ps_tasks = 2});
    DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
    Model m = build_model(2);
    if (cluster.is_chief()) set_model(m, 1);
    cluster.barrier();
    test_retention(cluster, dir);
    return finish(&cluster);
  }
  const int ps_tasks = mode == "restore" ? 1 : 2;
  Cluster cluster({.ps_tasks = ps_tasks});
  DeviceScope ps(replica_device_setter({.ps_tasks = ps_tasks}));
  Model m = build_model(mode == "restore" ? 3 : 2);
  if (mode == "restore") {
    DistributedSaver saver(cluster);
    saver.restore(dir + "/model-7");
    check_model(m, 7);
    // Every task reads what the others restored.
    EXPECT(m.emb[2].is_initialized());
  } else {
    DyingFileSystem dying(/*limit=*/24);
    const bool dies = mode == "kill" && cluster.rank() == 1;
    DistributedSaver saver(cluster, {.file_system = dies ? &dying : nullptr});
    if (cluster.is_chief()) set_model(m, mode == "save" ? 7 : 1);
    cluster.barrier();
    if (mode == "save") {
      const std::string path = saver.save(dir + "/model", 7);
      EXPECT(path == dir + "/model-7");
      EXPECT(latest_checkpoint(dir) == path);
      // The two ps tasks hold every variable: two shards, one each.
      EXPECT(default_file_system()->file_exists(dir + "/model-7.data-00000-of-00002"));
      EXPECT(default_file_system()->file_exists(dir + "/model-7.data-00001-of-00002"));
      // Restore brings back the saved values after they changed.
      cluster.barrier();
      if (cluster.is_chief()) m.emb.assign(Tensor::zeros(DType::kFloat, {10, 3}));
      cluster.barrier();
      saver.restore(path);
      check_model(m, 7);
    } else {
      saver.save(dir + "/model", 1);  // completes
      if (cluster.is_chief()) m.step.assign(Tensor(int64_t{2}));
      dying.armed = true;
      cluster.barrier();
      saver.save(dir + "/model", 2);  // rank 1 dies in it; mpirun ends the job
      std::fprintf(stderr, "[rank %d] the second save returned\n", g_rank);
    }
  }
  cluster.barrier();
  return finish(&cluster);
}

}  // namespace varstate::mpi_test
