// Dynamic variables in checkpoints: "<name>-keys" / "<name>-values" for the
// variable and its slots, bit-exact restores into fresh graphs and other
// devices, restores that replace the table, incremental chains, snapshots
// that keep keys and rows together, and bad checkpoints that change
// nothing.
#include <catch2/catch.hpp>

#include <atomic>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "checkpoint_test_util.h"
#include "device_fixture.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/dynamic_variable.h"
#include "varstate/error.h"
#include "varstate/optimizers.h"
#include "varstate/saver.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;
using Catch::Matchers::Contains;

namespace {

Tensor keys_tensor(const std::vector<int64_t>& keys) { return Tensor::from_vector(keys); }

// Keys spread over the whole int64 range, the reserved words included.
std::vector<int64_t> random_keys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> out = {INT64_MIN, INT64_MIN + 1, 0, -1, INT64_MAX};
  while (out.size() < n) out.push_back(static_cast<int64_t>(rng()));
  return out;
}

struct Model {
  DynamicVariable emb;
  Variable dense;
  AdagradOptimizer opt{0.1};
};

// A dynamic table, a dense variable and their Adagrad slots, created in the
// current graph (trained or not).
std::unique_ptr<Model> make_model(int64_t dim) {
  auto m = std::unique_ptr<Model>(new Model{
      get_dynamic_variable("emb",
                           {.dim = dim, .initializer = random_uniform_initializer({.seed = 3})}),
      get_variable("dense", {.shape = TensorShape{3}}),
  });
  m->opt.create_slots({m->emb.variable(), m->dense});
  return m;
}

void train(Model& m, const std::vector<int64_t>& keys, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(keys.size());
  const int64_t dim = m.emb.dim();
  std::mt19937_64 rng(seed);
  std::vector<float> g(static_cast<size_t>(n * dim));
  for (float& x : g) x = static_cast<float>(static_cast<int>(rng() % 13) - 6) / 16.0f;
  m.opt.apply_gradients(
      {m.emb.gradient(keys_tensor(keys),
                      Tensor::from_vector(g, TensorShape({n, dim})).on(test_device())),
       {Tensor({1.0f, 2.0f, 3.0f}), m.dense}});
}

std::pair<std::vector<int64_t>, std::vector<float>> contents(const Variable& v) {
  const DynamicVariable d = *DynamicVariable::from_variable(v);
  KeysAndValues kv = d.export_rows();
  return {kv.keys.to_vector<int64_t>(), kv.values.to_vector<float>()};
}

std::vector<float> slot_rows(Model& m) {
  return m.opt.get_slot(m.emb.variable(), "accumulator")->value().to_vector<float>();
}

}  // namespace

TEST_CASE_METHOD(FreshSession, "dynamic checkpoint: keys and values restore bit-exact",
                 "[dynamic][saver]") {
  TempDir dir;
  const int64_t dim = 5;
  std::unique_ptr<Model> m = make_model(dim);
  session.run(global_variables_initializer());
  const std::vector<int64_t> keys = random_keys(300, kSeed);
  train(*m, keys, kSeed);
  train(*m, std::vector<int64_t>(keys.begin(), keys.begin() + 50), kSeed + 1);
  const auto saved = contents(m->emb.variable());
  const std::vector<float> saved_slot = slot_rows(*m);
  const std::vector<float> saved_dense = m->dense.value().to_vector<float>();
  Saver saver;
  const std::string path = saver.save(session, dir / "model").wait().value();

  // TensorFlow's layout: plain tensors, keys ascending.
  std::unique_ptr<CheckpointReader> reader = open_checkpoint(path);
  const TensorInfo k = reader->info("emb-keys");
  CHECK(k.dtype == DType::kInt64);
  CHECK(k.shape == std::vector<int64_t>{300});
  CHECK(reader->info("emb-values").shape == std::vector<int64_t>{300, dim});
  CHECK(reader->info("emb/Adagrad-keys").shape == std::vector<int64_t>{300});
  CHECK(reader->info("emb/Adagrad-values").shape == std::vector<int64_t>{300, dim});
  CHECK_FALSE(reader->contains("emb"));
  std::vector<int64_t> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  CHECK(saved.first == sorted);
  // The state one more step leads to, for the restored copies to reach.
  train(*m, keys, kSeed + 2);
  const auto stepped = contents(m->emb.variable());

  // A fresh graph (and, for the GPU run, the CPU: another device).
  for (const char* device : {test_device_name(), "/device:CPU:0"}) {
    CAPTURE(device);
    reset_default_graph();
    DeviceScope here(device);
    std::unique_ptr<Model> fresh = make_model(dim);
    session.run(global_variables_initializer());
    fresh->emb.gather(keys_tensor({42, 43}));  // replaced by the restore
    Saver().restore(session, path);
    CHECK(contents(fresh->emb.variable()) == saved);
    CHECK(slot_rows(*fresh) == saved_slot);
    CHECK(fresh->dense.value().to_vector<float>() == saved_dense);
    CHECK(fresh->emb.size() == 300);
    // Training goes on from the restored state exactly as the original.
    train(*fresh, keys, kSeed + 2);
    CHECK(contents(fresh->emb.variable()) == stepped);
  }
  reset_default_graph();
}

