// `varstate demo --dynamic` (demo_dynamic.h): the same ratings, batches,
// model and optimizer as the dense demo, with the embedding tables keyed by
// 64-bit id hashes:
//
//   users = get_dynamic_variable("users", {.dim = rank, .initializer = ...})
//   rows  = users.gather(user_keys)                      // new keys get rows
//   opt.apply_gradients({users.gradient(user_keys, grads), ...}, &global_step)
//
// A key's initial row is drawn from the seed and the key, so the run is
// reproducible. An id gets a row once training has seen it --admit_after
// times (until then it reads zeros and its gradients are dropped); each
// table holds at most --row_cap of its ids' rows, evicting the least
// recently updated. Evaluation reads with lookup(), which inserts nothing
// (an id never admitted reads zeros). With several chosen devices
// (--device gpu on a multi-GPU machine, --device all) each table is sharded
// by key over them. A Saver writes the tables every --save_every steps,
// incrementally (each delta holds the keys written and erased since the
// previous save; --full_checkpoints: every save whole, "<name>-keys" /
// "<name>-values"); --resume restores the latest checkpoint (its chain) and
// continues from its step.
#include "demo_dynamic.h"

#include <varstate/varstate.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "demo_data.h"
#include "demo_ps.h"

namespace varstate::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A feature hash of id `id` in table `salt`: the SplitMix64 finalizer, so
// the keys spread over the whole int64 range (negative ones included), as
// hashed feature ids do.
int64_t feature_hash(int64_t id, uint64_t salt) {
  uint64_t z = static_cast<uint64_t>(id) + salt * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<int64_t>(z ^ (z >> 31));
}

constexpr uint64_t kUserSalt = 1;
constexpr uint64_t kItemSalt = 2;

struct Model {
  DynamicVariable users, items;
  Variable global_step;
  std::unique_ptr<Optimizer> optimizer;
};

// Both tables under variable_scope("recommender") on the chosen device,
// initialized as the dense demo's (random_normal, the same stddev; each
// key's row from the seed and the key), the global step and the optimizer.
Model build_model(const DynamicDemoOptions& o) {
  reset_default_graph();
  set_random_seed(o.seed);
  const double stddev = 0.5 * std::pow(static_cast<double>(o.rank), -0.25);
  // Admission after --admit_after sightings; at most --row_cap of the ids
  // hold rows, the least recently updated evicted past it.
  // Sharded over the chosen devices, or in a job over the ps tasks.
  std::vector<std::string> shards = o.devices.size() > 1 ? o.devices : std::vector<std::string>{};
  if (o.ps > 0) shards.clear();
  for (int t = 0; o.ps > 1 && t < o.ps; ++t) shards.push_back("/job:ps/task:" + std::to_string(t));
  auto table = [&](const char* name, int64_t ids, int64_t seed) {
    const auto cap = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(o.row_cap * ids)));
    return get_dynamic_variable(
        name, {.dim = o.rank,
               .initializer = random_normal_initializer({.stddev = stddev, .seed = seed}),
               .default_value = Tensor(0.0f),
               .devices = shards,
               .initial_capacity = cap,
               .admit_after = o.admit_after,
               .max_rows = cap});
  };
  std::optional<DynamicVariable> users, items;
  {
    DeviceScope here(o.ps > 0 ? "/job:ps/task:0" : o.devices.front());
    auto scope = variable_scope("recommender");
    users = table("users", o.users, 1);
    items = table("items", o.items, 2);
  }
  // In a job, global_step lives on a ps task too, where every task sees it.
  DeviceScope cpu(o.ps > 0 ? "/job:ps/task:0" : "/device:CPU:0");
  Model m{*users, *items, get_or_create_global_step(), o.make_optimizer()};
  m.optimizer->create_slots({m.users.variable(), m.items.variable()});
  set_deterministic_ops(true);
  return m;
}

struct Batch {
  Tensor user_keys, item_keys;  // int64 [n], on the host
  Tensor ratings;               // [n, 1] on the tables' device
};

Batch feed(const Ratings& r, const uint32_t* positions, size_t count, Device& device) {
  std::vector<int64_t> users(count), items(count);
  std::vector<float> ratings(count);
  for (size_t k = 0; k < count; ++k) {
    const Rating& x = r.rows[positions[k]];
    users[k] = feature_hash(x.user, kUserSalt);
    items[k] = feature_hash(x.item, kItemSalt);
    ratings[k] = x.value;
  }
  return {Tensor::from_vector(users), Tensor::from_vector(items),
          Tensor::from_vector(ratings, TensorShape{static_cast<int64_t>(count), 1}).on(device)};
}

