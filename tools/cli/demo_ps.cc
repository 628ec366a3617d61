// `mpirun -np N varstate demo --ps K`: the demo's recommender as a TF1
// between-graph replicated job. Every rank builds the same graph; the
// embedding tables' parts and global_step live on the K ps tasks (ranks
// 0..K-1, replica_device_setter); the N-K workers train synchronously, data
// parallel: worker w of W takes its contiguous share of each batch of the
// single-process demo, gathers its rows, and once every worker has
// gathered (a barrier of the workers only, so all read the pre-step
// tables) scatter_subs its gradients; a second barrier ends the step. The
// ps tasks serve the rows without taking part (one-sided MPI) and join
// only the checkpoints' collectives. The step's updates are the
// single-process step's (duplicate rows add up in another order, rounding
// aside), so with the same --shards and --seed the test RMSE matches one
// process. DistributedSaver checkpoints every --save_every steps; --resume
// restores the latest and goes on from its global_step.
#include "demo_ps.h"

#include <varstate/varstate.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "demo_data.h"

namespace varstate::cli {

#ifdef VARSTATE_HAVE_MPI
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct PsModel {
  PartitionedVariable users;
  PartitionedVariable items;
  Variable global_step;
};

PartitionedVariable embedding_table(const char* scope, int64_t rows, int64_t rank, double stddev,
                                    int64_t seed) {
  auto guard = variable_scope(scope);
  return get_variable("embedding",
                      {.shape = TensorShape{rows, rank},
                       .initializer = random_normal_initializer({.stddev = stddev, .seed = seed})});
}

// The single-process demo's graph (same names, seeds and partitioning),
// placed by replica_device_setter: the tables' parts round-robin over the
// ps tasks, global_step on one of them.
PsModel build_ps_model(const PsDemoOptions& o, int64_t shards) {
  reset_default_graph();
  set_random_seed(o.seed);
  const double init_stddev = 0.5 * std::pow(static_cast<double>(o.rank), -0.25);
  DeviceScope ps(replica_device_setter({.ps_tasks = o.ps}));
  std::optional<PartitionedVariable> users, items;
  {
    auto model = variable_scope("recommender", {.partitioner = fixed_size_partitioner(shards)});
    users = embedding_table("users", o.users, o.rank, init_stddev, 1);
    items = embedding_table("items", o.items, o.rank, init_stddev, 2);
  }
  Variable step =
      get_variable("global_step", {.shape = TensorShape{},
                                   .dtype = DType::kInt64,
                                   .initializer = zeros_initializer(DType::kInt64),
                                   .trainable = false,
                                   .collections = std::vector<std::string>{
                                       GraphKeys::GLOBAL_VARIABLES, GraphKeys::GLOBAL_STEP}});
  return {*users, *items, step};
}

// Worker `index` of `count`: its share [begin, end) of a batch of n.
std::pair<size_t, size_t> share(size_t n, int index, int count) {
  const size_t w = static_cast<size_t>(index), c = static_cast<size_t>(count);
  return {n * w / c, n * (w + 1) / c};
}

// One worker's half of a synchronous step: gather() its share's rows of the
// pre-step tables, then (after the barrier) update() with its gradients.
class WorkerStep {
 public:
  explicit WorkerStep(const PsDemoOptions& o)
      : rank_(static_cast<size_t>(o.rank)),
        lr_(static_cast<float>(o.learning_rate)),
        l2_(static_cast<float>(o.l2)) {}

  void gather_rows(PsModel& m, const Ratings& train, const uint32_t* positions, size_t count) {
    positions_ = positions;
    count_ = count;
    users_.resize(count);
    items_.resize(count);
    for (size_t k = 0; k < count; ++k) {
      users_[k] = train.rows[positions[k]].user;
      items_[k] = train.rows[positions[k]].item;
    }
    if (count == 0) return;
    user_rows_ = gather(m.users, Tensor::from_vector(users_), {.device = "/cpu:0"});
    item_rows_ = gather(m.items, Tensor::from_vector(items_), {.device = "/cpu:0"});
  }

