// `mpirun -np N varstate demo --ps K`: the demo's model trained by a
// multi-process job, its embedding tables on K parameter-server tasks
// (ranks 0..K-1) and trained by the N-K workers, checkpointed by a
// DistributedSaver (demo_ps.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace varstate {
class Optimizer;
}

namespace varstate::cli {

// The demo's flags that the distributed run reads (demo_command.cc fills
// them from its own).
struct PsDemoOptions {
  int64_t users = 0;
  int64_t items = 0;
  int64_t rank = 0;
  int64_t ratings_per_user = 0;
  double noise = 0;
  int64_t steps = 0;
  int64_t batch_size = 0;
  double learning_rate = 0;
  double l2 = 0;
  std::string checkpoint_dir;
  int64_t save_every = 0;
  int64_t max_to_keep = 0;
  bool resume = false;
  int64_t seed = 0;
  int64_t shards = 0;  // parts per table; 0: two per ps task
  int ps = 0;          // parameter-server tasks
  // --optimizer: "sgd" trains by scatter_sub, data parallel; any other
  // trains with make_optimizer()'s optimizer (demo_ps.cc).
  std::string optimizer = "sgd";
  std::function<std::unique_ptr<Optimizer>()> make_optimizer;
};

// The check of a job's size every --ps demo makes: InvalidArgumentError
// unless some of the `ranks` ranks are workers (`workers` > 0).
void require_workers(int workers, int ps, int ranks);

// Runs this rank's task of the job; the exit code. Every rank of the job
// calls it with the same options. UnimplementedError when varstate was
// built without MPI.
int demo_ps(const PsDemoOptions& o);

}  // namespace varstate::cli