TEST_CASE_METHOD(FreshSession, "dynamic checkpoint: a bad checkpoint changes nothing",
                 "[dynamic][saver]") {
  TempDir dir;
  std::string path;
  {
    DynamicVariable wide = get_dynamic_variable("emb", {.dim = 4});
    session.run(global_variables_initializer());
    wide.gather(keys_tensor({1, 2, 3}));
    path = Saver().save(session, dir / "wide").wait().value();
  }
  reset_default_graph();
  DynamicVariable narrow = get_dynamic_variable("emb", {.dim = 3});
  Variable other = get_variable("other", {.shape = TensorShape{2}});
  session.run(global_variables_initializer());
  narrow.gather(keys_tensor({7}));
  const auto before = contents(narrow.variable());
  CHECK_THROWS_WITH(
      Saver({.var_list = std::vector<Variable>{narrow.variable()}}).restore(session, path),
      Contains("emb-values") && Contains("expected [3,3]"));
  CHECK(contents(narrow.variable()) == before);
  // A missing pair: NotFoundError, the dense variable untouched too.
  const std::vector<float> other_before = other.value().to_vector<float>();
  CHECK_THROWS_AS(Saver({.var_list = std::map<std::string, Variable>{{"missing", narrow.variable()},
                                                                     {"other", other}}})
                      .restore(session, path),
                  NotFoundError);
  CHECK(contents(narrow.variable()) == before);
  CHECK(other.value().to_vector<float>() == other_before);
}

TEST_CASE_METHOD(FreshSession, "dynamic checkpoint: incremental chains and async snapshots",
                 "[dynamic][saver]") {
  TempDir dir;
  std::unique_ptr<Model> m = make_model(4);
  session.run(global_variables_initializer());
  const std::vector<int64_t> keys = random_keys(200, kSeed + 5);
  train(*m, keys, 1);
  Saver saver({.max_to_keep = 10});
  (void)saver.save(session, dir / "model", {.global_step = int64_t{1}, .incremental = true}).wait();
  // Changes: some rows trained, some keys erased, new keys.
  train(*m, std::vector<int64_t>(keys.begin(), keys.begin() + 20), 2);
  m->emb.erase(keys_tensor(std::vector<int64_t>(keys.begin() + 20, keys.begin() + 40)));
  m->emb.gather(keys_tensor({123456789, 987654321}));
  const std::string delta =
      saver.save(session, dir / "model", {.global_step = int64_t{2}, .incremental = true})
          .wait()
          .value();
  const auto saved = contents(m->emb.variable());
  const std::vector<float> saved_slot = slot_rows(*m);
  CHECK(saved.first.size() == 182);
  reset_default_graph();
  std::unique_ptr<Model> fresh = make_model(4);
  session.run(global_variables_initializer());
  Saver().restore(session, delta);
  CHECK(contents(fresh->emb.variable()) == saved);
  CHECK(slot_rows(*fresh) == saved_slot);

  // An asynchronous save's snapshot holds keys and rows of one moment while
  // other threads insert and erase.
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    int64_t next = 1;
    while (!stop) {
      fresh->emb.gather(keys_tensor({next, next + 1}));
      fresh->emb.erase(keys_tensor({next - 1}));
      next += 2;
    }
  });
  std::vector<std::string> paths;
  for (int i = 0; i < 5; ++i) {
    paths.push_back(Saver()
                        .save(session, dir / ("async-" + std::to_string(i)), {.async = true})
                        .wait()
                        .value());
  }
  stop = true;
  writer.join();
  for (const std::string& p : paths) {
    std::unique_ptr<CheckpointReader> r = open_checkpoint(p);
    CAPTURE(p);
    CHECK(r->info("emb-values").shape[0] == r->info("emb-keys").shape[0]);
    CHECK(r->info("emb/Adagrad-values").shape[0] == r->info("emb-keys").shape[0]);
  }
  reset_default_graph();
}

TEST_CASE_METHOD(FreshSession, "dynamic checkpoint: a capped table's update history restores",
                 "[dynamic][saver]") {
  TempDir dir;
  auto make = [] {
    return get_dynamic_variable(
        "emb", {.dim = 2, .initializer = zeros_initializer(), .max_rows = 3, .expire_after = 100});
  };
  DynamicVariable v = make();
  GradientDescentOptimizer sgd(0.5);
  session.run(global_variables_initializer());
  const Tensor g = Tensor::filled(DType::kFloat, {1, 2}, Tensor(1.0f), test_device());
  for (int64_t k : {30, 10, 20, 10}) sgd.apply_gradients({v.gradient(keys_tensor({k}), g)});
  const std::string path = Saver().save(session, dir / "capped").wait().value();
  std::unique_ptr<CheckpointReader> reader = open_checkpoint(path);
  // Keys ascending: 10 (steps 1 and 3), 20 (step 2), 30 (step 0).
  CHECK(reader->read("emb-versions").values<int64_t>() == std::vector<int64_t>{3, 2, 0});
  CHECK(reader->read("emb-counts").values<int64_t>() == std::vector<int64_t>{2, 1, 1});

  reset_default_graph();
  DynamicVariable fresh = make();
  session.run(global_variables_initializer());
  Saver().restore(session, path);
  CHECK(fresh.step() == 3);
  // The least recently updated key is still 30: a new key evicts it.
  fresh.gather(keys_tensor({40}));
  const std::vector<int64_t> keys = fresh.export_rows().keys.to_vector<int64_t>();
  CHECK(keys == std::vector<int64_t>{10, 20, 40});
  // A checkpoint with more keys than the cap: nothing changes.
  reset_default_graph();
  DynamicVariable small =
      get_dynamic_variable("emb", {.dim = 2, .initializer = zeros_initializer(), .max_rows = 2});
  session.run(global_variables_initializer());
  small.insert(keys_tensor({1}), Tensor::zeros(DType::kFloat, {1, 2}));
  CHECK_THROWS_AS(Saver().restore(session, path), ResourceExhaustedError);
  CHECK(small.export_rows().keys.to_vector<int64_t>() == std::vector<int64_t>{1});
  reset_default_graph();
}