  // The gradients of the rows gathered, scatter_sub'ed; the squared errors
  // (before the update) added to `squared_error`.
  void update(PsModel& m, const Ratings& train, double& squared_error) {
    if (count_ == 0) return;
    std::vector<float> ug(count_ * rank_), ig(count_ * rank_);
    for (size_t k = 0; k < count_; ++k) {
      const float* u = user_rows_.data<float>() + k * rank_;
      const float* v = item_rows_.data<float>() + k * rank_;
      float dot = 0;
      for (size_t j = 0; j < rank_; ++j) dot += u[j] * v[j];
      const float err = dot - train.rows[positions_[k]].value;
      squared_error += static_cast<double>(err) * err;
      for (size_t j = 0; j < rank_; ++j) {
        ug[k * rank_ + j] = lr_ * (err * v[j] + l2_ * u[j]);
        ig[k * rank_ + j] = lr_ * (err * u[j] + l2_ * v[j]);
      }
    }
    const TensorShape shape{static_cast<int64_t>(count_), static_cast<int64_t>(rank_)};
    m.users.scatter_sub(Tensor::from_vector(users_), Tensor::from_vector(ug, shape));
    m.items.scatter_sub(Tensor::from_vector(items_), Tensor::from_vector(ig, shape));
  }

 private:
  size_t rank_;
  float lr_, l2_;
  const uint32_t* positions_ = nullptr;
  size_t count_ = 0;
  std::vector<int64_t> users_, items_;
  Tensor user_rows_, item_rows_;
};

// Test RMSE of the tables as they are (read whole by the caller).
double rmse(const PsModel& m, const Ratings& r, int64_t rank) {
  const Tensor users = m.users.as_tensor().to_host(), items = m.items.as_tensor().to_host();
  double sum = 0;
  for (size_t k = 0; k < r.size(); ++k) {
    const float* a = users.data<float>() + r.rows[k].user * rank;
    const float* b = items.data<float>() + r.rows[k].item * rank;
    float dot = 0;
    for (int64_t j = 0; j < rank; ++j) dot += a[j] * b[j];
    const double e = dot - r.rows[k].value;
    sum += e * e;
  }
  return r.size() ? std::sqrt(sum / static_cast<double>(r.size())) : 0.0;
}

// What this task is, one line per rank.
void introduce(Cluster& cluster, const PsModel& m) {
  if (cluster.job_name() == "ps") {
    int parts = 0;
    int64_t bytes = 0;
    for (const PartitionedVariable* t : {&m.users, &m.items}) {
      for (const Variable& part : t->variables()) {
        const std::string& at = part.placement();
        const size_t n = cluster.task_name().size();
        if (at.compare(0, n, cluster.task_name()) != 0 || (at.size() > n && at[n] != '/')) continue;
        ++parts;
        bytes += part.shape().num_elements() * 4;
      }
    }
    std::printf("[rank %d] %s: holds %d table parts (%.2f MiB), serves the workers\n",
                cluster.rank(), cluster.task_name().c_str(), parts, bytes / 1048576.0);
  } else {
    std::printf("[rank %d] %s: trains its 1/%d of every batch%s\n", cluster.rank(),
                cluster.task_name().c_str(), cluster.num_tasks("worker"),
                cluster.is_chief() ? " (chief: initializes, reports)" : "");
  }
}

// Every rank: restores the latest checkpoint of --checkpoint_dir when
// --resume finds one (keeping the listed ones for max_to_keep); the step
// to go on from.
int64_t maybe_resume(const PsDemoOptions& o, DistributedSaver& saver, PsModel& m) {
  if (!o.resume) return 0;
  const std::optional<std::string> latest = latest_checkpoint(o.checkpoint_dir);
  if (!latest) return 0;
  if (auto state = get_checkpoint_state(o.checkpoint_dir)) {
    saver.recover_last_checkpoints(state->all_model_checkpoint_paths);
  }
  saver.restore(*latest);
  return m.global_step.value().scalar<int64_t>();
}

struct RunState {
  int64_t step = 0;
  std::string last_saved;
  // Since the last progress line (the chief's share of the batches).
  double squared_error = 0;
  int64_t ratings = 0;
  int64_t reported_step = 0;
  Clock::time_point reported = Clock::now();

