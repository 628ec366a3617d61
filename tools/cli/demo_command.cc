// `varstate demo`: the main job, a matrix-factorization recommender trained
// end to end through varstate's public API, the way a TensorFlow 1 training
// program does it:
//
//   * a synthetic ratings matrix of known low rank plus Gaussian noise
//     (users x items, a few ratings per user; 10% held out for testing);
//   * user and item embedding tables made by get_variable under
//     variable_scopes, partitioned by fixed_size_partitioner and spread
//     round-robin over the chosen devices (every GPU when there are GPUs,
//     the CPU otherwise), initialized by a seeded random_normal_initializer;
//   * training with a TensorFlow 1 optimizer (--optimizer: sgd, momentum,
//     adagrad, adam, or varstate's rowwise-adagrad): each step gathers the
//     rows of one mini-batch, computes the gradients of the squared error
//     (plus L2) for the whole batch at once with varstate's tensor ops on
//     the tables' device (a GPU when the tables are there: the step never
//     waits for the host), splits them per part as IndexedSlices and
//     applies them with one optimizer.apply_gradients call, which updates
//     the parts and their slot variables (on the parts' devices) and counts
//     global_step; op determinism makes every run bit-identical;
//   * a sharded Saver every --save_every steps (max_to_keep), incremental
//     (deltas of the changed rows on a base) unless --full_checkpoints,
//     --resume restoring the latest checkpoint (or, when it does not
//     restore, the newest listed one that does; a delta through its chain)
//     and continuing with the same batches an uninterrupted run would have
//     seen; max_to_keep counts the previous runs' checkpoints too.
//
// The batch of step s depends only on (seed, s), so the same --seed gives
// the same final values, resumed or not (with --full_checkpoints, a
// bit-identical final checkpoint). The checkpoints hold the optimizer's
// slots ("recommender/users/embedding/Adam", ...) and Adam's beta1_power and
// beta2_power, so a resumed run continues exactly as an uninterrupted one.
//
// Read it as the program to copy, phase by phase: build_model (variables,
// partitioning, placement, the optimizer), Predictor (the forward pass),
// TrainStep (one training step), Evaluator (RMSE), Checkpoints (save and
// resume), train (the loop) and demo(), which checks
// the sizes and runs the phases in order. The synthetic data and the batch
// order are in demo_data.h.
#include <unistd.h>

#include <varstate/varstate.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "commands.h"
#include "demo_data.h"
#include "demo_dynamic.h"
#include "demo_ps.h"

namespace varstate::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct DemoOptions {
  int64_t users = 50'000;
  int64_t items = 10'000;
  int64_t rank = 16;
  int64_t ratings_per_user = 50;
  double noise = 0.1;
  int64_t steps = 4'000;
  int64_t batch_size = 8'192;
  std::string optimizer = "sgd";
  double learning_rate = 0;  // set from --optimizer unless --learning_rate is given
  double l2 = 0.002;
  std::string checkpoint_dir = (std::filesystem::temp_directory_path() / "varstate-demo").string();
  int64_t save_every = 1'000;
  int64_t max_to_keep = 3;
  bool resume = false;
  bool full_checkpoints = false;  // incremental (delta) checkpoints unless set
  int64_t seed = 2026;
  std::string device;            // cpu, gpu or all; default: gpu when there are GPUs, else cpu
  int64_t shards = 0;            // 0: two per device
  std::string json;              // where to write the run's summary as JSON; empty: nowhere
  bool atomic_scatters = false;  // GPU sparse updates on the atomic path
};

// ---- Sizes: checked before anything is allocated -----------------------------

// The most entries the demo's ratings and each of its tables may hold: ids
// are int32 and batch positions uint32; 2^31 floats make an 8 GiB table.
constexpr int64_t kMaxEntries = int64_t{1} << 31;

// Throws unless a x b entries stay within kMaxEntries; `flags` names a and
// b, `what` says what the product counts. b >= 1 (the flags' checks).
void check_entries(const std::string& flags, int64_t a, int64_t b, const std::string& what) {
  if (a > kMaxEntries / b) {
    throw InvalidArgumentError(flags + " (" + std::to_string(a) + " x " + std::to_string(b) +
                               ") must stay below 2^31: " + what);
  }
}

// Every size flag and product of sizes, before the data and the tables are
// allocated. The flags' own checks already made every count >= its minimum.
void check_sizes(const DemoOptions& o) {
  if (o.batch_size < 1) throw InvalidArgumentError("--batch_size must be >= 1");
  if (o.users > kMaxEntries / o.ratings_per_user || o.items > kMaxEntries) {
    throw InvalidArgumentError("--users x --ratings_per_user (" + std::to_string(o.users) + " x " +
                               std::to_string(o.ratings_per_user) + ") and --items (" +
                               std::to_string(o.items) + ") must stay below 2^31");
  }
  check_entries("--users x --rank", o.users, o.rank, "the entries of the user table");
  check_entries("--items x --rank", o.items, o.rank, "the entries of the item table");
  // A batch holds --batch_size ratings, or every rating when there are fewer.
  const int64_t batch_rows = std::min(o.batch_size, o.users * o.ratings_per_user);
  check_entries("a batch (--batch_size, at most --users x --ratings_per_user) x --rank", batch_rows,
                o.rank, "the gradients of a batch");
  if (o.max_to_keep > std::numeric_limits<int>::max()) {
    throw InvalidArgumentError("--max_to_keep " + std::to_string(o.max_to_keep) +
                               " must be at most " +
                               std::to_string(std::numeric_limits<int>::max()));
  }
}