// errors = sum(u * v, axis=1) - ratings, as [n, 1], with the rows read for
// training (inserting new keys) or for evaluation (lookup).
struct Forward {
  Tensor user_rows, item_rows, errors;
};

Forward forward(Model& m, const Batch& b, const Tensor& ones, bool training) {
  Forward f{m.users.gather(b.user_keys, {.training = training}),
            m.items.gather(b.item_keys, {.training = training}), Tensor()};
  f.errors = matmul(f.user_rows * f.item_rows, ones) - b.ratings;
  return f;
}

double rmse(Model& m, const Ratings& r, const Tensor& ones, Device& device) {
  constexpr size_t kChunk = 32'768;
  std::vector<uint32_t> positions(r.size());
  std::iota(positions.begin(), positions.end(), 0u);
  double sum = 0;
  for (size_t begin = 0; begin < r.size(); begin += kChunk) {
    const size_t count = std::min(kChunk, r.size() - begin);
    const Forward f = forward(m, feed(r, &positions[begin], count, device), ones, false);
    sum += matmul(f.errors, f.errors, true).to_host().data<float>()[0];
  }
  return r.size() ? std::sqrt(sum / static_cast<double>(r.size())) : 0.0;
}

#ifdef VARSTATE_HAVE_MPI
// `mpirun -np N varstate demo --dynamic --ps K`: the same model as a TF1
// between-graph replicated job. Every rank builds the same graph: the
// tables are dynamic variables held by the K ps tasks (sharded by key over
// them when K > 1; distributed/mpi_keyed_table.h), global_step on ps task
// 0. The N-K workers train synchronously, data parallel: worker w takes
// its contiguous share of each batch of the single-process demo, reads its
// rows (training gathers: new ids get rows on their task), and once every
// worker has read (a barrier of the workers) applies its share's gradients
// with its optimizer; a second barrier ends the step. With sgd and
// --admit_after 1 the step's updates add up to the single-process step's
// (rounding aside), so the test RMSE is one process's; with admission a
// key's sightings in a step are split over the workers' calls, which admits
// some keys a call later (and in the workers' order); with an optimizer
// that keeps per-row state (adagrad), each worker's share is a step of its
// own, as asynchronous TF1 training applies it. A
// DistributedSaver writes the tables every --save_every steps
// (incrementally unless --full_checkpoints); --resume restores the latest.
int demo_dynamic_ps(const DynamicDemoOptions& o) {
  Cluster cluster({.ps_tasks = o.ps});
  const int workers = cluster.num_tasks("worker");
  require_workers(workers, o.ps, cluster.size());
  const bool worker = cluster.job_name() == "worker";
  const bool chief = cluster.is_chief();
  std::optional<Dataset> data;
  if (worker) {
    data = dataset_of(o);
  }
  Model m = build_model(o);  // collective: every task, the same graph
  if (chief) Session().run(global_variables_initializer());
  cluster.barrier();
  if (cluster.job_name() == "ps") {
    std::printf("[rank %d] %s: holds %s of the users' and the items' keys, serves the workers\n",
                cluster.rank(), cluster.task_name().c_str(),
                o.ps > 1 ? ("1/" + std::to_string(o.ps)).c_str() : "all");
  } else {
    std::printf("[rank %d] %s: trains its 1/%d of every batch%s\n", cluster.rank(),
                cluster.task_name().c_str(), workers,
                chief ? " (chief: initializes, reports)" : "");
  }
  std::fflush(stdout);
  DistributedSaver saver(cluster, {.max_to_keep = static_cast<int>(o.max_to_keep)});
  int64_t first = 0;
  if (o.resume) {
    if (const std::optional<std::string> latest = latest_checkpoint(o.checkpoint_dir)) {
      if (auto state = get_checkpoint_state(o.checkpoint_dir)) {
        saver.recover_last_checkpoints(state->all_model_checkpoint_paths);
      }
      saver.restore(*latest);
      first = m.global_step.value().to_host().scalar<int64_t>();
    }
  }
  Device& device = m.users.device();
  const Tensor ones = Tensor::filled(DType::kFloat, {o.rank, 1}, Tensor(1.0f), device);
  const Tensor l2 = Tensor(static_cast<float>(o.l2)).on(device);
  if (chief) {
    std::printf("%d ps tasks, %d workers; test RMSE at step %lld: %.4f (noise level %.4f)\n", o.ps,
                workers, static_cast<long long>(first), rmse(m, data->test, ones, device), o.noise);
  }
  std::optional<Batches> batches;
  if (worker) batches.emplace(data->train.size(), o.batch_size, o.seed);
  const std::string prefix = (std::filesystem::path(o.checkpoint_dir) / "model").string();
  std::string last_saved;
  const auto t_train = Clock::now();
  for (int64_t step = first; step < o.steps; ++step) {
    if (worker) {
      const auto [positions, count] = batches->batch(step);
      const auto w = static_cast<size_t>(cluster.task_index());
      const size_t begin = count * w / static_cast<size_t>(workers);
      const size_t end = count * (w + 1) / static_cast<size_t>(workers);
      std::optional<Forward> f;
      std::optional<Batch> b;
      if (end > begin) {
        b = feed(data->train, positions + begin, end - begin, device);
        f = forward(m, *b, ones, true);
      }
      cluster.barrier("worker");  // every worker has read the pre-step rows
      if (f) {
        const Tensor user_grads = multiply_add(f->errors, f->item_rows, f->user_rows, l2);
        const Tensor item_grads = multiply_add(f->errors, f->user_rows, f->item_rows, l2);
        m.optimizer->apply_gradients({m.users.gradient(b->user_keys, user_grads),
                                      m.items.gradient(b->item_keys, item_grads)},
                                     chief ? &m.global_step : nullptr);
      } else if (chief) {
        m.global_step.assign_add(Tensor(int64_t{1}));
      }
      cluster.barrier("worker");  // the step's updates have all landed
    }
    const int64_t done = step + 1;
    if (done % o.save_every == 0 || done == o.steps) {
      last_saved = saver.save(prefix, {.global_step = done, .incremental = !o.full_checkpoints});
      if (chief) {
        std::printf("step %lld/%lld  users %lld, items %lld live keys  saved %s\n",
                    static_cast<long long>(done), static_cast<long long>(o.steps),
                    static_cast<long long>(m.users.size()), static_cast<long long>(m.items.size()),
                    last_saved.c_str());
        std::fflush(stdout);
      }
    }
  }
  const double seconds = seconds_since(t_train);
  if (chief) {
    std::printf(
        "\n%lld steps in %.2f s: %.1f steps/s\ntest RMSE after: %.4f (train %.4f; noise level "
        "%.4f)\nglobal_step = %lld; latest checkpoint: %s\n",
        static_cast<long long>(o.steps - first), seconds,
        static_cast<double>(o.steps - first) / std::max(seconds, 1e-9),
        rmse(m, data->test, ones, device), rmse(m, data->train, ones, device), o.noise,
        static_cast<long long>(m.global_step.value().to_host().scalar<int64_t>()),
        last_saved.empty() ? "none (no steps run)" : last_saved.c_str());
  }
  cluster.barrier();
  cluster.shutdown();
  return 0;
}
#endif

}  // namespace

