// Training ops and optimizers on parameter-server variables, run by CTest
// under mpirun (test/distributed/tests.cmake) with 2 ps tasks and 2
// workers. One binary, one mode per run:
//   equal          every optimizer, dense and sparse (duplicate ids), on a
//                  partitioned variable over the 2 ps tasks: N steps equal
//                  the same N steps on local variables, bitwise, slots
//                  included; a sparse step moves only the batch's rows, in
//                  one exchange per window and owner; moving averages of
//                  the parts, on their tasks, equal local ones
//   concurrent     both workers apply sparse Adagrad to overlapping rows at
//                  once: every accumulator is its initial value plus the
//                  sum of all squared gradients (exact in float)
//   errors         bad index, slot held by another task or by this
//                  process: the error names the variables, nothing changes
//   incremental DIR  an incremental DistributedSaver save after sparse
//                  applies holds exactly the touched rows of var and slots
// Failures are printed with the rank; the exit code is non-zero when any
// rank failed.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_chain.h"
#include "checkpoint/tensor_bundle.h"
#include "distributed/cluster_collectives.h"
#include "mpi_test_util.h"
#include "runtime/remote_storage.h"
#include "varstate/varstate.h"

using namespace varstate;
using namespace varstate::mpi_test;

namespace {

constexpr int64_t kRows = 40, kWidth = 3;

// A [rows, width] table in 2 parts: on ps 0 and ps 1 under a
// replica_device_setter, else in this process.
PartitionedVariable table(const std::string& name, int64_t rows = kRows, int64_t width = kWidth) {
  return get_variable(name, {.shape = TensorShape{rows, width},
                             .initializer = random_uniform_initializer({.seed = 7}),
                             .partitioner = fixed_size_partitioner(2)});
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name) {
  if (name == "sgd") return std::make_unique<GradientDescentOptimizer>(0.1);
  if (name == "momentum") {
    return std::make_unique<MomentumOptimizer>(
        0.1, 0.9, MomentumOptions{.name = "Momentum", .use_nesterov = true});
  }
  if (name == "adagrad") return std::make_unique<AdagradOptimizer>(0.1);
  if (name == "rowwise_adagrad") return std::make_unique<RowwiseAdagradOptimizer>(0.1);
  if (name == "adam") return std::make_unique<AdamOptimizer>(AdamOptions{.learning_rate = 0.01});
  if (name == "lazy_adam") {
    return std::make_unique<LazyAdamOptimizer>(
        AdamOptions{.learning_rate = 0.01, .name = "LazyAdam"});
  }
  if (name == "rmsprop") {
    return std::make_unique<RMSPropOptimizer>(0.01,
                                              RMSPropOptions{.momentum = 0.5, .centered = true});
  }
  if (name == "adadelta") {
    return std::make_unique<AdadeltaOptimizer>(AdadeltaOptions{.learning_rate = 1.0});
  }
  if (name == "adagrad_da") {
    // A step variable of its own, here (not on the ps tasks), at 4: each
    // apply is for step 5.
    Variable step(Tensor(int64_t{4}), {.trainable = false, .name = "da_step"});
    step.initializer().run();
    return std::make_unique<AdagradDAOptimizer>(
        0.1, step, AdagradDAOptions{.l1_regularization_strength = 0.01});
  }
  if (name == "proximal_adagrad") {
    return std::make_unique<ProximalAdagradOptimizer>(
        0.1, ProximalAdagradOptions{.l1_regularization_strength = 0.01});
  }
  return std::make_unique<FtrlOptimizer>(
      0.1, FtrlOptions{.l1_regularization_strength = 0.01, .l2_regularization_strength = 0.1});
}

// Step `step`'s gradient of the table, split per part as embedding_lookup
// makes it: sparse, ids with duplicates (both parts, every step); dense,
// every element.
std::vector<GradientAndVariable> gradients(const PartitionedVariable& t, int step, bool sparse) {
  const std::vector<Variable>& parts = t.variables();
  std::vector<GradientAndVariable> out;
  for (size_t p = 0; p < parts.size(); ++p) {
    const float scale = 0.25f * static_cast<float>(step + 1) * (p == 0 ? 1.f : -1.5f);
    if (!sparse) {
      out.push_back({make<float>({20, kWidth},
                                 [&](int64_t i) { return scale * static_cast<float>(i % 7 - 3); }),
                     parts[p]});
      continue;
    }
    const std::vector<int64_t> ids = {3, 17, 3, static_cast<int64_t>(step) % 20, 19, 17, 3};
    const int64_t n = static_cast<int64_t>(ids.size());
    const Tensor values = make<float>(
        {n, kWidth}, [&](int64_t i) { return scale * static_cast<float>(i % 5) - 0.3f; });
    out.push_back({IndexedSlices(values, i64(ids)), parts[p]});
  }
  return out;
}

// Every slot of `opt` for the parts of `t`, in slot-name then part order.
std::vector<Variable> slots_of(const Optimizer& opt, const PartitionedVariable& t) {
  std::vector<Variable> out;
  for (const std::string& name : opt.get_slot_names()) {
    for (const Variable& part : t.variables()) out.push_back(*opt.get_slot(part, name));
  }
  return out;
}

// ---------------------------------------------------------------------------
// equal

void test_equal(Cluster& cluster) {
  const bool chief = cluster.is_chief();
  const std::vector<std::string> names = {
      "sgd",     "momentum", "adagrad",  "rowwise_adagrad",  "adam",      "lazy_adam",
      "rmsprop", "ftrl",     "adadelta", "proximal_adagrad", "adagrad_da"};
  for (const std::string& name : names) {
    for (const bool sparse : {false, true}) {
      const std::string tag = name + (sparse ? "_sparse" : "_dense");
      // Every task creates the remote table and the optimizer's slots
      // (collective); the chief also the local reference.
      std::optional<PartitionedVariable> remote;
      {
        DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
        remote = table("remote_" + tag);
      }
      EXPECT(internal::remote_storage(remote->variables()[0]) != nullptr);
      EXPECT(remote->variables()[0].placement().find("/job:ps/task:0") == 0);
      EXPECT(remote->variables()[1].placement().find("/job:ps/task:1") == 0);
      if (chief) Session().run(remote->initializer());
      std::unique_ptr<Optimizer> opt = make_optimizer(name);
      opt->create_slots(remote->variables());
      cluster.barrier();  // every task's slot initializers have landed
      if (chief) {
        PartitionedVariable local = table("local_" + tag);
        Session().run(local.initializer());
        for (size_t p = 0; p < 2; ++p) {
          Variable part = local.variables()[p];
          part.assign(remote->variables()[p].value());
        }
        std::unique_ptr<Optimizer> ref = make_optimizer(name);
        for (int step = 0; step < 3; ++step) {
          opt->apply_gradients(gradients(*remote, step, sparse));
          ref->apply_gradients(gradients(local, step, sparse));
        }
        const std::vector<Variable> got = slots_of(*opt, *remote), want = slots_of(*ref, local);
        bool equal = got.size() == want.size() && same(remote->as_tensor(), local.as_tensor());
        for (size_t k = 0; equal && k < got.size(); ++k)
          equal = same(got[k].value(), want[k].value());
        if (!equal) {
          ++g_failures;
          std::fprintf(stderr, "[rank %d] %s: remote and local differ after 3 steps\n", g_rank,
                       tag.c_str());
        }
      }
      cluster.barrier();
    }
  }
}

// ExponentialMovingAverage of a partitioned table on the ps tasks: every
// task makes the averages (collective, as slots), each on its part's task;
// after sparse gradient descent steps and the averages' Op, they equal a
// local run's, bitwise.
void test_moving_average(Cluster& cluster) {
  std::optional<PartitionedVariable> remote;
  {
    DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
    remote = table("ema_remote");
  }
  if (cluster.is_chief()) Session().run(remote->initializer());
  ExponentialMovingAverage ema(0.9);
  const Op maintain = ema.apply(remote->variables());
  cluster.barrier();
  const Variable avg1 = *ema.average(remote->variables()[1]);
  EXPECT(internal::remote_storage(avg1) != nullptr);
  EXPECT(avg1.placement().find("/job:ps/task:1") == 0);
  EXPECT(avg1.save_slice_info()->full_name == "ema_remote/ExponentialMovingAverage");
  if (cluster.is_chief()) {
    Session().run(variables_initializer(ema.averages()));
    PartitionedVariable local = table("ema_local");
    Session().run(local.initializer());
    for (size_t p = 0; p < 2; ++p) {
      Variable part = local.variables()[p];
      part.assign(remote->variables()[p].value());
    }
    ExponentialMovingAverage ref(0.9);
    const Op ref_maintain = ref.apply(local.variables());
    Session().run(variables_initializer(ref.averages()));
    GradientDescentOptimizer sgd(0.1), ref_sgd(0.1);
    for (int step = 0; step < 3; ++step) {
      sgd.apply_gradients(gradients(*remote, step, true));
      maintain.run();
      ref_sgd.apply_gradients(gradients(local, step, true));
      ref_maintain.run();
    }
    for (size_t p = 0; p < 2; ++p) {
      const Tensor got = ema.average(remote->variables()[p])->value();
      EXPECT(same(got, ref.average(local.variables()[p])->value()));
      EXPECT(!same(got, remote->variables()[p].value()));  // it lags the trained part
    }
  }
  cluster.barrier();
}

// A sparse Adagrad step on one part moves its distinct rows of var and
// accumulator, there and back, in one exchange per window (2: var, slot).
void test_rows_only(Cluster& cluster) {
  std::optional<PartitionedVariable> t;
  {
    DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
    t = table("rows_only");
  }
  if (cluster.is_chief()) Session().run(t->initializer());
  AdagradOptimizer opt(0.1);
  opt.create_slots(t->variables());
  cluster.barrier();
  if (cluster.is_chief()) {
    Variable part = t->variables()[1];
    const internal::WireStats before = internal::ClusterAccess::wire_stats(cluster);
    opt.apply_gradients(
        {{IndexedSlices(make<float>({4, kWidth}, [](int64_t i) { return 0.5f * i; }),
                        i64({4, 2, 4, 9})),
          part}});
    const internal::WireStats after = internal::ClusterAccess::wire_stats(cluster);
    EXPECT(after.exchanges - before.exchanges == 2);
    // 3 distinct rows of 3 floats, of var and accum, read and written.
    EXPECT(after.data_bytes - before.data_bytes == 2 * 2 * 3 * kWidth * 4);
    EXPECT(after.index_bytes - before.index_bytes == 2 * 3 * 8);
  }
  cluster.barrier();
}

// One apply_gradients over a 4-part table on the 2 ps tasks (parts 0, 2 on
// ps 0; 1, 3 on ps 1) locks each owner's window of the parts and its window
// of the accumulators (created together): 4 exchanges, not 2 per part.
void test_exchanges_per_owner(Cluster& cluster) {
  std::optional<PartitionedVariable> t;
  {
    DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
    t = get_variable("four", {.shape = TensorShape{kRows, kWidth},
                              .initializer = random_uniform_initializer({.seed = 3}),
                              .partitioner = fixed_size_partitioner(4)});
  }
  if (cluster.is_chief()) Session().run(t->initializer());
  AdagradOptimizer opt(0.1);
  opt.create_slots(t->variables());
  cluster.barrier();
  if (cluster.is_chief()) {
    std::vector<GradientAndVariable> gv;
    for (const Variable& part : t->variables()) {
      gv.push_back({IndexedSlices(make<float>({3, kWidth}, [](int64_t i) { return 0.25f * i; }),
                                  i64({1, 4, 1})),
                    part});
    }
    const internal::WireStats before = internal::ClusterAccess::wire_stats(cluster);
    opt.apply_gradients(gv);
    const internal::WireStats after = internal::ClusterAccess::wire_stats(cluster);
    EXPECT(after.exchanges - before.exchanges == 4);
    // 2 distinct rows of var and accumulator per part, there and back.
    EXPECT(after.data_bytes - before.data_bytes == 4 * 2 * 2 * 2 * kWidth * 4);
  }
  cluster.barrier();
}

// ---------------------------------------------------------------------------
// concurrent: both workers, overlapping rows, at once.

void test_concurrent(Cluster& cluster) {
  std::optional<PartitionedVariable> t;
  {
    DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
    t = table("shared");
  }
  if (cluster.is_chief()) Session().run(t->initializer());
  AdagradOptimizer opt(0.01, {.initial_accumulator_value = 1.0});
  opt.create_slots(t->variables());
  cluster.barrier();
  constexpr int kSteps = 40;
  // Worker w's step s: rows {s % 20, 5, 5 + w} of each part, gradient
  // entries small integers (their squares and sums are exact in float).
  auto grad = [](int w, int s, int64_t row, int64_t c) {
    return static_cast<float>((w + 1) * ((s + row + c) % 3 + 1));
  };
  if (cluster.job_name() == "worker") {
    const int w = cluster.task_index();
    for (int s = 0; s < kSteps; ++s) {
      std::vector<GradientAndVariable> gv;
      const std::vector<int64_t> rows = {s % 20, 5, 5 + w};
      for (const Variable& part : t->variables()) {
        const Tensor values = make<float>({3, kWidth}, [&](int64_t i) {
          return grad(w, s, rows[static_cast<size_t>(i / kWidth)], i % kWidth);
        });
        gv.push_back({IndexedSlices(values, i64(rows)), part});
      }
      opt.apply_gradients(gv);
    }
  }
  cluster.barrier();
  if (cluster.is_chief()) {
    // Each worker's step adds (the sum of the row's gradients)^2: duplicate
    // ids are summed before the update.
    std::vector<double> want(20 * kWidth, 1.0);
    for (int w = 0; w < 2; ++w) {
      for (int s = 0; s < kSteps; ++s) {
        for (int64_t c = 0; c < kWidth; ++c) {
          std::vector<double> sum(20, 0.0);
          for (int64_t row : {int64_t{s % 20}, int64_t{5}, int64_t{5 + w}}) {
            sum[static_cast<size_t>(row)] += grad(w, s, row, c);
          }
          for (int64_t row = 0; row < 20; ++row) {
            const double g = sum[static_cast<size_t>(row)];
            want[static_cast<size_t>(row * kWidth + c)] += g * g;
          }
        }
      }
    }
    for (const Variable& part : t->variables()) {
      const std::vector<float> got = opt.get_slot(part, "accumulator")->value().to_vector<float>();
      bool equal = got.size() == want.size();
      for (size_t i = 0; equal && i < got.size(); ++i)
        equal = got[i] == static_cast<float>(want[i]);
      if (!equal) {
        ++g_failures;
        std::fprintf(stderr, "[rank %d] accumulators of %s are not the sums of squares\n", g_rank,
                     part.op_name().c_str());
      }
    }
  }
  cluster.barrier();
}

// ---------------------------------------------------------------------------
// errors

void test_errors(Cluster& cluster) {
  // In this process: no device scope.
  Variable local_accum(make<float>({6, 4}, [](int64_t) { return 0.1f; }), {.name = "local_accum"});
  local_accum.initializer().run();
  DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
  Variable a(make<float>({6, 4}, [](int64_t i) { return 0.5f * i; }), {.name = "a"});   // ps 0
  Variable b(make<float>({6, 4}, [](int64_t i) { return 0.25f * i; }), {.name = "b"});  // ps 1
  Variable c(make<float>({6, 4}, [](int64_t) { return 0.1f; }), {.name = "c"});         // ps 0
  if (cluster.is_chief())
    Session().run(std::vector<Op>{a.initializer(), b.initializer(), c.initializer()});
  cluster.barrier();
  if (cluster.is_chief()) {
    const Tensor a0 = a.value(), c0 = c.value();
    const Tensor rows = make<float>({2, 4}, [](int64_t) { return 1.f; });
    EXPECT_THROWS(InvalidArgumentError,
                  sparse_apply_adagrad(a, c, Tensor(0.1f), IndexedSlices(rows, i64({1, 6}))),
                  "SparseApplyAdagrad on \"a\"", "indices[1] = 6 is not in [0, 6)");
    EXPECT_THROWS(InvalidArgumentError,
                  apply_adagrad(a, b, Tensor(0.1f), Tensor::zeros(DType::kFloat, {6, 4})),
                  "accum (\"b\") is held by /job:ps/task:1",
                  "the variable \"a\" by /job:ps/task:0");
    EXPECT_THROWS(
        InvalidArgumentError,
        sparse_apply_adagrad(a, local_accum, Tensor(0.1f), IndexedSlices(rows, i64({1, 2}))),
        "accum (\"local_accum\") is held by this process", "the variable \"a\" by /job:ps/task:0");
    EXPECT_THROWS(InvalidArgumentError,
                  apply_adagrad(a, c, Tensor(0.1f), Tensor::zeros(DType::kFloat, {6, 3})),
                  "var and grad do not have the same shape");
    EXPECT(same(a.value(), a0));
    EXPECT(same(c.value(), c0));
    // A good step changes both, atomically on ps 0.
    sparse_apply_adagrad(a, c, Tensor(0.1f), IndexedSlices(rows, i64({1, 2})));
    EXPECT(!same(a.value(), a0));
    EXPECT(!same(c.value(), c0));
  }
  cluster.barrier();
}

// ---------------------------------------------------------------------------
// incremental: a delta after sparse applies holds the touched rows only.

std::vector<int64_t> delta_ids(const std::string& checkpoint, const std::string& key,
                               int64_t part_offset) {
  return BundleReader(checkpoint).read(delta_ids_key(key, part_offset)).values<int64_t>();
}

void test_incremental(Cluster& cluster, const std::string& dir) {
  std::optional<PartitionedVariable> t;
  {
    DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
    t = table("emb", 4096, 8);  // above the size saved whole in a delta
  }
  if (cluster.is_chief()) {
    std::filesystem::create_directories(dir);
    Session().run(t->initializer());
  }
  MomentumOptimizer opt(0.1, 0.9);
  opt.create_slots(t->variables());
  cluster.barrier();
  DistributedSaver saver(cluster, {.write_meta_graph = false, .max_delta_fraction = 1.0});
  saver.save(dir + "/model", {.global_step = 1, .incremental = true});
  if (cluster.is_chief()) {
    const Tensor rows = make<float>({3, 8}, [](int64_t i) { return 1.f + i; });
    opt.apply_gradients({{IndexedSlices(rows, i64({7, 2, 7})), t->variables()[0]},
                         {IndexedSlices(rows, i64({19, 0, 4})), t->variables()[1]}});
  }
  cluster.barrier();
  const std::string delta = saver.save(dir + "/model", {.global_step = 2, .incremental = true});
  if (cluster.is_chief()) {
    for (const std::string& key : {std::string("emb"), std::string("emb/Momentum")}) {
      EXPECT(delta_ids(delta, key, 0) == (std::vector<int64_t>{2, 7}));
      EXPECT(delta_ids(delta, key, 2048) == (std::vector<int64_t>{2048, 2052, 2067}));
    }
  }
  cluster.barrier();
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  const std::string mode = argc > 1 ? argv[1] : "equal";
  int code = 1;
  {
    Cluster cluster({.ps_tasks = 2});
    try {
      if (mode == "equal") {
        test_equal(cluster);
        test_rows_only(cluster);
        test_exchanges_per_owner(cluster);
        test_moving_average(cluster);
      } else if (mode == "concurrent") {
        test_concurrent(cluster);
      } else if (mode == "errors") {
        test_errors(cluster);
      } else if (mode == "incremental" && argc > 2) {
        test_incremental(cluster, argv[2]);
      } else {
        std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
        ++g_failures;
      }
    } catch (const std::exception& e) {
      ++g_failures;
      std::fprintf(stderr, "[rank %d] %s: uncaught %s\n", g_rank, mode.c_str(), e.what());
    }
    code = finish(&cluster);
  }
  MPI_Finalize();
  return code;
}