// Devices to shard the tables over, as device strings.
std::vector<std::string> chosen_devices(const std::string& which) {
  auto& dm = DeviceManager::instance();
  std::vector<std::string> gpus;
  for (int i = 0; i < dm.num_gpus(); ++i) gpus.push_back(dm.gpu(i).name());
  const std::string cpu = "/device:CPU:0";
  if (which == "cpu") return {cpu};
  if (which == "gpu") {
    if (gpus.empty()) {
      throw InvalidArgumentError("--device gpu: no GPU found (devices: " + dm.device_list() + ")");
    }
    return gpus;
  }
  if (which == "all") {
    gpus.push_back(cpu);
    return gpus;
  }
  // The default: real GPUs if any; emulated ones (VARSTATE_CUDA=EMULATE)
  // only when asked for, as they run the kernels on this CPU.
  const bool real_gpus = !gpus.empty() && !dm.gpu(0).emulated();
  return real_gpus ? gpus : std::vector<std::string>{cpu};
}

// Parts per table: --shards, or two per device; at most a table's rows.
int64_t table_shards(const DemoOptions& o, size_t num_devices) {
  const int64_t shards = o.shards > 0 ? o.shards : 2 * static_cast<int64_t>(num_devices);
  if (shards > std::min(o.users, o.items)) {
    throw InvalidArgumentError("--shards " + std::to_string(shards) +
                               " is more than the rows of a table (" +
                               std::to_string(std::min(o.users, o.items)) + ")");
  }
  return shards;
}

// Seconds spent in each phase, for the closing "time:" line.
struct Timings {
  double data = 0, init = 0, restore = 0, read = 0, grads = 0, apply = 0, save = 0, eval = 0;
  double accounted() const { return data + init + restore + read + grads + apply + save + eval; }
};

// ---- The model: variables, partitioning, placement ---------------------------

// What a TF1 program keeps as Python handles to its graph's variables.
struct Model {
  PartitionedVariable users;  // recommender/users/embedding: users x rank
  PartitionedVariable items;  // recommender/items/embedding: items x rank
  Variable global_step;       // int64 scalar on the CPU, in GraphKeys::GLOBAL_STEP
  // The train op's optimizer; its slots (and Adam's beta powers) are
  // variables next to each part, saved with the model.
  std::shared_ptr<Optimizer> optimizer;
};

// with tf.variable_scope(scope): tf.get_variable("embedding", [rows, rank],
// initializer=tf.random_normal_initializer(stddev=..., seed=...)). The
// enclosing scope's partitioner makes it a PartitionedVariable.
PartitionedVariable embedding_table(const char* scope, int64_t rows, int64_t rank, double stddev,
                                    int64_t seed) {
  auto guard = variable_scope(scope);
  return get_variable("embedding",
                      {.shape = TensorShape{rows, rank},
                       .initializer = random_normal_initializer({.stddev = stddev, .seed = seed})});
}

// tf.train.get_or_create_global_step(): a non-trainable int64 counter on
// the CPU.
Variable make_global_step() {
  DeviceScope cpu("/device:CPU:0");
  return get_or_create_global_step();
}

// The optimizers of --optimizer: TensorFlow 1.x's, with TensorFlow's
// defaults except the learning rate, which is each one's best for this
// model at the default sizes unless --learning_rate is given. sgd, the
// default, reaches the lowest test RMSE in 4,000 steps (docs/cli.md: the
// comparison). rowwise-adagrad is varstate's, not TensorFlow's.
struct OptimizerChoice {
  const char* flag;      // the --optimizer value
  double learning_rate;  // the default
};
constexpr OptimizerChoice kOptimizers[] = {
    {"sgd", 0.1}, {"momentum", 0.01}, {"adagrad", 0.5}, {"adam", 0.03}, {"rowwise-adagrad", 0.5}};

double default_learning_rate(const std::string& optimizer) {
  for (const OptimizerChoice& c : kOptimizers) {
    if (optimizer == c.flag) return c.learning_rate;
  }
  throw InvalidArgumentError("--optimizer \"" + optimizer + "\" is not one of the demo's");
}

// tf.compat.v1.train.GradientDescentOptimizer(lr), MomentumOptimizer(lr,
// 0.9), AdagradOptimizer(lr), AdamOptimizer(lr) or varstate's
// RowwiseAdagradOptimizer(lr).
std::unique_ptr<Optimizer> make_optimizer(const std::string& optimizer, double learning_rate) {
  if (optimizer == "sgd") return std::make_unique<GradientDescentOptimizer>(learning_rate);
  if (optimizer == "momentum") return std::make_unique<MomentumOptimizer>(learning_rate, 0.9);
  if (optimizer == "adagrad") return std::make_unique<AdagradOptimizer>(learning_rate);
  if (optimizer == "adam") {
    return std::make_unique<AdamOptimizer>(AdamOptions{.learning_rate = learning_rate});
  }
  if (optimizer == "rowwise-adagrad") {
    return std::make_unique<RowwiseAdagradOptimizer>(learning_rate);
  }
  throw InvalidArgumentError("--optimizer \"" + optimizer + "\" is not one of the demo's");
}

