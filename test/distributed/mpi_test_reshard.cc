// mpi_test modes "reshard_save" and "reshard_restore": a checkpoint written
// by N ps tasks restored into M, bitwise (np N+1, then M+1).
#include <algorithm>

#include "mpi_test_util.h"

namespace varstate::mpi_test {
namespace {

// ---------------------------------------------------------------------------
// reshard: a checkpoint written by N ps tasks (tables in N parts) restores
// into M ps tasks (M parts), bitwise; each task reads only its slices.

Tensor reshard_floats() {
  return make<float>({1000, 8}, [](int64_t i) { return static_cast<float>(i) * 0.37f - 11.f; });
}
Tensor reshard_ints() {
  return make<int64_t>({257, 3}, [](int64_t i) { return i * 1000003 - 7; });
}

struct Resharded {
  PartitionedVariable floats, ints;
};

// Under a Cluster of np ranks: np-1 ps tasks, the tables in np-1 parts.
Resharded reshard_model(Cluster& cluster) {
  const int ps = cluster.num_tasks("ps");
  DeviceScope scope(replica_device_setter({.ps_tasks = ps}));
  return {get_variable("floats", {.shape = {1000, 8},
                                  .initializer = zeros_initializer(),
                                  .partitioner = fixed_size_partitioner(ps)}),
          get_variable("ints", {.shape = {257, 3},
                                .dtype = DType::kInt64,
                                .initializer = zeros_initializer(DType::kInt64),
                                .partitioner = fixed_size_partitioner(ps)})};
}

void reshard(Cluster& cluster, const std::string& mode, const std::string& dir) {
  Resharded m = reshard_model(cluster);
  if (cluster.is_chief())
    Session().run(std::vector<Op>{m.floats.initializer(), m.ints.initializer()});
  cluster.barrier();
  DistributedSaver saver(cluster);
  if (mode == "reshard_save") {
    if (cluster.is_chief()) {
      m.floats.assign(reshard_floats());
      m.ints.assign(reshard_ints());
    }
    cluster.barrier();
    saver.save(dir + "/model", 1);
    return;
  }
  saver.restore(dir + "/model-1");
  EXPECT(same(m.floats.as_tensor(), reshard_floats()));
  EXPECT(same(m.ints.as_tensor(), reshard_ints()));
  // A corrupt byte in the last stored piece of the first data file (the
  // ints' last rows, restored by the task after that piece's verifier when
  // the tasks split it): every task fails, nothing changes.
  std::string data;
  for (const std::string& name : default_file_system()->list_dir(dir)) {
    if (name.rfind("model-1.data-00000-of-", 0) == 0) data = dir + "/" + name;
  }
  cluster.barrier();
  if (cluster.is_chief()) {
    corrupt_byte(data, static_cast<long>(default_file_system()->file_size(data)) - 1);
    m.ints.assign(Tensor::zeros(DType::kInt64, {257, 3}));
  }
  cluster.barrier();
  EXPECT_THROWS(AbortedError, saver.restore(dir + "/model-1"), "crc32c mismatch");
  EXPECT(same(m.ints.as_tensor(), Tensor::zeros(DType::kInt64, {257, 3})));
  EXPECT(same(m.floats.as_tensor(), reshard_floats()));
  cluster.barrier();
  if (cluster.is_chief()) {
    corrupt_byte(data, static_cast<long>(default_file_system()->file_size(data)) - 1);
  }
  cluster.barrier();
}

}  // namespace

int run_reshard(const std::string& mode, const std::string& dir) {
  Cluster cluster({.ps_tasks = std::max(1, world_size() - 1)});
  reshard(cluster, mode, dir);
  return finish(&cluster);
}

}  // namespace varstate::mpi_test
