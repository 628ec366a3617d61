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
//   * SGD: each step reads the rows of one mini-batch, computes the
//     per-rating gradients of the squared error (plus L2) and applies them
//     with scatter_sub, duplicates adding up; global_step counts with
//     assign_add;
//   * a sharded Saver every --save_every steps (max_to_keep), --resume
//     restoring the latest checkpoint and continuing with the same batches
//     an uninterrupted run would have seen.
//
// The batch of step s depends only on (seed, s), so the same --seed gives a
// bit-identical final checkpoint, resumed or not.
#include <unistd.h>

#include <varstate/varstate.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "commands.h"

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
  double learning_rate = 0.1;
  double l2 = 0.002;
  std::string checkpoint_dir = (std::filesystem::temp_directory_path() / "varstate-demo").string();
  int64_t save_every = 1'000;
  int64_t max_to_keep = 3;
  bool resume = false;
  int64_t seed = 2026;
  std::string device;  // cpu, gpu or all; default: gpu when there are GPUs, else cpu
  int64_t shards = 0;  // 0: two per device
};

// SplitMix64: a fully specified generator, so the synthetic data are the
// same on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  int64_t below(int64_t n) { return static_cast<int64_t>(uniform() * static_cast<double>(n)); }
  double normal() {  // Box-Muller
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

// The ratings: (user, item, value), train and test.
struct Ratings {
  std::vector<int32_t> user, item;
  std::vector<float> value;
  size_t size() const { return value.size(); }
};

struct Dataset {
  Ratings train, test;
  double signal_stddev = 0;  // of the noiseless ratings
};

Dataset make_dataset(const DemoOptions& o) {
  Rng rng(static_cast<uint64_t>(o.seed) * 0x2545F4914F6CDD1Dull + 1);
  // Factors with entries of stddev rank^-1/4: noiseless ratings of variance 1.
  const double scale = std::pow(static_cast<double>(o.rank), -0.25);
  std::vector<float> u(static_cast<size_t>(o.users * o.rank)),
      v(static_cast<size_t>(o.items * o.rank));
  for (float& x : u) x = static_cast<float>(scale * rng.normal());
  for (float& x : v) x = static_cast<float>(scale * rng.normal());
  Dataset d;
  double sum2 = 0;
  const size_t n = static_cast<size_t>(o.users * o.ratings_per_user);
  for (Ratings* r : {&d.train, &d.test}) {
    r->user.reserve(n / 9);
    r->item.reserve(n / 9);
    r->value.reserve(n / 9);
  }
  for (int64_t user = 0; user < o.users; ++user) {
    for (int64_t k = 0; k < o.ratings_per_user; ++k) {
      const int64_t item = rng.below(o.items);
      double dot = 0;
      for (int64_t j = 0; j < o.rank; ++j) dot += u[user * o.rank + j] * v[item * o.rank + j];
      sum2 += dot * dot;
      Ratings& r = (k % 10 == 9) ? d.test : d.train;
      r.user.push_back(static_cast<int32_t>(user));
      r.item.push_back(static_cast<int32_t>(item));
      r.value.push_back(static_cast<float>(dot + o.noise * rng.normal()));
    }
  }
  d.signal_stddev = std::sqrt(sum2 / static_cast<double>(n));
  return d;
}

// Host views of an embedding table's parts (the live buffers on the CPU, a
// copy of each GPU part), to read rows by global index.
class TableView {
 public:
  TableView(const PartitionedVariable& table, int64_t width) : width_(width) {
    for (const Variable& part : table.variables()) parts_.push_back(part.value().to_host());
    offsets_ = table.offsets();
  }
  const float* row(int64_t index) const {
    const size_t p = static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), index) -
                                         offsets_.begin() - 1);
    return parts_[p].data<float>() + (index - offsets_[p]) * width_;
  }

 private:
  int64_t width_;
  std::vector<Tensor> parts_;
  std::vector<int64_t> offsets_;
};

double rmse(const Ratings& r, const TableView& users, const TableView& items, int64_t rank) {
  double sum = 0;
  for (size_t k = 0; k < r.size(); ++k) {
    const float* a = users.row(r.user[k]);
    const float* b = items.row(r.item[k]);
    float dot = 0;
    for (int64_t j = 0; j < rank; ++j) dot += a[j] * b[j];
    const double e = dot - r.value[k];
    sum += e * e;
  }
  return r.size() ? std::sqrt(sum / static_cast<double>(r.size())) : 0.0;
}