// The graph of the recommender, fresh and seeded (tf.reset_default_graph(),
// tf.set_random_seed): both tables under variable_scope("recommender") with
// fixed_size_partitioner(shards), their parts placed round-robin on
// `devices` by a device function (with tf.device(fn)), the global step, and
// the optimizer with its slots made now, as building the train op does, so
// that the Saver built next saves and restores them. Op determinism
// (tf.config.experimental.enable_op_determinism) makes the updates
// bit-identical run to run, on GPUs and for any CPU thread count.
Model build_model(const DemoOptions& o, const std::vector<std::string>& devices, int64_t shards) {
  reset_default_graph();
  set_random_seed(o.seed);
  const double init_stddev = 0.5 * std::pow(static_cast<double>(o.rank), -0.25);
  std::optional<PartitionedVariable> users, items;
  {
    size_t next = 0;
    DeviceScope placement([&devices, next](const PlacementRequest&) mutable {
      return devices[next++ % devices.size()];
    });
    auto model = variable_scope("recommender", {.partitioner = fixed_size_partitioner(shards)});
    users = embedding_table("users", o.users, o.rank, init_stddev, 1);
    items = embedding_table("items", o.items, o.rank, init_stddev, 2);
  }
  Model model{*users, *items, make_global_step(), make_optimizer(o.optimizer, o.learning_rate)};
  std::vector<Variable> parts = model.users.variables();
  parts.insert(parts.end(), model.items.begin(), model.items.end());
  model.optimizer->create_slots(parts);
  // Sorted, bitwise run to run, unless asked otherwise (only a GPU has an
  // atomic path; the CPU's results are the same either way).
  set_deterministic_ops(!o.atomic_scatters);
  return model;
}

// ---- The model's math: predictions on the tables' device -------------------

// A batch of ratings as the step's inputs (the feed_dict of TF1): the ids
// stay on the host, where gather and gather_gradients route each row to its part;
// the ratings go to the device the math runs on, as a [n, 1] column.
struct Batch {
  Tensor user_ids, item_ids;  // int64 [n]
  Tensor ratings;             // float32 [n, 1]
};

// The rows a batch read and its prediction errors (u.v - rating), [n, 1].
struct Forward {
  Tensor user_rows, item_rows;  // [n, rank]
  Tensor errors;                // [n, 1]
};

// The forward pass, batched with varstate's ops on the device of the first
// part of the user table (a GPU when the tables are on GPUs): gather the
// batch's rows there and take every rating's dot product at once.
class Predictor {
 public:
  Predictor(const Model& m, int64_t rank)
      : device_(m.users.variables().front().device()),
        ones_(Tensor::filled(DType::kFloat, TensorShape{rank, 1}, Tensor(1.0f), device_)) {}

  Device& device() const { return device_; }

  // The ratings of `r` at positions[0..count).
  Batch feed(const Ratings& r, const uint32_t* positions, size_t count) {
    user_ids_.resize(count);
    item_ids_.resize(count);
    ratings_.resize(count);
    // Random ratings of a 30 MB set: each a cache miss, prefetched a few
    // ratings ahead so that the misses overlap.
    constexpr size_t kAhead = 48;
    for (size_t k = 0; k < count; ++k) {
      if (k + kAhead < count) __builtin_prefetch(&r.rows[positions[k + kAhead]]);
      const Rating& x = r.rows[positions[k]];
      user_ids_[k] = x.user;
      item_ids_[k] = x.item;
      ratings_[k] = x.value;
    }
    const TensorShape column{static_cast<int64_t>(count), 1};
    return {Tensor::from_vector(user_ids_), Tensor::from_vector(item_ids_),
            Tensor::from_vector(ratings_, column).on(device_)};
  }

  // tf.gather of each table's rows, then
  // errors = tf.reduce_sum(u * v, axis=1, keepdims=True) - ratings, the
  // row sums taken as one matrix product with a column of ones.
  Forward forward(const Model& m, const Batch& b) const {
    Forward f{gather(m.users, b.user_ids, {.device = device_.name()}),
              gather(m.items, b.item_ids, {.device = device_.name()}), Tensor()};
    f.errors = matmul(f.user_rows * f.item_rows, ones_) - b.ratings;
    return f;
  }

 private:
  Device& device_;
  Tensor ones_;  // [rank, 1]
  std::vector<int64_t> user_ids_, item_ids_;
  std::vector<float> ratings_;
};

// The sum of a [n, 1] column's squares as a [1, 1] tensor on its device
// (tf.reduce_sum(tf.square(e))): errors' transpose times themselves.
Tensor sum_of_squares(const Tensor& column) { return matmul(column, column, true); }

// ---- Training: one optimizer step ------------------------------------------

// One training step on a mini-batch, what sess.run(train_op) does in TF1
// with train_op = optimizer.apply_gradients(grads_and_vars, global_step):
// the forward pass, the gradients of the squared error plus L2 for the
// batch's rows (tensors on the tables' device), then one apply_gradients
// call that updates every part of both tables (and the optimizer's slots,
// on the same devices) with its IndexedSlices and adds 1 to global_step.
// Nothing travels back to the host: the training loss accumulates on the
// device until take_squared_error() reads it.
class TrainStep {
 public:
  TrainStep(const DemoOptions& o, const Model& m)
      : predictor_(m, o.rank),
        l2_(Tensor(static_cast<float>(o.l2)).on(predictor_.device())),
        squared_error_(Tensor::zeros(DType::kFloat, TensorShape{1, 1}, predictor_.device())) {}

