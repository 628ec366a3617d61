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
// process. With --optimizer other than sgd, the parts (and their slots)
// are dealt round-robin over the workers, one optimizer per worker: every
// worker gathers the whole batch's rows, computes its gradients and
// applies those of its parts (apply_gradients on the remote parts, the
// apply under the owner's lock, moving only the batch's rows); each part
// gets the single-process step's gradient once, so again the RMSE matches
// one process. DistributedSaver checkpoints every --save_every steps;
// --resume restores the latest and goes on from its global_step.
#include "demo_ps.h"

#include <varstate/varstate.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
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
  // With --optimizer other than sgd: worker w's optimizer, over its parts.
  std::vector<std::unique_ptr<Optimizer>> optimizers;
};

// The parts worker `w` of `workers` applies with --optimizer (the users'
// parts, then the items', dealt round-robin): each part and its slots are
// written by one worker.
std::vector<Variable> worker_parts(const PsModel& m, int w, int workers) {
  std::vector<Variable> all = m.users.variables(), mine;
  all.insert(all.end(), m.items.begin(), m.items.end());
  for (size_t k = static_cast<size_t>(w); k < all.size(); k += static_cast<size_t>(workers)) {
    mine.push_back(all[k]);
  }
  return mine;
}

PartitionedVariable embedding_table(const char* scope, int64_t rows, int64_t rank, double stddev,
                                    int64_t seed) {
  auto guard = variable_scope(scope);
  return get_variable("embedding",
                      {.shape = TensorShape{rows, rank},
                       .initializer = random_normal_initializer({.stddev = stddev, .seed = seed})});
}

// The single-process demo's graph (same names, seeds and partitioning),
// placed by replica_device_setter: the tables' parts round-robin over the
// ps tasks, global_step on one of them; with --optimizer, one optimizer
// per worker over its parts, its slots (and Adam's beta powers, one pair
// per worker) beside its parts. Every rank builds the same (the remote
// variables' creation is collective).
PsModel build_ps_model(const PsDemoOptions& o, int64_t shards, int workers) {
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
  PsModel m{*users, *items, step, {}};
  if (o.optimizer == "sgd") return m;
  for (int w = 0; w < workers; ++w) {
    m.optimizers.push_back(o.make_optimizer());
    const std::vector<Variable> parts = worker_parts(m, w, workers);
    if (!parts.empty()) m.optimizers.back()->create_slots(parts);
  }
  set_deterministic_ops(true);
  return m;
}

// Worker `index` of `count`: its share [begin, end) of a batch of n.
std::pair<size_t, size_t> share(size_t n, int index, int count) {
  const size_t w = static_cast<size_t>(index), c = static_cast<size_t>(count);
  return {n * w / c, n * (w + 1) / c};
}

// The rows of a batch's ratings (at positions[0..count) of the training
// set), gathered from the tables.
class BatchRows {
 public:
  void gather_rows(PsModel& m, const Ratings& train, const uint32_t* positions, size_t count) {
    positions_ = positions;
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

  size_t count() const { return users_.size(); }
  const std::vector<int64_t>& users() const { return users_; }
  const std::vector<int64_t>& items() const { return items_; }

  // The gradient rows of the gathered rows (each `rank` wide): for rating
  // k, column j, ug = grad(err, u[j], v[j]) and ig = grad(err, v[j], u[j]),
  // err the prediction's error; the squared errors (before the update)
  // added to `squared_error`.
  template <typename Grad>
  void gradients(const Ratings& train, size_t rank, const Grad& grad, std::vector<float>& ug,
                 std::vector<float>& ig, double& squared_error) const {
    ug.resize(count() * rank);
    ig.resize(count() * rank);
    for (size_t k = 0; k < count(); ++k) {
      const float* u = user_rows_.data<float>() + k * rank;
      const float* v = item_rows_.data<float>() + k * rank;
      float dot = 0;
      for (size_t j = 0; j < rank; ++j) dot += u[j] * v[j];
      const float err = dot - train.rows[positions_[k]].value;
      squared_error += static_cast<double>(err) * err;
      for (size_t j = 0; j < rank; ++j) {
        ug[k * rank + j] = grad(err, u[j], v[j]);
        ig[k * rank + j] = grad(err, v[j], u[j]);
      }
    }
  }

 private:
  const uint32_t* positions_ = nullptr;
  std::vector<int64_t> users_, items_;
  Tensor user_rows_, item_rows_;
};

// One worker's half of a synchronous step (sgd): gather() its share's rows
// of the pre-step tables, then (after the barrier) update() with its
// gradients.
class WorkerStep {
 public:
  explicit WorkerStep(const PsDemoOptions& o)
      : rank_(static_cast<size_t>(o.rank)),
        lr_(static_cast<float>(o.learning_rate)),
        l2_(static_cast<float>(o.l2)) {}

  void gather_rows(PsModel& m, const Ratings& train, const uint32_t* positions, size_t count) {
    rows_.gather_rows(m, train, positions, count);
  }

  // The gradients of the rows gathered, scatter_sub'ed; the squared errors
  // (before the update) added to `squared_error`.
  void update(PsModel& m, const Ratings& train, double& squared_error) {
    const size_t count = rows_.count();
    if (count == 0) return;
    std::vector<float> ug, ig;
    rows_.gradients(
        train, rank_,
        [this](float err, float own, float other) { return lr_ * (err * other + l2_ * own); }, ug,
        ig, squared_error);
    const TensorShape shape{static_cast<int64_t>(count), static_cast<int64_t>(rank_)};
    m.users.scatter_sub(Tensor::from_vector(rows_.users()), Tensor::from_vector(ug, shape));
    m.items.scatter_sub(Tensor::from_vector(rows_.items()), Tensor::from_vector(ig, shape));
  }

