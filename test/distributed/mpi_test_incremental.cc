// mpi_test modes "incr_save", "incr_restore" and "incr_corrupt":
// incremental distributed saves and their chain restore (np 2).
#include <filesystem>

#include "checkpoint/checkpoint_chain.h"
#include "checkpoint/tensor_bundle.h"
#include "mpi_test_util.h"

namespace varstate::mpi_test {
namespace {

// ---------------------------------------------------------------------------
// Incremental distributed saves: a table of 2 parts (one per ps task, 64 KiB
// each: saved by rows), a dense variable and the step.

struct Tables {
  Variable w;
  PartitionedVariable emb;
  Variable step;
};

Tables build_tables() {
  Variable w(Tensor::zeros(DType::kFloat, {6, 4}), {.name = "w"});
  PartitionedVariable emb = get_variable("emb", {.shape = {4096, 8},
                                                 .initializer = zeros_initializer(),
                                                 .partitioner = fixed_size_partitioner(2)});
  Variable step(Tensor(int64_t{0}), {.name = "global_step"});
  return {w, emb, step};
}

Tensor filled(int64_t rows, float value) {
  return Tensor::filled(DType::kFloat, {rows, 8}, Tensor(value), DeviceManager::instance().cpu());
}

std::vector<int64_t> delta_ids(const std::string& checkpoint, int64_t part_offset) {
  return BundleReader(checkpoint).read(delta_ids_key("emb", part_offset)).values<int64_t>();
}

// Base at step 1, deltas at 2 and 3, each task updating rows of both parts
// (rows of the other task's part are marked at their owner); a full save of
// step 3 by another saver beside it, in DIR/full. max_to_keep 2 keeps the
// base the kept deltas need.
void incremental_save(Cluster& cluster, const std::string& dir) {
  Tables t = build_tables();
  if (cluster.is_chief()) {
    std::filesystem::create_directories(dir + "/full");
    t.w.assign(make<float>({6, 4}, [](int64_t i) { return 0.5f * static_cast<float>(i); }));
    t.emb.assign(make<float>({4096, 8}, [](int64_t i) { return static_cast<float>(i % 251); }));
    t.step.assign(Tensor(int64_t{1}));
  }
  cluster.barrier();
  DistributedSaver saver(cluster, {.max_to_keep = 2, .write_meta_graph = false});
  EXPECT(saver.save(dir + "/model", {.global_step = 1, .incremental = true}) == dir + "/model-1");
  if (cluster.is_chief()) {
    t.emb.scatter_update(i64({3, 4000}), filled(2, 7.f));
    t.step.assign(Tensor(int64_t{2}));
  } else {
    t.emb.scatter_add(i64({5, 2047, 2048}), filled(3, 1.f));
  }
  cluster.barrier();
  const std::string second = saver.save(dir + "/model", {.global_step = 2, .incremental = true});
  if (cluster.is_chief()) {
    EXPECT(BundleReader(second).contains(kChainKey));
    EXPECT(delta_ids(second, 0) == (std::vector<int64_t>{3, 5, 2047}));
    EXPECT(delta_ids(second, 2048) == (std::vector<int64_t>{2048, 4000}));
  }
  cluster.barrier();
  if (cluster.is_chief()) {
    t.w.assign_add(
        Tensor::filled(DType::kFloat, {6, 4}, Tensor(1.f), DeviceManager::instance().cpu()));
    t.step.assign(Tensor(int64_t{3}));
  } else {
    t.emb.scatter_update(i64({100, 3000}), filled(2, -2.f));
  }
  cluster.barrier();
  const std::string third = saver.save(dir + "/model", {.global_step = 3, .incremental = true});
  DistributedSaver full(cluster, {.write_meta_graph = false});
  full.save(dir + "/full/model", 3);
  if (cluster.is_chief()) {
    EXPECT(checkpoint_chain(third).size() == 3);
    EXPECT(saver.last_checkpoints() == (std::vector<std::string>{second, third}));
    EXPECT(default_file_system()->file_exists(dir + "/model-1.index"));
    EXPECT(delta_ids(third, 0) == (std::vector<int64_t>{100}));
    EXPECT(delta_ids(third, 2048) == (std::vector<int64_t>{3000}));
  }
  cluster.barrier();
}

// A fresh launch: the chain restores what the full save holds, bit for bit.
void incremental_restore(Cluster& cluster, const std::string& dir) {
  Tables t = build_tables();
  DistributedSaver saver(cluster);
  saver.restore(dir + "/model-3");
  const Tensor w = t.w.value(), emb = t.emb.as_tensor();
  const int64_t step = t.step.value().scalar<int64_t>();
  EXPECT(step == 3);
  EXPECT(emb.to_vector<float>()[4000 * 8] == 7.f);
  EXPECT(emb.to_vector<float>()[3000 * 8] == -2.f);
  cluster.barrier();
  saver.restore(dir + "/full/model-3");
  EXPECT(same(t.w.value(), w));
  EXPECT(same(t.emb.as_tensor(), emb));
  EXPECT(t.step.value().scalar<int64_t>() == step);
  cluster.barrier();
}

// A chain whose delta (task 1's shard) is corrupt, then one whose base is
// gone: every task raises the same error naming the file; nothing changes.
void incremental_corrupt(Cluster& cluster, const std::string& dir) {
  Tables t = build_tables();
  if (cluster.is_chief()) {
    std::filesystem::create_directories(dir);
    t.w.assign(Tensor::zeros(DType::kFloat, {6, 4}));
    t.emb.assign(make<float>({4096, 8}, [](int64_t i) { return static_cast<float>(i % 13); }));
    t.step.assign(Tensor(int64_t{1}));
  }
  cluster.barrier();
  DistributedSaver saver(cluster, {.write_meta_graph = false});
  saver.save(dir + "/model", {.global_step = 1, .incremental = true});
  if (cluster.is_chief()) t.emb.scatter_update(i64({1, 3000}), filled(2, 5.f));
  cluster.barrier();
  const std::string delta = saver.save(dir + "/model", {.global_step = 2, .incremental = true});
  const std::string shard1 = delta + ".data-00001-of-00002";
  if (cluster.is_chief()) {
    corrupt_byte(shard1, 2);
    t.emb.assign(make<float>({4096, 8}, [](int64_t) { return 9.f; }));
  }
  cluster.barrier();
  auto unchanged = [&] { EXPECT(t.emb.as_tensor().to_vector<float>()[3000 * 8] == 9.f); };
  EXPECT_THROWS(AbortedError, saver.restore(delta), shard1);
  unchanged();
  cluster.barrier();
  if (cluster.is_chief()) {
    corrupt_byte(shard1, 2);  // repaired
    default_file_system()->delete_file(dir + "/model-1.index");
  }
  cluster.barrier();
  EXPECT_THROWS(AbortedError, saver.restore(delta), dir + "/model-1");
  unchanged();
  cluster.barrier();
}

}  // namespace

int run_incremental(const std::string& mode, const std::string& dir) {
  Cluster cluster({.ps_tasks = 2});
  DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
  if (mode == "incr_save") incremental_save(cluster, dir);
  if (mode == "incr_restore") incremental_restore(cluster, dir);
  if (mode == "incr_corrupt") incremental_corrupt(cluster, dir);
  return finish(&cluster);
}

}  // namespace varstate::mpi_test