  // Trains on the ratings of `train` at positions[0..count).
  void run(Model& m, const Ratings& train, const uint32_t* positions, size_t count, Timings& time) {
    const auto t0 = Clock::now();
    const Batch batch = predictor_.feed(train, positions, count);
    const Forward f = predictor_.forward(m, batch);
    const auto t1 = Clock::now();
    time.read += std::chrono::duration<double>(t1 - t0).count();
    // The gradients of (u.v - rating)^2 / 2 + l2 (|u|^2 + |v|^2) / 2 with
    // respect to u and v: err v + l2 u and err u + l2 v, each [n, rank]
    squared_error_ = squared_error_ + sum_of_squares(f.errors);
    // (errors [n, 1] broadcast over the rank; multiply_add computes
    // x * y + z * w in one pass, bitwise the separate ops.)
    const Tensor user_grads = multiply_add(f.errors, f.item_rows, f.user_rows, l2_);
    const Tensor item_grads = multiply_add(f.errors, f.user_rows, f.item_rows, l2_);
    // The gradients of the two gathers: one IndexedSlices per part
    // (TensorFlow's embedding_lookup gradient).
    std::vector<GradientAndVariable> grads_and_vars =
        gather_gradients(m.users, batch.user_ids, user_grads);
    for (GradientAndVariable& g : gather_gradients(m.items, batch.item_ids, item_grads)) {
      grads_and_vars.push_back(std::move(g));
    }
    const auto t2 = Clock::now();
    time.grads += std::chrono::duration<double>(t2 - t1).count();
    m.optimizer->apply_gradients(grads_and_vars, &m.global_step);
    time.apply += seconds_since(t2);
  }

  // The squared errors (before each update) summed since the last call.
  // Reads one number from the device.
  double take_squared_error() {
    const double sum = squared_error_.to_host().data<float>()[0];
    squared_error_ = Tensor::zeros(DType::kFloat, TensorShape{1, 1}, predictor_.device());
    return sum;
  }

 private:
  Predictor predictor_;
  Tensor l2_;             // a scalar on the device
  Tensor squared_error_;  // [1, 1] on the device
};

// ---- Evaluation: RMSE --------------------------------------------------------

// The model as evaluated: every rating predicted by the same forward pass
// as training, in chunks, on the tables' device; one number per chunk
// comes back to the host.
class Evaluator {
 public:
  Evaluator(const Model& m, int64_t rank) : model_(m), rank_(rank) {}

  // Root mean squared error of the predictions of `r` (0 for no ratings).
  double rmse(const Ratings& r) const {
    Predictor predictor(model_, rank_);
    std::vector<uint32_t> positions(r.size());
    std::iota(positions.begin(), positions.end(), 0u);
    double sum = 0;
    for (size_t begin = 0; begin < r.size(); begin += kChunk) {
      const size_t count = std::min(kChunk, r.size() - begin);
      const Forward f = predictor.forward(model_, predictor.feed(r, &positions[begin], count));
      sum += sum_of_squares(f.errors).to_host().data<float>()[0];
    }
    return r.size() ? std::sqrt(sum / static_cast<double>(r.size())) : 0.0;
  }

 private:
  // Ratings per chunk: bounds the rows held at once.
  static constexpr size_t kChunk = 32'768;
  const Model& model_;
  int64_t rank_;
};

// ---- Checkpoints: save and resume ------------------------------------------

// tf.train.Saver(sharded=True, max_to_keep=N, save_relative_paths=True)
// writing DIR/model-STEP: one data shard per device that holds variables, an
// index, the meta graph, and the "checkpoint" file naming the latest (what
// tf.train.latest_checkpoint reads). Older checkpoints beyond max_to_keep
// are deleted, except a base or delta a kept one needs. Saves are
// incremental (only the embedding rows changed since the previous save, on
// top of it; varstate/checkpoint_chain.h) unless --full_checkpoints. The
// state file's paths are relative to DIR, so a copied or moved folder
// resumes from its own files.
class Checkpoints {
 public:
  explicit Checkpoints(const DemoOptions& o)
      : saver_({.sharded = true,
                .max_to_keep = static_cast<int>(o.max_to_keep),
                .save_relative_paths = true}),
        incremental_(!o.full_checkpoints),
        dir_(o.checkpoint_dir),
        prefix_((std::filesystem::path(o.checkpoint_dir) / "model").string()) {}

  // --resume: the step to go on from, which is the restored global_step (0
  // when nothing restores). As a TF1 program does after a restart:
  //   state = tf.train.get_checkpoint_state(dir)
  //   saver.recover_last_checkpoints(state.all_model_checkpoint_paths)
  //   saver.restore(sess, <the newest of them that restores>)
  // Recovering the list makes max_to_keep span restarts: the next save
  // deletes the previous run's checkpoints beyond it. A checkpoint that does
  // not restore (a data shard lost) is skipped with a warning for the one
  // before it; the restore of a skipped one changed no variable.
  int64_t restore_latest(Session& sess, const Model& m, Timings& time) {
    const auto t0 = Clock::now();
    const std::vector<std::string> listed = listed_checkpoints();
    saver_.recover_last_checkpoints(listed);
    remove_orphans(listed);
    for (auto it = listed.rbegin(); it != listed.rend(); ++it) {
      try {
        saver_.restore(sess, *it);
      } catch (const Error& e) {
        std::fprintf(stderr, "warning: --resume: skipping checkpoint %s: %s\n", it->c_str(),
                     e.what());
        continue;
      }
      const int64_t step = m.global_step.value().to_host().scalar<int64_t>();
      time.restore = seconds_since(t0);
      std::printf("resumed from %s at step %lld\n", it->c_str(), static_cast<long long>(step));
      return step;
    }
    if (listed.empty()) {
      std::printf("--resume: no checkpoint in %s yet, starting at step 0\n", dir_.c_str());
    } else {
      std::printf("--resume: no checkpoint in %s restores, starting at step 0\n", dir_.c_str());
    }
    return 0;
  }