  void report(int64_t steps) {
    const double dt = std::max(seconds_since(reported), 1e-9);
    std::printf("step %lld/%lld: %.1f steps/s, training RMSE of the chief's share %.4f\n",
                static_cast<long long>(step), static_cast<long long>(steps),
                static_cast<double>(step - reported_step) / dt,
                std::sqrt(squared_error / std::max<double>(1.0, static_cast<double>(ratings))));
    squared_error = 0;
    ratings = 0;
    reported_step = step;
    reported = Clock::now();
  }
};

// The synchronous steps up to --steps, on every rank (the ps tasks only
// join the saves).
void train(const PsDemoOptions& o, Cluster& cluster, PsModel& m, DistributedSaver& saver,
           const Dataset* data, RunState& run) {
  const bool worker = cluster.job_name() == "worker";
  std::optional<Batches> batches;
  if (worker) batches.emplace(data->train.size(), o.batch_size, o.seed);
  WorkerStep sgd(o);
  const int64_t report_every = std::max<int64_t>(1, (o.steps - run.step) / 10);
  run.reported_step = run.step;
  while (run.step < o.steps) {
    if (worker) {
      const auto [positions, count] = batches->batch(run.step);
      const auto [begin, end] = share(count, cluster.task_index(), cluster.num_tasks("worker"));
      sgd.gather_rows(m, data->train, positions + begin, end - begin);
      run.ratings += static_cast<int64_t>(end - begin);
    }
    // The ps tasks take no part in a step: only the workers synchronize,
    // and the ps tasks wait in the next save's collectives.
    if (worker) {
      cluster.barrier("worker");  // every worker has read the pre-step rows
      sgd.update(m, data->train, run.squared_error);
      if (cluster.is_chief()) m.global_step.assign_add(Tensor(int64_t{1}));
      cluster.barrier("worker");  // the step's updates have all landed
    }
    ++run.step;
    if (run.step % o.save_every == 0 || run.step == o.steps) {
      run.last_saved = saver.save(o.checkpoint_dir + "/model", run.step);
    }
    if (cluster.is_chief() && (run.step % report_every == 0 || run.step == o.steps)) {
      run.report(o.steps);
    }
  }
}

int run_job(const PsDemoOptions& o, Cluster& cluster) {
  if (cluster.num_tasks("worker") < 1) {
    throw InvalidArgumentError("--ps " + std::to_string(o.ps) + " needs at least " +
                               std::to_string(o.ps + 1) + " ranks (mpirun -np N, N > K); got " +
                               std::to_string(cluster.size()));
  }
  const bool worker = cluster.job_name() == "worker";
  std::optional<Dataset> data;
  if (worker) {
    data = make_dataset({.users = o.users,
                         .items = o.items,
                         .rank = o.rank,
                         .ratings_per_user = o.ratings_per_user,
                         .noise = o.noise,
                         .seed = o.seed});
  }
  const int64_t shards = o.shards > 0 ? o.shards : 2 * static_cast<int64_t>(o.ps);
  PsModel m = build_ps_model(o, shards);
  if (cluster.is_chief()) Session().run(global_variables_initializer());
  cluster.barrier();
  introduce(cluster, m);
  DistributedSaver saver(cluster, {.max_to_keep = static_cast<int>(o.max_to_keep)});
  RunState run;
  run.step = maybe_resume(o, saver, m);
  const int64_t first = run.step;
  if (cluster.is_chief()) {
    std::printf("%d ps tasks, %d workers, %lld parts per table; test RMSE at step %lld: %.4f\n",
                cluster.num_tasks("ps"), cluster.num_tasks("worker"),
                static_cast<long long>(shards), static_cast<long long>(first),
                rmse(m, data->test, o.rank));
  }
  const auto t0 = Clock::now();
  train(o, cluster, m, saver, data ? &*data : nullptr, run);
  const double seconds = seconds_since(t0);
  if (cluster.is_chief()) {
    std::printf("\n%lld steps in %.2f s: %.1f steps/s\n", static_cast<long long>(run.step - first),
                seconds, static_cast<double>(run.step - first) / std::max(seconds, 1e-9));
    std::printf("test RMSE after: %.4f (train %.4f; noise level %.4f)\n",
                rmse(m, data->test, o.rank), rmse(m, data->train, o.rank), o.noise);
    std::printf("global_step = %lld; latest checkpoint: %s\n",
                static_cast<long long>(m.global_step.value().scalar<int64_t>()),
                run.last_saved.empty() ? "none (no steps run)" : run.last_saved.c_str());
  }
  cluster.barrier();
  return 0;
}

}  // namespace

int demo_ps(const PsDemoOptions& o) {
  Cluster cluster({.ps_tasks = o.ps});
  const int code = run_job(o, cluster);
  cluster.shutdown();
  return code;
}

#else

int demo_ps(const PsDemoOptions& o) {
  throw UnimplementedError("demo --ps " + std::to_string(o.ps) +
                           ": this varstate was built without MPI (VARSTATE_MPI)");
}

#endif

}  // namespace varstate::cli