int demo_dynamic(const DynamicDemoOptions& o) {
  if (o.ps > 0) {
#ifdef VARSTATE_HAVE_MPI
    return demo_dynamic_ps(o);
#else
    throw UnimplementedError("demo --dynamic --ps " + std::to_string(o.ps) +
                             ": this varstate was built without MPI (VARSTATE_MPI)");
#endif
  }
  const auto t_start = Clock::now();
  std::printf(
      "varstate demo --dynamic: matrix factorization of %lld users x %lld items, rank %lld, "
      "ids as 64-bit feature hashes (no remap), admitted after %lld sightings, rows capped at "
      "%.3g of the ids\n",
      static_cast<long long>(o.users), static_cast<long long>(o.items),
      static_cast<long long>(o.rank), static_cast<long long>(o.admit_after), o.row_cap);
  const Dataset data = dataset_of(o);
  std::printf("ratings: %zu train, %zu test\n", data.train.size(), data.test.size());
  Model m = build_model(o);
  Device& device = m.users.device();
  Session sess;
  sess.run(global_variables_initializer());
  std::filesystem::create_directories(o.checkpoint_dir);
  const std::string prefix = (std::filesystem::path(o.checkpoint_dir) / "model").string();
  Saver saver({.max_to_keep = static_cast<int>(o.max_to_keep), .save_relative_paths = true});
  int64_t first = 0;
  if (o.resume) {
    if (std::optional<std::string> latest = latest_checkpoint(o.checkpoint_dir)) {
      saver.restore(sess, *latest);
      first = m.global_step.value().to_host().scalar<int64_t>();
      std::printf("resumed from %s at step %lld\n", latest->c_str(), static_cast<long long>(first));
    } else {
      std::printf("--resume: no checkpoint in %s yet, starting at step 0\n",
                  o.checkpoint_dir.c_str());
    }
  }
  const Tensor ones = Tensor::filled(DType::kFloat, {o.rank, 1}, Tensor(1.0f), device);
  const Tensor l2 = Tensor(static_cast<float>(o.l2)).on(device);
  const double rmse_before = rmse(m, data.test, ones, device);
  std::printf("test RMSE at step %lld: %.4f (noise level %.4f)\n", static_cast<long long>(first),
              rmse_before, o.noise);

  Batches batches(data.train.size(), o.batch_size, o.seed);
  const auto t_train = Clock::now();
  double save_seconds = 0;
  int64_t updates = 0;
  for (int64_t step = first; step < o.steps; ++step) {
    const auto [positions, count] = batches.batch(step);
    const Batch b = feed(data.train, positions, count, device);
    const Forward f = forward(m, b, ones, true);
    // d/du of (u.v - r)^2 / 2 + l2 (|u|^2 + |v|^2) / 2 and d/dv.
    const Tensor user_grads = multiply_add(f.errors, f.item_rows, f.user_rows, l2);
    const Tensor item_grads = multiply_add(f.errors, f.user_rows, f.item_rows, l2);
    m.optimizer->apply_gradients(
        {m.users.gradient(b.user_keys, user_grads), m.items.gradient(b.item_keys, item_grads)},
        &m.global_step);
    updates += 2 * static_cast<int64_t>(count);
    const int64_t done = step + 1;
    if (done % o.save_every == 0 || done == o.steps) {
      const auto t0 = Clock::now();
      const std::string path =
          *saver
               .save(sess, prefix,
                     {.global_step = m.global_step, .incremental = !o.full_checkpoints})
               .path();
      save_seconds += seconds_since(t0);
      std::printf("step %lld/%lld  users %lld, items %lld live keys  saved %s\n",
                  static_cast<long long>(done), static_cast<long long>(o.steps),
                  static_cast<long long>(m.users.size()), static_cast<long long>(m.items.size()),
                  path.c_str());
      std::fflush(stdout);
    }
  }
  const double train_seconds = seconds_since(t_train) - save_seconds;
  const double rmse_train = rmse(m, data.train, ones, device);
  const double rmse_after = rmse(m, data.test, ones, device);
  const double bytes = static_cast<double>(m.users.memory_bytes() + m.items.memory_bytes());
  std::string where = device.name();
  if (o.devices.size() > 1) {
    where = "tables sharded over";
    for (const std::string& d : o.devices) where += " " + d;
  }
  std::printf(
      "\ntrained %lld steps on %s: %.0f steps/s, %.2fM row updates/s\n"
      "live keys: users %lld, items %lld; tables with slots %.1f MiB\n"
      "RMSE: train %.4f, test %.4f (before %.4f; noise %.4f)\ntotal %.1f s\n",
      static_cast<long long>(o.steps - first), where.c_str(),
      static_cast<double>(o.steps - first) / std::max(train_seconds, 1e-9),
      static_cast<double>(updates) / std::max(train_seconds, 1e-9) / 1e6,
      static_cast<long long>(m.users.size()), static_cast<long long>(m.items.size()),
      bytes / (1 << 20), rmse_train, rmse_after, rmse_before, o.noise, seconds_since(t_start));
  if (!o.json.empty()) {
    nlohmann::json j = {{"mode", "dynamic"},
                        {"device", device.name()},
                        {"devices", o.devices},
                        {"incremental_checkpoints", !o.full_checkpoints},
                        {"steps", o.steps - first},
                        {"steps_per_s", static_cast<double>(o.steps - first) / train_seconds},
                        {"live_users", m.users.size()},
                        {"live_items", m.items.size()},
                        {"table_bytes", bytes},
                        {"rmse_train", rmse_train},
                        {"rmse_test", rmse_after},
                        {"rmse_before", rmse_before},
                        {"admit_after", o.admit_after},
                        {"row_cap", o.row_cap}};
    std::ofstream(o.json) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace varstate::cli