  // saver.save(sess, dir/model, global_step=global_step): the path written.
  std::string save(Session& sess, const Model& m) {
    return *saver_.save(sess, prefix_, {.global_step = m.global_step, .incremental = incremental_})
                .path();
  }

 private:
  // A run killed between writing the state file and deleting its oldest
  // checkpoint leaves that checkpoint on disk, unlisted (as TensorFlow's
  // Saver would). The folder is the demo's and it keeps no hour-based
  // checkpoints, so every unlisted "model-N" older than the newest listed
  // one is such a leftover: removed, so that retention holds across kills.
  void remove_orphans(const std::vector<std::string>& listed) const {
    if (listed.empty()) return;
    const auto step_of = [](const std::string& name) -> std::optional<int64_t> {
      static const std::regex pattern("model-([0-9]{1,18})");
      std::smatch m;
      if (!std::regex_match(name, m, pattern)) return std::nullopt;
      return std::stoll(m[1].str());
    };
    const std::optional<int64_t> newest =
        step_of(std::filesystem::path(listed.back()).filename().string());
    if (!newest) return;
    std::set<std::string> kept;
    for (const std::string& p : listed) {
      kept.insert(std::filesystem::path(p).filename().string());
      try {  // the base and deltas a listed delta needs
        for (const ChainLink& link : checkpoint_chain(p)) {
          kept.insert(std::filesystem::path(link.path).filename().string());
        }
      } catch (const Error&) {  // restore_latest reports it
      }
    }
    // Newest first, so that a kill part-way leaves no delta without its
    // base; a ".meta" whose index is gone (a deletion cut short) goes too.
    std::map<int64_t, std::string, std::greater<>> orphans;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".index" && ext != ".meta") continue;
      const std::string name = entry.path().stem().string();
      const std::optional<int64_t> step = step_of(name);
      if (!step || *step >= *newest || kept.count(name)) continue;
      orphans.emplace(*step, name);
    }
    for (const auto& [step, name] : orphans) {
      remove_checkpoint((std::filesystem::path(dir_) / name).string());
    }
  }

  // The state file's checkpoints, oldest first, each taken from DIR: a
  // state file written with absolute paths (by TensorFlow, or before the
  // folder was copied) names files of the original folder, which a copy
  // must neither read nor delete.
  std::vector<std::string> listed_checkpoints() const {
    const std::optional<CheckpointState> state = get_checkpoint_state(dir_);
    if (!state) return {};
    std::vector<std::string> paths = state->all_model_checkpoint_paths;
    if (paths.empty() || paths.back() != state->model_checkpoint_path) {
      paths.push_back(state->model_checkpoint_path);
    }
    const std::filesystem::path dir =  // without a trailing '/'
        (std::filesystem::absolute(dir_) / "x").lexically_normal().parent_path();
    for (std::string& p : paths) {
      const std::filesystem::path path(p);
      if (std::filesystem::absolute(path).lexically_normal().parent_path() != dir) {
        const std::string here = (std::filesystem::path(dir_) / path.filename()).string();
        std::fprintf(stderr, "warning: --resume: the state file names %s, outside %s; using %s\n",
                     p.c_str(), dir_.c_str(), here.c_str());
        p = here;
      }
    }
    return paths;
  }

  Saver saver_;
  bool incremental_;
  std::string dir_, prefix_;
};

// ---- Reporting -------------------------------------------------------------

std::string human_bytes(double bytes) {
  char buf[32];
  if (bytes >= 1 << 30)
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1 << 30));
  else if (bytes >= 1 << 20)
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024);
  return buf;
}

// tf.global_variables(): name, device, shape and size of each.
void print_variables() {
  std::printf("\n%-36s %-16s %-14s %12s\n", "variable", "device", "shape", "bytes");
  for (const Variable& v : global_variables()) {
    std::printf("%-36s %-16s %-14s %12s\n", v.name().c_str(), v.device().name().c_str(),
                v.shape().to_string().c_str(),
                human_bytes(static_cast<double>(v.value().nbytes())).c_str());
  }
  std::printf("\n");
}

// One progress report: a redrawn bar on a terminal, a plain line otherwise.
void report_progress(bool tty, int64_t step, int64_t first, int64_t last, double steps_per_s,
                     double updates_per_s, double loss) {
  const double frac =
      last > first ? static_cast<double>(step - first) / static_cast<double>(last - first) : 1.0;
  if (tty) {
    const int width = 30, filled = static_cast<int>(frac * width + 0.5);
    std::printf("\r[%s%s] %3.0f%% step %lld/%lld  %.0f steps/s  %.2fM updates/s  loss %.4f ",
                std::string(static_cast<size_t>(filled), '#').c_str(),
                std::string(static_cast<size_t>(width - filled), '.').c_str(), 100 * frac,
                static_cast<long long>(step), static_cast<long long>(last), steps_per_s,
                updates_per_s / 1e6, loss);
    if (step == last) std::printf("\n");
  } else {
    std::printf("step %lld/%lld  %.0f steps/s  %.2fM updates/s  loss %.4f\n",
                static_cast<long long>(step), static_cast<long long>(last), steps_per_s,
                updates_per_s / 1e6, loss);
  }
  std::fflush(stdout);
}

