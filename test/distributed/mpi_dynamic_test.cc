// Dynamic variables held by parameter-server tasks (distributed/
// mpi_keyed_table.h), run by CTest under mpirun (test/distributed/
// tests.cmake). One binary, one mode per run:
//   ops        2 ps + 2 workers: a table on one ps task, one sharded over
//              both, one placed by replica_device_setter, one capped over
//              both (evicting what one process's table evicts), one
//              expiring over both (expiring what it expires); the chief's gathers (training and
//              evaluation), inserts, scatters, erasures and Adagrad steps equal the same calls on
//              a table of its own process, bitwise, slots included, as seen
//              from the other worker too; a gather spanning both owners is
//              one exchange per owner; both workers' concurrent scatter_adds
//              and inserts all land; errors (a cap with eviction off raised
//              by the owner, a row of the wrong width, keys of the wrong
//              dtype) keep their class and message and change nothing; a
//              request reaching an owner that has not created the table yet
//              waits for it
//   save DIR   2 ps + 2 workers train the sharded table; a DistributedSaver
//              writes a full checkpoint, then a delta (a fraction of its
//              size)
//   restore DIR  1 ps + 1 worker: restoring the chain's last checkpoint
//              (the table now on one task) gives the trained rows and slots
//   check DIR  one process, no Cluster: a plain Saver restores it too
// Every worker replays the chief's calls on a local table ("the twin") to
// know what the remote one must hold. Failures are printed with the rank;
// the exit code is non-zero when any rank failed.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distributed/cluster_collectives.h"
#include "mpi_test_util.h"
#include "varstate/varstate.h"

using namespace varstate;
using namespace varstate::mpi_test;

