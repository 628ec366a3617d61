// A parameter-server job: 1 ps task holds the embedding, every worker
// trains it with sparse updates, the chief checkpoints it. Run again on the
// same directory, it resumes from the latest checkpoint, and the saver,
// given the previous run's list, keeps the last 2 checkpoints across runs.
//
//   mpirun -np 3 build/test/ps_worker_example /tmp/ps_worker_ckpt    # 1 ps + 2 workers
//
// Every task runs the same program and builds the same variables in the
// same order (creation is collective); the ps task then waits in join().
#include <cstdio>
#include <filesystem>
#include <string>

#include "varstate/varstate.h"

using namespace varstate;

int main(int argc, char** argv) {
  const std::string ckpt_dir = argc > 1 ? argv[1] : "/tmp/ps_worker_ckpt";
  Cluster cluster({.ps_tasks = 1});  // rank 0: /job:ps/task:0, the others /job:worker/task:K
  DeviceScope on_ps(replica_device_setter({.ps_tasks = 1}));
  PartitionedVariable emb = get_variable("emb", {.shape = {1000, 16},
                                                 .initializer = zeros_initializer(),
                                                 .partitioner = fixed_size_partitioner(2)});
  Variable step = get_variable(
      "global_step",
      {.shape = {}, .dtype = DType::kInt64, .initializer = zeros_initializer(DType::kInt64)});
  DistributedSaver saver(cluster, {.max_to_keep = 2});
  if (cluster.is_chief()) Session().run(global_variables_initializer());
  // A restart: the previous run's checkpoints count against max_to_keep,
  // and training goes on from the latest.
  if (std::optional<CheckpointState> state = get_checkpoint_state(ckpt_dir)) {
    saver.recover_last_checkpoints(state->all_model_checkpoint_paths);
    saver.restore(state->model_checkpoint_path);
  }
  cluster.barrier();  // initialized before anyone trains

  if (cluster.job_name() == "worker") {
    const int w = cluster.task_index();
    for (int i = 0; i < 100; ++i) {
      // Rows of this worker's batch, one exchange with the ps per part.
      emb.scatter_add(Tensor({w, 10 + w, 999}), Tensor(1.f));
      step.assign_add(Tensor(int64_t{1}));
    }
  }
  cluster.barrier();  // every update is in
  const std::string path = saver.save(ckpt_dir + "/model", step.value().scalar<int64_t>());
  if (cluster.is_chief()) {
    const Tensor e = emb.as_tensor().to_host();  // on this task's default device, maybe a GPU
    const int64_t steps = step.value().scalar<int64_t>();  // one per update of row 999
    std::string kept;
    for (const std::string& p : saver.last_checkpoints()) kept += p + " ";
    int on_disk = 0;
    for (const auto& f : std::filesystem::directory_iterator(ckpt_dir))
      on_disk += f.path().extension() == ".index";
    std::printf("%s: step %lld, emb[999][0] = %g (expect %lld); kept: %s(%d on disk)\n",
                path.c_str(), static_cast<long long>(steps), e.data<float>()[999 * 16],
                static_cast<long long>(steps), kept.c_str(), on_disk);
  }
  cluster.shutdown();  // the ps task leaves here too
  return 0;
}