// The training order: epoch e visits the training ratings in a permutation
// seeded by (seed, e); step s takes batch s % steps_per_epoch of epoch
// s / steps_per_epoch.
class Batches {
 public:
  Batches(size_t n, int64_t batch_size, int64_t seed)
      : n_(n), batch_(static_cast<size_t>(batch_size)), seed_(seed) {}
  int64_t steps_per_epoch() const { return static_cast<int64_t>((n_ + batch_ - 1) / batch_); }
  // Positions in the training set of step `step`'s ratings.
  std::pair<const uint32_t*, size_t> batch(int64_t step) {
    const int64_t epoch = step / steps_per_epoch();
    if (epoch != epoch_) shuffle(epoch);
    const size_t begin = static_cast<size_t>(step % steps_per_epoch()) * batch_;
    return {order_.data() + begin, std::min(batch_, n_ - begin)};
  }

 private:
  void shuffle(int64_t epoch) {
    order_.resize(n_);
    std::iota(order_.begin(), order_.end(), 0u);
    Rng rng(static_cast<uint64_t>(seed_) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) +
            7);
    for (size_t i = n_; i > 1; --i)
      std::swap(order_[i - 1], order_[static_cast<size_t>(rng.below(static_cast<int64_t>(i)))]);
    epoch_ = epoch;
  }
  size_t n_, batch_;
  int64_t seed_, epoch_ = -1;
  std::vector<uint32_t> order_;
};

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
  return gpus.empty() ? std::vector<std::string>{cpu} : gpus;  // default
}

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