namespace {

constexpr int64_t kDim = 3;

Tensor rows(const std::vector<float>& v) {
  return Tensor::from_vector<float>(v, TensorShape{static_cast<int64_t>(v.size()) / kDim, kDim});
}

DynamicVariableOptions options(std::vector<std::string> devices = {}) {
  return {.dim = kDim,
          .initializer = random_uniform_initializer({.minval = -1, .maxval = 1, .seed = 7}),
          .devices = std::move(devices)};
}

// `name` on `placement` (a task, or "" for this process).
DynamicVariable dynamic(const std::string& name, const std::string& placement,
                        DynamicVariableOptions o = options()) {
  if (placement.empty()) return get_dynamic_variable(name, o);
  DeviceScope scope(placement);
  return get_dynamic_variable(name, o);
}

Tensor filled(std::vector<int64_t> dims, float value) {
  return make<float>(std::move(dims), [value](int64_t) { return value; });
}

bool same_rows(const DynamicVariable& a, const DynamicVariable& b) {
  const KeysAndValues x = a.export_rows(), y = b.export_rows();
  return same(x.keys, y.keys) && same(x.values, y.values);
}

bool same_slot(Optimizer& a, const DynamicVariable& va, Optimizer& b, const DynamicVariable& vb,
               const std::string& slot) {
  return same(a.get_slot(va.variable(), slot)->value(), b.get_slot(vb.variable(), slot)->value());
}

// The chief's script, on the remote table (`remote`) or on the twin: the
// ops every worker replays. `part` 1 or 2 (save mode's two checkpoints).
void script(DynamicVariable& v, Optimizer& opt, int part) {
  const Tensor keys = i64({5, -3, int64_t{1} << 40, 17, 5, 99});
  if (part == 1) {
    v.gather(keys);  // training: creates the rows
    v.insert(i64({100, 101, 102}), rows({1, 2, 3, 4, 5, 6, 7, 8, 9}));
    v.scatter_add(i64({100, 5, 100}), rows({1, 1, 1, 2, 2, 2, 3, 3, 3}));
    v.scatter_mul(i64({101, -3}), rows({2, 2, 2, -1, -1, -1}));
    v.scatter_max(i64({102}), rows({0, 100, 0}));
    v.scatter_update(i64({200, 201}), rows({9, 9, 9, 8, 8, 8}));  // absent: inserted
    // A block that part 2 leaves alone (so that its checkpoint is a delta).
    std::vector<int64_t> block;
    std::vector<float> values;
    for (int64_t k = 0; k < 200; ++k) {
      block.push_back(7000 + 13 * k);
      for (int64_t e = 0; e < kDim; ++e) values.push_back(static_cast<float>(k) + 0.25f * e);
    }
    v.insert(i64(block), rows(values));
  }
  for (int step = 0; step < 3; ++step) {
    std::vector<float> g;
    for (int i = 0; i < 6 * kDim; ++i)
      g.push_back(static_cast<float>((i * 7 + step + part) % 9 - 4) / 8);
    opt.apply_gradients({v.gradient(keys, rows(g))});
  }
  if (part == 2) {
    v.erase(i64({17, 201, 12345}));
    v.insert(i64({300}), rows({3, 0, 3}));
  }
}

int dynamic_ops() {
  Cluster cluster({.ps_tasks = 2});
  g_rank = cluster.rank();
  const bool worker = cluster.job_name() == "worker";
  // Every task creates the same variables and slots, in the same order.
  DynamicVariable one = dynamic("one", "/job:ps/task:1");
  DynamicVariable two = dynamic("two", "", options({"/job:ps/task:0", "/job:ps/task:1"}));
  DynamicVariableOptions capped_options = {.dim = 2,
                                           .initializer = zeros_initializer(),
                                           .max_rows = 3,
                                           .eviction = DynamicVariableOptions::Eviction::kNone};
  DynamicVariable capped = dynamic("capped", "/job:ps/task:0", capped_options);
  // A cap over both ps tasks, evicting the least recently updated keys of
  // the whole table, as one process's table does.
  DynamicVariableOptions lru_options = {
      .dim = 1,
      .initializer = zeros_initializer(),
      .max_rows = 6,
      .eviction = DynamicVariableOptions::Eviction::kLeastRecentlyUpdated};
  lru_options.devices = {"/job:ps/task:0", "/job:ps/task:1"};
  DynamicVariable lru = dynamic("lru", "", lru_options);
  lru_options.devices = {};
  DynamicVariable twin_lru = dynamic("twin_lru", "", lru_options);
  // Expiry over both ps tasks: every owner counts every step, so the keys
  // expired are one process's.
  DynamicVariableOptions expiring_options = {
      .dim = 1, .initializer = zeros_initializer(), .expire_after = 2};
  expiring_options.devices = {"/job:ps/task:0", "/job:ps/task:1"};
  DynamicVariable expiring = dynamic("expiring", "", expiring_options);
  expiring_options.devices = {};
  DynamicVariable twin_expiring = dynamic("twin_expiring", "", expiring_options);
  const auto expiry_script = [](DynamicVariable& v) {
    GradientDescentOptimizer step(1.0);
    v.insert(i64({1, 2, 3, 4, 5, 6, 7, 8}), filled({8, 1}, 1));
    for (const std::vector<int64_t>& keys : {std::vector<int64_t>{1, 2}, {3}, {1, 5}}) {
      step.apply_gradients(
          {v.gradient(i64(keys), filled({static_cast<int64_t>(keys.size()), 1}, 1))});
    }
    return v.expire();
  };
  const auto lru_script = [](DynamicVariable& v) {
    GradientDescentOptimizer step(1.0);
    v.insert(i64({1, 2, 3, 4, 5, 6}), filled({6, 1}, 1));
    for (int64_t k : {3, 1, 5, 2}) step.apply_gradients({v.gradient(i64({k}), filled({1, 1}, 1))});
    v.gather(i64({10, 11}));  // two new keys: the two least recently updated go
    step.apply_gradients({v.gradient(i64({10, 12}), filled({2, 1}, 1))});
  };
  // Placed by replica_device_setter: held by a ps task too.
  DynamicVariable placed = [] {
    DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
    return get_dynamic_variable("placed", {.dim = 1, .initializer = zeros_initializer()});
  }();
  EXPECT(placed.variable().placement().find("/job:ps/task:") != std::string::npos);
  AdagradOptimizer opt(0.1);
  opt.create_slots({one.variable(), two.variable()});
  // compat.v1 sparse Adam decays every row: each owner steps, keys or not.
  AdamOptimizer adam(AdamOptions{.learning_rate = 0.01});
  adam.create_slots({two.variable()});
  // This process's twins.
  DynamicVariable twin_one = dynamic("twin_one", "");
  DynamicVariable twin_two = dynamic("twin_two", "");
  AdagradOptimizer twin_opt(0.1);
  twin_opt.create_slots({twin_one.variable(), twin_two.variable()});
  AdamOptimizer twin_adam(AdamOptions{.learning_rate = 0.01});
  twin_adam.create_slots({twin_two.variable()});
  // Steps of SGD (a scatter and a tick on each owner) and Adam.
  const auto more_steps = [](DynamicVariable& a, DynamicVariable& b, Optimizer& adam_of_b) {
    GradientDescentOptimizer sgd_of_a(0.5);
    for (int step = 0; step < 2; ++step) {
      sgd_of_a.apply_gradients({a.gradient(i64({5, 77, 5}), rows({1, 2, 3, 4, 5, 6, 7, 8, 9}))});
      adam_of_b.apply_gradients({b.gradient(i64({100}), rows({0.5f, -1, 2}))});
    }
  };
  Session().run(
      global_variables_initializer());  // clears the remote tables: before the chief's calls
  cluster.barrier();
  EXPECT(one.is_initialized() && two.is_initialized());
  const Tensor fresh = twin_one.lookup(i64({555, 5}));
  if (worker) {
    for (auto* twin : {&twin_one, &twin_two}) script(*twin, twin_opt, 1);
    more_steps(twin_one, twin_two, twin_adam);
  }
  if (cluster.is_chief()) {
    // Evaluation lookups insert nothing.
    EXPECT(same(one.lookup(i64({555, 5})), fresh));
    EXPECT(one.size() == 0);
    script(one, opt, 1);
    script(two, opt, 1);
    more_steps(one, two, adam);
    EXPECT(one.size() == twin_one.size() && two.size() == twin_two.size() && two.size() == 210);
    EXPECT(same(two.gather(i64({200, 5, 100, 102})), twin_two.gather(i64({200, 5, 100, 102}))));
    EXPECT(two.erase(i64({12345})) == 0);
    placed.insert(i64({42}), filled({1, 1}, 4));
  }
  cluster.barrier();
  EXPECT(placed.size() == 1);  // the same table from every task
  if (worker) {
    // As seen from both workers: the same rows and slots as the twins.
    EXPECT(same_rows(one, twin_one));
    EXPECT(same_rows(two, twin_two));
    EXPECT(same_slot(opt, one, twin_opt, twin_one, "accumulator"));
    EXPECT(same_slot(opt, two, twin_opt, twin_two, "accumulator"));
    EXPECT(same_slot(adam, two, twin_adam, twin_two, "m"));
    EXPECT(same_slot(adam, two, twin_adam, twin_two, "v"));
    // A gather over keys of both owners: one exchange with each.
    const std::vector<int64_t> keys = {5, -3, 100, 101, 102, 200, int64_t{1} << 40};
    const internal::WireStats before = internal::ClusterAccess::wire_stats(cluster);
    const Tensor got = two.gather(i64(keys));
    EXPECT(internal::ClusterAccess::wire_stats(cluster).exchanges - before.exchanges == 2);
    EXPECT(same(got, twin_two.gather(i64(keys))));
  }
  cluster.barrier();

  // Both workers at once: scatter_adds onto the same keys, and inserts of
  // keys of their own.
  std::vector<int64_t> shared;
  for (int64_t k = 1000; k < 1064; ++k) shared.push_back(k);
  if (cluster.is_chief()) two.insert(i64(shared), filled({64, kDim}, 0));
  cluster.barrier();
  const int64_t before = worker ? two.size() : 0;
  constexpr int kRounds = 25;
  if (worker) {
    const Tensor ones = filled({64, kDim}, 1);
    std::vector<int64_t> mine;
    for (int64_t i = 0; i < 200; ++i) mine.push_back(5000 + 1000 * cluster.task_index() + i);
    for (int r = 0; r < kRounds; ++r) {
      two.scatter_add(i64(shared), ones);
      if (r == kRounds / 2) two.insert(i64(mine), filled({200, kDim}, 1));
    }
  }
  cluster.barrier();
  if (worker) {
    const std::vector<float> got = two.gather(i64(shared)).to_vector<float>();
    int wrong = 0;
    for (float x : got) wrong += x != 2 * kRounds ? 1 : 0;
    EXPECT(wrong == 0);
    EXPECT(two.size() == before + 400);
  }
  cluster.barrier();

  // Errors keep their class and message, and change nothing.
  if (cluster.is_chief()) {
    capped.insert(i64({1, 2, 3}), filled({3, 2}, 1));
    EXPECT_THROWS(ResourceExhaustedError, capped.gather(i64({4, 5})), "\"capped\"", "max_rows 3");
    EXPECT(capped.size() == 3);
    EXPECT_THROWS(InvalidArgumentError, two.insert(i64({7, 8}), filled({2, kDim + 1}, 1)), "two");
    EXPECT_THROWS(TypeError, two.gather(Tensor::from_vector<float>({1.0f})), "two");
    EXPECT(same_rows(two, two));  // still served
  }
  cluster.barrier();
  int64_t twin_expired = 0;
  if (worker) {
    EXPECT(capped.size() == 3);
    EXPECT(same(capped.gather(i64({1, 2, 3})), filled({3, 2}, 1)));
    lru_script(twin_lru);
    twin_expired = expiry_script(twin_expiring);
  }
  if (cluster.is_chief()) {
    EXPECT(expiry_script(expiring) == twin_expired);
    EXPECT(twin_expired > 0 && expiring.size() == twin_expiring.size());
    lru_script(lru);
    EXPECT(lru.size() == 6);
    EXPECT_THROWS(ResourceExhaustedError, lru.gather(i64({20, 21, 22, 23, 24, 25, 26})), "\"lru\"",
                  "7 new keys do not fit under max_rows 6");
  }
  cluster.barrier();
  if (worker) {
    EXPECT(same_rows(expiring, twin_expiring));
    EXPECT(same_rows(lru, twin_lru));
    EXPECT(lru.size() == 6);
  }
  cluster.barrier();

  // A request that reaches its owner before the owner created the table
  // waits for it (the owner is late here); then it is served.
  if (cluster.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  DynamicVariable late =
      dynamic("late", "/job:ps/task:0", {.dim = 1, .initializer = zeros_initializer()});
  if (cluster.is_chief()) {
    Session().run(variables_initializer({late.variable()}));
    late.insert(i64({1, 2}), filled({2, 1}, 2));
    EXPECT(late.size() == 2);
  }
  return finish(&cluster);
}

// save: the sharded table on 2 ps tasks, trained, saved whole then as a
// delta.
int dynamic_save(const std::string& dir) {
  Cluster cluster({.ps_tasks = 2});
  g_rank = cluster.rank();
  DynamicVariable two = dynamic("two", "", options({"/job:ps/task:0", "/job:ps/task:1"}));
  AdagradOptimizer opt(0.1);
  opt.create_slots({two.variable()});
  Session().run(global_variables_initializer());
  cluster.barrier();
  DistributedSaver saver(cluster);
  if (cluster.is_chief()) script(two, opt, 1);
  cluster.barrier();
  saver.save(dir + "/model", {.global_step = 1, .incremental = true});  // the base
  if (cluster.is_chief()) script(two, opt, 2);
  cluster.barrier();
  const std::string path = saver.save(dir + "/model", {.global_step = 2, .incremental = true});
  EXPECT(path == dir + "/model-2");
  // The second is a delta: the few keys part 2 changed and erased.
  if (cluster.rank() == 0) {
    const auto bytes = [&](const std::string& prefix) {
      return std::filesystem::file_size(prefix + ".data-00000-of-00001");
    };
    EXPECT(bytes(dir + "/model-2") * 4 < bytes(dir + "/model-1"));
  }
  return finish(&cluster);
}

// What the checkpoint must hold: the script on a table of this process.
struct Expected {
  DynamicVariable twin;
  AdagradOptimizer opt{0.1};
};
std::unique_ptr<Expected> expected() {
  auto e = std::unique_ptr<Expected>(new Expected{dynamic("twin", "")});
  e->opt.create_slots({e->twin.variable()});
  Session().run(variables_initializer(
      {e->twin.variable(), *e->opt.get_slot(e->twin.variable(), "accumulator")}));
  script(e->twin, e->opt, 1);
  script(e->twin, e->opt, 2);
  return e;
}

void check_restored(DynamicVariable& two, AdagradOptimizer& opt) {
  std::unique_ptr<Expected> e = expected();
  EXPECT(two.size() == e->twin.size());
  EXPECT(same_rows(two, e->twin));
  EXPECT(same_slot(opt, two, e->opt, e->twin, "accumulator"));
}

// restore: 1 ps + 1 worker, the table now on one task.
int dynamic_restore(const std::string& dir) {
  Cluster cluster({.ps_tasks = 1});
  g_rank = cluster.rank();
  DynamicVariable two = dynamic("two", "/job:ps/task:0");
  AdagradOptimizer opt(0.1);
  opt.create_slots({two.variable()});
  DistributedSaver saver(cluster);
  saver.restore(dir + "/model-2");
  if (cluster.job_name() == "worker") check_restored(two, opt);
  return finish(&cluster);
}

// check: one process, a plain Saver.
int dynamic_check(const std::string& dir) {
  g_rank = 0;
  DynamicVariable two = dynamic("two", "");
  AdagradOptimizer opt(0.1);
  opt.create_slots({two.variable()});
  Saver saver;
  Session session;
  saver.restore(session, dir + "/model-2");
  check_restored(two, opt);
  return finish(nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const std::string mode = argc > 1 ? argv[1] : "";
  const std::string dir = argc > 2 ? argv[2] : "";
  int rc = 2;
  try {
    if (mode == "ops") rc = dynamic_ops();
    if (mode == "save") rc = dynamic_save(dir);
    if (mode == "restore") rc = dynamic_restore(dir);
    if (mode == "check") rc = dynamic_check(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] uncaught: %s\n", g_rank, e.what());
    rc = 1;
  }
  if (rc == 2) std::fprintf(stderr, "usage: mpi_dynamic_test ops|save DIR|restore DIR|check DIR\n");
  MPI_Finalize();
  return rc;
}