// Training progress from step `first` to `last`: throughput and the RMS
// training loss over the steps since the last report, reported every tenth
// of the run (plain lines) or at most 5 times a second (a terminal's bar).
class Progress {
 public:
  Progress(int64_t first, int64_t last)
      : tty_(isatty(fileno(stdout)) != 0),
        first_(first),
        last_(last),
        every_(std::max<int64_t>(1, (last - first) / (tty_ ? 200 : 10))) {}

  void count_step(size_t ratings) {
    ratings_ += static_cast<int64_t>(ratings);
    ++steps_;
  }
  // Time spent saving does not count against the training throughput.
  void exclude(double seconds) {
    start_ += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  // Whether `step` gets a report.
  bool due(int64_t step) const {
    return (step % every_ == 0 && (!tty_ || seconds_since(start_) >= 0.2)) || step == last_;
  }
  // Reports `step`, given the squared errors of the steps since the last report.
  void report(int64_t step, double squared_error) {
    const double dt = seconds_since(start_);
    report_progress(tty_, step, first_, last_, steps_ / dt, 2.0 * ratings_ / dt,
                    std::sqrt(squared_error / static_cast<double>(ratings_)));
    ratings_ = steps_ = 0;
    start_ = Clock::now();
  }

 private:
  bool tty_;
  int64_t first_, last_, every_;
  int64_t ratings_ = 0, steps_ = 0;
  Clock::time_point start_ = Clock::now();
};

// ---- The training loop -----------------------------------------------------

struct TrainResult {
  int64_t first_step = 0, last_step = 0;
  int64_t row_updates = 0;
  double seconds = 0;
  std::string last_saved;  // empty when no step ran
};

// Steps from `step` up to --steps on the batches of (seed, step), a
// checkpoint every --save_every steps and at the end.
TrainResult train(const DemoOptions& o, const Dataset& data, Model& model, Session& sess,
                  Checkpoints& checkpoints, int64_t step, Timings& time) {
  Batches batches(data.train.size(), o.batch_size, o.seed);
  std::printf(
      "training steps %lld..%lld, batch %lld (%lld steps per epoch), optimizer %s, learning rate "
      "%g, L2 %g; checkpoints every %lld steps in %s\n",
      static_cast<long long>(step), static_cast<long long>(o.steps),
      static_cast<long long>(o.batch_size), static_cast<long long>(batches.steps_per_epoch()),
      o.optimizer.c_str(), o.learning_rate, o.l2, static_cast<long long>(o.save_every),
      o.checkpoint_dir.c_str());
  TrainResult result{.first_step = step};
  Progress progress(step, o.steps);
  TrainStep train_step(o, model);
  const auto start = Clock::now();
  while (step < o.steps) {
    const auto [positions, count] = batches.batch(step);
    train_step.run(model, data.train, positions, count, time);
    ++step;
    progress.count_step(count);
    result.row_updates += 2 * static_cast<int64_t>(count);
    if (step % o.save_every == 0 || step == o.steps) {
      const auto t0 = Clock::now();
      result.last_saved = checkpoints.save(sess, model);
      const double saving = seconds_since(t0);
      time.save += saving;
      progress.exclude(saving);
    }
    if (progress.due(step)) progress.report(step, train_step.take_squared_error());
  }
  result.seconds = seconds_since(start);
  result.last_step = step;
  return result;
}

// Test RMSE before and after training, and training RMSE after.
struct Rmse {
  double before = 0, after = 0, train = 0;
};

// The closing lines: throughput, RMSE and the latest checkpoint.
void print_summary(const DemoOptions& o, const TrainResult& run, const Rmse& rmse,
                   const Model& model) {
  const int64_t steps = run.last_step - run.first_step;
  std::printf("\n%lld steps in %.2f s: %.0f steps/s, %.2fM row updates/s\n",
              static_cast<long long>(steps), run.seconds, steps / std::max(run.seconds, 1e-9),
              static_cast<double>(run.row_updates) / std::max(run.seconds, 1e-9) / 1e6);
  std::printf("test RMSE: %.4f before, %.4f after (train %.4f; noise level %.4f)\n", rmse.before,
              rmse.after, rmse.train, o.noise);
  std::printf("global_step = %lld; latest checkpoint: %s\n",
              static_cast<long long>(model.global_step.value().to_host().scalar<int64_t>()),
              run.last_saved.empty() ? "none (no steps run)" : run.last_saved.c_str());
}

void print_times(const Timings& time, double total) {
  std::printf(
      "time: %.2f s total = data %.2f + init %.2f + restore %.2f + row gathers %.2f + gradients "
      "%.2f + apply_gradients %.2f + checkpoints %.2f + RMSE %.2f + other %.2f\n",
      total, time.data, time.init, time.restore, time.read, time.grads, time.apply, time.save,
      time.eval, total - time.accounted());
}

// The run's summary for scripts (bench/compare_tf_demo.py): sizes,
// throughput over the training steps without the checkpoint saves, RMSE
// and the phases' seconds, as one JSON object in `path`.
void write_json(const std::string& path, const DemoOptions& o, const TrainResult& run,
                const Rmse& rmse, const Timings& time, double total) {
  const int64_t steps = run.last_step - run.first_step;
  const double training = std::max(run.seconds - time.save, 1e-9);
  // nlohmann::json writes a non-finite number (a diverged run's RMSE) as
  // null, so the file stays valid JSON.
  const nlohmann::json summary = {
      {"users", o.users},
      {"items", o.items},
      {"rank", o.rank},
      {"batch_size", o.batch_size},
      {"train_ratings_per_user", o.ratings_per_user - o.ratings_per_user / 10},
      {"optimizer", o.optimizer},
      {"learning_rate", o.learning_rate},
      {"first_step", run.first_step},
      {"steps", steps},
      {"train_seconds", training},
      {"steps_per_s", static_cast<double>(steps) / training},
      {"rmse_before", rmse.before},
      {"rmse_after", rmse.after},
      {"rmse_train", rmse.train},
      {"seconds",
       {{"total", total},
        {"row_gathers", time.read},
        {"gradients", time.grads},
        {"apply_gradients", time.apply},
        {"checkpoints", time.save},
        {"rmse", time.eval}}}};
  std::ofstream f(path);
  if (!f) throw InvalidArgumentError("--json: cannot open \"" + path + "\" for writing");
  f << summary.dump() << '\n';
  f.close();
  if (!f) throw InvalidArgumentError("--json: writing \"" + path + "\" failed");
}

// ---- The program -----------------------------------------------------------

// The run itself, once the flags are known to be usable: data, model,
// training, report.
int run_demo(const DemoOptions& o, const std::vector<std::string>& devices, int64_t shards) {
  const auto t_start = Clock::now();
  Timings time;
  std::printf(
      "varstate demo: matrix factorization of %lld users x %lld items, rank %lld, noise %.3g\n",
      static_cast<long long>(o.users), static_cast<long long>(o.items),
      static_cast<long long>(o.rank), o.noise);

  auto t0 = Clock::now();
  const Dataset data = dataset_of(o);
  time.data = seconds_since(t0);
  std::printf("ratings: %zu train, %zu test (%.1f s to generate; ratings' stddev %.3f)\n",
              data.train.size(), data.test.size(), time.data, data.signal_stddev);

  t0 = Clock::now();
  Model model = build_model(o, devices, shards);
  Session sess;
  sess.run(global_variables_initializer());
  time.init = seconds_since(t0);
  print_variables();

  Checkpoints checkpoints(o);
  const int64_t first = o.resume ? checkpoints.restore_latest(sess, model, time) : 0;
  Rmse rmse;
  t0 = Clock::now();
  rmse.before = Evaluator(model, o.rank).rmse(data.test);
  time.eval += seconds_since(t0);
  std::printf("test RMSE at step %lld: %.4f (noise level %.4f)\n", static_cast<long long>(first),
              rmse.before, o.noise);

  const TrainResult run = train(o, data, model, sess, checkpoints, first, time);
  t0 = Clock::now();
  const Evaluator trained(model, o.rank);
  rmse.train = trained.rmse(data.train);
  rmse.after = trained.rmse(data.test);
  time.eval += seconds_since(t0);
  print_summary(o, run, rmse, model);
  print_times(time, seconds_since(t_start));
  if (!o.json.empty()) write_json(o.json, o, run, rmse, time, seconds_since(t_start));
  return 0;
}

int demo(const DemoOptions& o) {
  // Every flag is checked before anything is created or allocated.
  check_sizes(o);
  const std::vector<std::string> devices = chosen_devices(o.device);
  const int64_t shards = table_shards(o, devices.size());
  std::error_code ec;
  const bool made_dir = !std::filesystem::exists(o.checkpoint_dir, ec);
  ensure_writable_dir("--checkpoint_dir", o.checkpoint_dir);
  try {
    return run_demo(o, devices, shards);
  } catch (...) {
    // A run that fails before writing anything (out of memory building the
    // tables, say) leaves no folder behind that it made itself.
    if (made_dir && std::filesystem::is_empty(o.checkpoint_dir, ec)) {
      std::filesystem::remove(o.checkpoint_dir, ec);
    }
    throw;
  }
}

// The flags of a distributed run (`mpirun -np N varstate demo --ps K`,
// demo_ps.h).
PsDemoOptions ps_options(const DemoOptions& o, int ps) {
  return {.users = o.users,
          .items = o.items,
          .rank = o.rank,
          .ratings_per_user = o.ratings_per_user,
          .noise = o.noise,
          .steps = o.steps,
          .batch_size = o.batch_size,
          .learning_rate = o.learning_rate,
          .l2 = o.l2,
          .checkpoint_dir = o.checkpoint_dir,
          .save_every = o.save_every,
          .max_to_keep = o.max_to_keep,
          .resume = o.resume,
          .seed = o.seed,
          .shards = o.shards,
          .ps = ps,
          .optimizer = o.optimizer,
          .make_optimizer = [o] { return make_optimizer(o.optimizer, o.learning_rate); }};
}

}  // namespace

