// `varstate demo --dynamic`: the demo's recommender with hash-keyed
// embedding tables (varstate/dynamic_variable.h). The user and item ids are
// turned into raw 64-bit feature hashes, as a production pipeline sees
// them, and used as keys with no remap into [0, rows): each table holds the
// ids training has seen, created on first sight (demo_dynamic.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace varstate {
class Optimizer;
}

namespace varstate::cli {

// The demo's flags that the dynamic run reads (demo_command.cc fills them).
struct DynamicDemoOptions {
  int64_t users = 0;
  int64_t items = 0;
  int64_t rank = 0;
  int64_t ratings_per_user = 0;
  double noise = 0;
  int64_t steps = 0;
  int64_t batch_size = 0;
  double l2 = 0;
  std::string checkpoint_dir;
  int64_t save_every = 0;
  int64_t max_to_keep = 0;
  bool resume = false;
  int64_t seed = 0;
  // The chosen devices ("/device:CPU:0", or the GPUs, ...): the tables live
  // on the first, sharded over all of them when there are several.
  std::vector<std::string> devices;
  bool full_checkpoints = false;  // incremental (per-key delta) saves unless set
  std::string json;               // where to write the summary; empty: nowhere
  // Admission (sightings before an id gets a row) and each table's row cap
  // as a fraction of its ids (least recently updated rows evicted past it).
  int64_t admit_after = 2;
  double row_cap = 1.0;
  // > 0: a job under mpirun (demo_dynamic.cc): the tables held by this many
  // parameter-server tasks (the first ranks), trained by the other ranks.
  int ps = 0;
  std::function<std::unique_ptr<Optimizer>()> make_optimizer;
};

// Runs the dynamic demo; the exit code.
int demo_dynamic(const DynamicDemoOptions& o);

}  // namespace varstate::cli