int demo(const DemoOptions& o) {
  if (o.batch_size < 1) throw InvalidArgumentError("--batch_size must be >= 1");
  if (o.users > (int64_t{1} << 31) / o.ratings_per_user || o.items > (int64_t{1} << 31)) {
    throw InvalidArgumentError("--users x --ratings_per_user (" + std::to_string(o.users) + " x " +
                               std::to_string(o.ratings_per_user) + ") and --items (" +
                               std::to_string(o.items) + ") must stay below 2^31");
  }
  ensure_writable_dir("--checkpoint_dir", o.checkpoint_dir);
  const std::vector<std::string> devices = chosen_devices(o.device);
  const int64_t shards = o.shards > 0 ? o.shards : 2 * static_cast<int64_t>(devices.size());
  if (shards > std::min(o.users, o.items)) {
    throw InvalidArgumentError("--shards " + std::to_string(shards) +
                               " is more than the rows of a table (" +
                               std::to_string(std::min(o.users, o.items)) + ")");
  }
  const auto t_start = Clock::now();
  struct {
    double data = 0, init = 0, restore = 0, read = 0, grads = 0, scatter = 0, step = 0, save = 0,
           eval = 0;
  } time;

  std::printf(
      "varstate demo: matrix factorization of %lld users x %lld items, rank %lld, noise %.3g\n",
      static_cast<long long>(o.users), static_cast<long long>(o.items),
      static_cast<long long>(o.rank), o.noise);
  auto t0 = Clock::now();
  const Dataset data = make_dataset(o);
  time.data = seconds_since(t0);
  std::printf("ratings: %zu train, %zu test (%.1f s to generate; ratings' stddev %.3f)\n",
              data.train.size(), data.test.size(), time.data, data.signal_stddev);

  // The model: two partitioned embedding tables and a global step.
  t0 = Clock::now();
  reset_default_graph();
  set_random_seed(o.seed);
  const double init_stddev = 0.5 * std::pow(static_cast<double>(o.rank), -0.25);
  std::optional<PartitionedVariable> users_var, items_var;
  std::optional<Variable> step_var;
  {
    size_t next = 0;
    DeviceScope placement([&devices, next](const PlacementRequest&) mutable {
      return devices[next++ % devices.size()];
    });
    auto model = variable_scope("recommender", {.partitioner = fixed_size_partitioner(shards)});
    {
      auto scope = variable_scope("users");
      users_var = get_variable(
          "embedding",
          {.shape = TensorShape{o.users, o.rank},
           .initializer = random_normal_initializer({.stddev = init_stddev, .seed = 1})});
    }
    {
      auto scope = variable_scope("items");
      items_var = get_variable(
          "embedding",
          {.shape = TensorShape{o.items, o.rank},
           .initializer = random_normal_initializer({.stddev = init_stddev, .seed = 2})});
    }
  }
  {
    DeviceScope cpu("/device:CPU:0");
    step_var =
        get_variable("global_step", {.shape = TensorShape{},
                                     .dtype = DType::kInt64,
                                     .initializer = zeros_initializer(DType::kInt64),
                                     .trainable = false,
                                     .collections = std::vector<std::string>{
                                         GraphKeys::GLOBAL_VARIABLES, GraphKeys::GLOBAL_STEP}});
  }
  PartitionedVariable& users = *users_var;
  PartitionedVariable& items = *items_var;
  Variable& global_step = *step_var;
  Session sess;
  sess.run(global_variables_initializer());
  time.init = seconds_since(t0);

  std::printf("\n%-36s %-16s %-14s %12s\n", "variable", "device", "shape", "bytes");
  for (const Variable& v : global_variables()) {
    std::printf("%-36s %-16s %-14s %12s\n", v.name().c_str(), v.device().name().c_str(),
                v.shape().to_string().c_str(),
                human_bytes(static_cast<double>(v.value().nbytes())).c_str());
  }
  std::printf("\n");

  Saver saver({.sharded = true, .max_to_keep = static_cast<int>(o.max_to_keep)});
  const std::string prefix = (std::filesystem::path(o.checkpoint_dir) / "model").string();
  int64_t step = 0;
  if (o.resume) {
    t0 = Clock::now();
    if (std::optional<std::string> latest = latest_checkpoint(o.checkpoint_dir)) {
      saver.restore(sess, *latest);
      step = global_step.value().to_host().scalar<int64_t>();
      time.restore = seconds_since(t0);
      std::printf("resumed from %s at step %lld\n", latest->c_str(), static_cast<long long>(step));
    } else {
      std::printf("--resume: no checkpoint in %s yet, starting at step 0\n",
                  o.checkpoint_dir.c_str());
    }
  }

  t0 = Clock::now();
  const double rmse_before =
      rmse(data.test, TableView(users, o.rank), TableView(items, o.rank), o.rank);
  time.eval += seconds_since(t0);
  std::printf("test RMSE at step %lld: %.4f (noise level %.4f)\n", static_cast<long long>(step),
              rmse_before, o.noise);

  Batches batches(data.train.size(), o.batch_size, o.seed);
  std::printf(
      "training steps %lld..%lld, batch %lld (%lld steps per epoch), SGD learning rate %g, L2 %g; "
      "checkpoints every %lld steps in %s\n",
      static_cast<long long>(step), static_cast<long long>(o.steps),
      static_cast<long long>(o.batch_size), static_cast<long long>(batches.steps_per_epoch()),
      o.learning_rate, o.l2, static_cast<long long>(o.save_every), o.checkpoint_dir.c_str());

  const bool tty = isatty(fileno(stdout)) != 0;
  const int64_t first = step;
  const int64_t report_every = std::max<int64_t>(1, (o.steps - first) / (tty ? 200 : 10));
  const float lr = static_cast<float>(o.learning_rate), l2 = static_cast<float>(o.l2);
  const Tensor one(int64_t{1});
  std::vector<int64_t> user_ids, item_ids;
  std::vector<float> user_grads, item_grads;
  double window_loss = 0;
  int64_t window_ratings = 0, window_steps = 0, total_updates = 0;
  auto window_start = Clock::now();
  const auto train_start = Clock::now();
  std::string last_saved;
  while (step < o.steps) {
    auto [positions, count] = batches.batch(step);
    t0 = Clock::now();
    user_ids.resize(count);
    item_ids.resize(count);
    for (size_t k = 0; k < count; ++k) {
      user_ids[k] = data.train.user[positions[k]];
      item_ids[k] = data.train.item[positions[k]];
    }
    Tensor uid = Tensor::from_vector(user_ids), iid = Tensor::from_vector(item_ids);
    // Only the batch's rows travel: each part gathers its own on its device.
    const Tensor user_rows = gather(users, uid, {.device = "/cpu:0"});
    const Tensor item_rows = gather(items, iid, {.device = "/cpu:0"});
    auto t1 = Clock::now();
    time.read += std::chrono::duration<double>(t1 - t0).count();
    user_grads.resize(count * static_cast<size_t>(o.rank));
    item_grads.resize(count * static_cast<size_t>(o.rank));
    for (size_t k = 0; k < count; ++k) {
      const uint32_t p = positions[k];
      const float* ua = user_rows.data<float>() + k * static_cast<size_t>(o.rank);
      const float* vb = item_rows.data<float>() + k * static_cast<size_t>(o.rank);
      float dot = 0;
      for (int64_t j = 0; j < o.rank; ++j) dot += ua[j] * vb[j];
      const float err = dot - data.train.value[p];
      window_loss += static_cast<double>(err) * err;
      float* gu = &user_grads[k * static_cast<size_t>(o.rank)];
      float* gv = &item_grads[k * static_cast<size_t>(o.rank)];
      for (int64_t j = 0; j < o.rank; ++j) {
        gu[j] = lr * (err * vb[j] + l2 * ua[j]);
        gv[j] = lr * (err * ua[j] + l2 * vb[j]);
      }
    }
    const TensorShape update_shape{static_cast<int64_t>(count), o.rank};
    Tensor ug = Tensor::from_vector(user_grads, update_shape),
           ig = Tensor::from_vector(item_grads, update_shape);
    auto t2 = Clock::now();
    time.grads += std::chrono::duration<double>(t2 - t1).count();
    // Duplicate rows in a batch add up; the deterministic path keeps the
    // sums' order fixed on GPUs too, for bit-identical runs.
    users.scatter_sub(uid, ug, {.deterministic = true});
    items.scatter_sub(iid, ig, {.deterministic = true});
    auto t3 = Clock::now();
    time.scatter += std::chrono::duration<double>(t3 - t2).count();
    global_step.assign_add(one);
    ++step;
    time.step += seconds_since(t3);
    window_ratings += static_cast<int64_t>(count);
    total_updates += 2 * static_cast<int64_t>(count);
    ++window_steps;

    if (step % o.save_every == 0 || step == o.steps) {
      t0 = Clock::now();
      last_saved = *saver.save(sess, prefix, {.global_step = global_step}).path();
      const double saving = seconds_since(t0);
      time.save += saving;
      window_start +=
          std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(saving));
    }
    const double dt = seconds_since(window_start);
    // Plain lines every tenth of the run; a terminal's bar at most 5 times a second.
    if ((step % report_every == 0 && (!tty || dt >= 0.2)) || step == o.steps) {
      report_progress(tty, step, first, o.steps, window_steps / dt, 2.0 * window_ratings / dt,
                      std::sqrt(window_loss / static_cast<double>(window_ratings)));
      window_loss = 0;
      window_ratings = window_steps = 0;
      window_start = Clock::now();
    }
  }
  const double train_seconds = seconds_since(train_start);

  t0 = Clock::now();
  const TableView u(users, o.rank), v(items, o.rank);
  const double rmse_train = rmse(data.train, u, v, o.rank);
  const double rmse_after = rmse(data.test, u, v, o.rank);
  time.eval += seconds_since(t0);
  const int64_t trained = step - first;
  std::printf("\n%lld steps in %.2f s: %.0f steps/s, %.2fM row updates/s\n",
              static_cast<long long>(trained), train_seconds,
              trained / std::max(train_seconds, 1e-9),
              static_cast<double>(total_updates) / std::max(train_seconds, 1e-9) / 1e6);
  std::printf("test RMSE: %.4f before, %.4f after (train %.4f; noise level %.4f)\n", rmse_before,
              rmse_after, rmse_train, o.noise);
  std::printf("global_step = %lld; latest checkpoint: %s\n",
              static_cast<long long>(global_step.value().to_host().scalar<int64_t>()),
              last_saved.empty() ? "none (no steps run)" : last_saved.c_str());
  const double total = seconds_since(t_start);
  std::printf(
      "time: %.2f s total = data %.2f + init %.2f + restore %.2f + row gathers %.2f + gradients "
      "%.2f + "
      "scatter_sub %.2f + global_step %.2f + checkpoints %.2f + RMSE %.2f + other %.2f\n",
      total, time.data, time.init, time.restore, time.read, time.grads, time.scatter, time.step,
      time.save, time.eval,
      total - (time.data + time.init + time.restore + time.read + time.grads + time.scatter +
               time.step + time.save + time.eval));
  return 0;
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
  cmd->add_option("--learning_rate", o->learning_rate, "SGD learning rate")
      ->check(non_negative_real())
      ->capture_default_str();
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
  cmd->add_option("--seed", o->seed, "seed of the data, the initializers and the batch order")
      ->check(count_at_least(0))
      ->capture_default_str();
  cmd->add_option("--device", o->device,
                  "cpu, gpu (every GPU) or all (every GPU and the CPU); default: gpu when "
                  "there are GPUs, else cpu")
      ->check(CLI::IsMember({"cpu", "gpu", "all"}));
  cmd->add_option("--shards", o->shards, "partitions per table (default: two per device)")
      ->check(count_at_least(1));
  return [o] { return demo(*o); };
}

}  // namespace varstate::cli