Action add_demo_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "demo", "the main job: train a matrix-factorization recommender with partitioned embeddings");
  auto o = std::make_shared<DemoOptions>();
  cmd->add_option("--users", o->users, "rows of the user table")
      ->check(count_at_least(1))
      ->capture_default_str();
  cmd->add_option("--items", o->items, "rows of the item table")
      ->check(count_at_least(1))
      ->capture_default_str();
  cmd->add_option("--rank", o->rank, "embedding width (and the true rank)")
      ->check(count_at_least(1))
      ->capture_default_str();
  cmd->add_option("--ratings_per_user", o->ratings_per_user,
                  "ratings per user (10% held out for the test RMSE)")
      ->check(count_at_least(1))
      ->capture_default_str();
  cmd->add_option("--noise", o->noise, "stddev of the ratings' Gaussian noise")
      ->check(non_negative_real())
      ->capture_default_str();
  cmd->add_option("--steps", o->steps, "train until global_step reaches this")
      ->check(count_at_least(0))
      ->capture_default_str();
  cmd->add_option("--batch_size", o->batch_size, "ratings per SGD step")
      ->check(count_at_least(1))
      ->capture_default_str();
  cmd->add_option("--optimizer", o->optimizer,
                  "sgd (the default: the lowest test RMSE in 4,000 steps here), momentum "
                  "(0.9), adagrad, adam or rowwise-adagrad (varstate's: one accumulator per row); "
                  "TensorFlow's defaults but the learning rate")
      ->check(CLI::IsMember({"sgd", "momentum", "adagrad", "adam", "rowwise-adagrad"}))
      ->capture_default_str();
  CLI::Option* learning_rate =
      cmd->add_option("--learning_rate", o->learning_rate,
                      "the optimizer's learning rate (default: the optimizer's own, best for "
                      "this model: sgd 0.1, momentum 0.01, adagrad 0.5, adam 0.03, "
                      "rowwise-adagrad 0.5)")
          ->check(non_negative_real());
  cmd->add_option("--l2", o->l2, "L2 regularization of the rows a rating touches")
      ->check(non_negative_real())
      ->capture_default_str();
  cmd->add_option("--checkpoint_dir", o->checkpoint_dir, "where the sharded checkpoints go")
      ->capture_default_str();
  cmd->add_option("--save_every", o->save_every,
                  "save a checkpoint every this many steps (and at the end)")
      ->check(count_at_least(1))
      ->capture_default_str();
  cmd->add_option("--max_to_keep", o->max_to_keep, "checkpoints kept (0: all)")
      ->check(count_at_least(0))
      ->capture_default_str();
  cmd->add_flag("--resume", o->resume,
                "restore the latest checkpoint in --checkpoint_dir and continue from its step");
  cmd->add_flag("--full_checkpoints", o->full_checkpoints,
                "write every checkpoint in full (default: incremental, only the rows changed "
                "since the previous save)");
  cmd->add_option("--seed", o->seed, "seed of the data, the initializers and the batch order")
      ->check(count_at_least(0))
      ->capture_default_str();
  cmd->add_option("--device", o->device,
                  "cpu, gpu (every GPU) or all (every GPU and the CPU); default: gpu when "
                  "there are GPUs (emulated ones only when asked for), else cpu")
      ->check(CLI::IsMember({"cpu", "gpu", "all"}));
  cmd->add_option("--shards", o->shards, "partitions per table (default: two per device)")
      ->check(count_at_least(1));
  cmd->add_flag("--atomic_scatters", o->atomic_scatters,
                "on a GPU, combine the duplicate ids of sparse SGD's updates with atomics, as "
                "TensorFlow and PyTorch do by default (rounding may differ run to run), instead "
                "of the demo's deterministic sorted path");
  cmd->add_option("--json", o->json,
                  "also write the run's summary (throughput without the checkpoint saves, "
                  "RMSE, phase times) as JSON to this file");
  auto dynamic = std::make_shared<bool>(false);
  cmd->add_flag("--dynamic", *dynamic,
                "hash-keyed embedding tables: the ids as raw 64-bit feature hashes, no remap "
                "(varstate/dynamic_variable.h); each table sharded over the chosen devices");
  auto admit_after = std::make_shared<int64_t>(2);
  cmd->add_option("--admit_after", *admit_after,
                  "--dynamic: training sightings before an id gets a row")
      ->check(count_at_least(1))
      ->capture_default_str();
  auto row_cap = std::make_shared<double>(1.0);
  cmd->add_option("--row_cap", *row_cap,
                  "--dynamic: each table's row cap as a fraction of its ids (the least recently "
                  "updated rows evicted past it)")
      ->check(CLI::Range(1e-9, 1e9))
      ->capture_default_str();
  auto ps = std::make_shared<int>(0);
  cmd->add_option(
         "--ps", *ps,
         "run as a multi-process job under mpirun: the tables on this many parameter-server "
         "tasks (the first ranks), trained by the other ranks (default --shards: two per "
         "ps task)")
      ->check(count_at_least(1));
  return [o, ps, dynamic, admit_after, row_cap, learning_rate] {
    if (learning_rate->count() == 0) o->learning_rate = default_learning_rate(o->optimizer);
    if (*dynamic) {
      check_sizes(*o);
      ensure_writable_dir("--checkpoint_dir", o->checkpoint_dir);
      return demo_dynamic(
          {.users = o->users,
           .items = o->items,
           .rank = o->rank,
           .ratings_per_user = o->ratings_per_user,
           .noise = o->noise,
           .steps = o->steps,
           .batch_size = o->batch_size,
           .l2 = o->l2,
           .checkpoint_dir = o->checkpoint_dir,
           .save_every = o->save_every,
           .max_to_keep = o->max_to_keep,
           .resume = o->resume,
           .seed = o->seed,
           .devices = chosen_devices(o->device),
           .full_checkpoints = o->full_checkpoints,
           .json = o->json,
           .admit_after = *admit_after,
           .row_cap = *row_cap,
           .ps = *ps,
           .make_optimizer = [o] { return make_optimizer(o->optimizer, o->learning_rate); }});
    }
    if (*ps > 0) {
      check_sizes(*o);
      ensure_writable_dir("--checkpoint_dir", o->checkpoint_dir);
      return demo_ps(ps_options(*o, *ps));
    }
    return demo(*o);
  };
}

}  // namespace varstate::cli