 private:
  size_t rank_;
  float lr_, l2_;
  BatchRows rows_;
};

// One worker's half of a synchronous step with --optimizer: gather_rows()
// the whole batch's rows of the pre-step tables, then (after the barrier)
// update() computes the whole batch's gradients (cheap next to moving the
// rows) and applies those of this worker's parts with its optimizer, as the
// single-process train op does: one IndexedSlices per part, every part
// one, even empty (Adam then decays the slots of a part the batch missed).
// Each part is updated once per step, with the whole step's gradient, so
// the step is the single-process step.
class OptimizerStep {
 public:
  OptimizerStep(const PsDemoOptions& o, const PsModel& m, int worker, int workers)
      : rank_(static_cast<size_t>(o.rank)),
        l2_(static_cast<float>(o.l2)),
        optimizer_(m.optimizers.empty() ? nullptr
                                        : m.optimizers[static_cast<size_t>(worker)].get()),
        parts_(worker_parts(m, worker, workers)) {}

  void gather_rows(PsModel& m, const Ratings& train, const uint32_t* positions, size_t count) {
    rows_.gather_rows(m, train, positions, count);
  }

  void update(PsModel& m, const Ratings& train, double& squared_error) {
    const size_t n = rows_.count();
    if (n == 0 || optimizer_ == nullptr || parts_.empty()) return;
    std::vector<float> ug, ig;
    rows_.gradients(
        train, rank_, [this](float err, float own, float other) { return err * other + own * l2_; },
        ug, ig, squared_error);
    std::vector<GradientAndVariable> grads;
    add_part_gradients(m.users, rows_.users(), ug, grads);
    add_part_gradients(m.items, rows_.items(), ig, grads);
    optimizer_->apply_gradients(grads);
  }

 private:
  // The gradients (gather_gradients) of this worker's parts of `table`.
  void add_part_gradients(const PartitionedVariable& table, const std::vector<int64_t>& ids,
                          const std::vector<float>& g, std::vector<GradientAndVariable>& out) {
    const TensorShape shape{static_cast<int64_t>(ids.size()), static_cast<int64_t>(rank_)};
    for (GradientAndVariable& part :
         gather_gradients(table, Tensor::from_vector(ids), Tensor::from_vector(g, shape))) {
      const bool mine = std::any_of(parts_.begin(), parts_.end(),
                                    [&](const Variable& v) { return v.same_as(part.var); });
      if (mine) out.push_back(std::move(part));
    }
  }

  size_t rank_;
  float l2_;
  Optimizer* optimizer_;
  std::vector<Variable> parts_;
  BatchRows rows_;
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
void introduce(Cluster& cluster, const PsModel& m, const std::string& optimizer) {
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
  } else if (m.optimizers.empty()) {
    std::printf("[rank %d] %s: trains its 1/%d of every batch%s\n", cluster.rank(),
                cluster.task_name().c_str(), cluster.num_tasks("worker"),
                cluster.is_chief() ? " (chief: initializes, reports)" : "");
  } else {
    const size_t parts = m.users.size() + m.items.size();
    std::printf("[rank %d] %s: applies %s to %zu of the %zu table parts%s\n", cluster.rank(),
                cluster.task_name().c_str(), optimizer.c_str(),
                worker_parts(m, cluster.task_index(), cluster.num_tasks("worker")).size(), parts,
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
  std::optional<OptimizerStep> optimizer;
  if (worker && !m.optimizers.empty()) {
    optimizer.emplace(o, m, cluster.task_index(), cluster.num_tasks("worker"));
  }
  const int64_t report_every = std::max<int64_t>(1, (o.steps - run.step) / 10);
  run.reported_step = run.step;
  while (run.step < o.steps) {
    if (worker) {
      const auto [positions, count] = batches->batch(run.step);
      if (optimizer) {
        optimizer->gather_rows(m, data->train, positions, count);
        run.ratings += static_cast<int64_t>(count);
      } else {
        const auto [begin, end] = share(count, cluster.task_index(), cluster.num_tasks("worker"));
        sgd.gather_rows(m, data->train, positions + begin, end - begin);
        run.ratings += static_cast<int64_t>(end - begin);
      }
    }
    // The ps tasks take no part in a step: only the workers synchronize,
    // and the ps tasks wait in the next save's collectives.
    if (worker) {
      cluster.barrier("worker");  // every worker has read the pre-step rows
      if (optimizer) {
        optimizer->update(m, data->train, run.squared_error);
      } else {
        sgd.update(m, data->train, run.squared_error);
      }
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
  require_workers(cluster.num_tasks("worker"), o.ps, cluster.size());
  const bool worker = cluster.job_name() == "worker";
  std::optional<Dataset> data;
  if (worker) {
    data = dataset_of(o);
  }
  const int64_t shards = o.shards > 0 ? o.shards : 2 * static_cast<int64_t>(o.ps);
  PsModel m = build_ps_model(o, shards, cluster.num_tasks("worker"));
  if (cluster.is_chief()) Session().run(global_variables_initializer());
  cluster.barrier();
  introduce(cluster, m, o.optimizer);
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

void require_workers(int workers, int ps, int ranks) {
  if (workers >= 1) return;
  throw InvalidArgumentError("--ps " + std::to_string(ps) + " needs at least " +
                             std::to_string(ps + 1) + " ranks (mpirun -np N, N > K); got " +
                             std::to_string(ranks));
}

}  // namespace varstate::cli
