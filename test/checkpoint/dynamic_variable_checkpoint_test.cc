// Dynamic variables in checkpoints: "<name>-keys" / "<name>-values" for the
// variable and its slots, bit-exact restores into fresh graphs and other
// devices, restores that replace the table, incremental chains, snapshots
// that keep keys and rows together, and bad checkpoints that change
// nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "checkpoint/checkpoint_chain.h"
#include "checkpoint/tensor_bundle.h"
#include "checkpoint_test_util.h"
#include "device_fixture.h"
#include "kernels/key_hash.h"
#include "varstate/checkpoint_chain.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/device_manager.h"
#include "varstate/dynamic_variable.h"
#include "varstate/error.h"
#include "varstate/graph.h"
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
std::unique_ptr<Model> make_model(int64_t dim, const std::vector<std::string>& devices = {}) {
  auto m = std::unique_ptr<Model>(new Model{
      get_dynamic_variable(
          "emb",
          {.dim = dim, .initializer = random_uniform_initializer({.seed = 3}), .devices = devices}),
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

// Saves incrementally at `step`; the checkpoint's path.
std::string incremental_save(Saver& saver, Session& session, const std::string& prefix,
                             int64_t step) {
  return saver.save(session, prefix, {.global_step = step, .incremental = true}).wait().value();
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
  (void)incremental_save(saver, session, dir / "model", 1);
  // Changes: some rows trained, some keys erased, new keys.
  train(*m, std::vector<int64_t>(keys.begin(), keys.begin() + 20), 2);
  m->emb.erase(keys_tensor(std::vector<int64_t>(keys.begin() + 20, keys.begin() + 40)));
  m->emb.gather(keys_tensor({123456789, 987654321}));
  const std::string delta = incremental_save(saver, session, dir / "model", 2);
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

namespace {

// The sorted distinct union of key lists.
std::vector<int64_t> sorted_union(std::initializer_list<std::vector<int64_t>> lists) {
  std::vector<int64_t> out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int64_t> slice(const std::vector<int64_t>& v, size_t from, size_t to) {
  return {v.begin() + static_cast<ptrdiff_t>(from), v.begin() + static_cast<ptrdiff_t>(to)};
}

const DeltaEntry& entry(const ChainLink& link, const std::string& key) {
  for (const DeltaEntry& e : link.entries) {
    if (e.key == key) return e;
  }
  FAIL("no entry " << key << " in " << link.path);
  throw std::logic_error("unreachable");
}

// What a fresh graph holds after restoring `path`: the table's keys and
// rows and the accumulator's rows.
std::tuple<std::vector<int64_t>, std::vector<float>, std::vector<float>> restored(
    Session& session, const std::string& path, int64_t dim) {
  reset_default_graph();
  std::unique_ptr<Model> fresh = make_model(dim);
  session.run(global_variables_initializer());
  fresh->emb.gather(keys_tensor({-42}));  // replaced by the restore
  Saver().restore(session, path);
  auto [keys, rows] = contents(fresh->emb.variable());
  return {keys, rows, slot_rows(*fresh)};
}

// Rewrites the bundle at `prefix` (a delta: its chain record kept) with
// `edit` applied to its tensors.
void rewrite_bundle(const std::string& prefix,
                    const std::function<void(std::map<std::string, TensorData>&)>& edit) {
  std::map<std::string, TensorData> tensors;
  {
    BundleReader bundle(prefix);
    for (const TensorInfo& info : bundle.list()) tensors[info.name] = bundle.read(info.name);
  }
  edit(tensors);
  BundleWriter writer(prefix);
  for (const auto& [key, tensor] : tensors) writer.add(key, tensor.view());
  writer.finish();
}

}  // namespace

TEST_CASE_METHOD(FreshSession,
                 "dynamic checkpoint: a delta holds the keys written and erased; chains restore "
                 "and compact bit-exact",
                 "[dynamic][saver][incremental]") {
  TempDir dir;
  const int64_t dim = 16;
  std::unique_ptr<Model> m = make_model(dim);
  session.run(global_variables_initializer());
  const std::vector<int64_t> keys = random_keys(2000, kSeed + 7);
  train(*m, keys, 1);
  Saver saver({.max_to_keep = 10});
  const std::string base = incremental_save(saver, session, dir / "model", 1);

  // 20 keys trained, 10 erased, 3 new, one erased and inserted again.
  const std::vector<int64_t> trained = slice(keys, 0, 20);
  const std::vector<int64_t> erased = slice(keys, 20, 30);
  const std::vector<int64_t> fresh_keys = {11, 22, 33};
  const int64_t again = keys[30];
  train(*m, trained, 2);
  m->emb.erase(keys_tensor(erased));
  m->emb.gather(keys_tensor(fresh_keys));
  m->emb.erase(keys_tensor({again}));
  m->emb.gather(keys_tensor({again}));
  const std::string delta1 = incremental_save(saver, session, dir / "model", 2);
  const auto saved1 = contents(m->emb.variable());
  const std::vector<float> saved1_slot = slot_rows(*m);
  CHECK(saved1.first.size() == 2000 - 10 + 3);

  // The delta as stored: the keys written and erased, and their rows only.
  const std::vector<ChainLink> chain1 = checkpoint_chain(delta1);
  REQUIRE(chain1.size() == 2);
  REQUIRE(chain1[1].is_delta);
  const std::vector<int64_t> written1 = sorted_union({trained, fresh_keys, {again}});
  {
    BundleReader d(delta1);
    CHECK(d.read("emb-keys/.delta_keys").values<int64_t>() == written1);
    CHECK(d.read("emb-keys/.delta_erased").values<int64_t>() == sorted_union({erased, {again}}));
    CHECK(d.info("emb-values/.delta_key_rows").shape ==
          std::vector<int64_t>{static_cast<int64_t>(written1.size()), dim});
    CHECK(d.info("emb/Adagrad-values/.delta_key_rows").shape[0] ==
          static_cast<int64_t>(written1.size()));
    CHECK_FALSE(d.contains("emb-values"));
  }
  CHECK(entry(chain1[1], "emb-values").rows == static_cast<int64_t>(written1.size()));
  CHECK(entry(chain1[1], "emb-values").bytes * 50 < BundleReader(base).info("emb-values").size);
  // The chain read as one checkpoint.
  CHECK(open_checkpoint(delta1)->info("emb-values").shape ==
        std::vector<int64_t>{static_cast<int64_t>(saved1.first.size()), dim});
  CHECK(restored(session, delta1, dim) == std::tuple{saved1.first, saved1.second, saved1_slot});

  // A second delta: a key new in the first erased, a key erased there
  // inserted again, more training.
  reset_default_graph();
  m = make_model(dim);
  session.run(global_variables_initializer());
  Saver saver2({.max_to_keep = 10});
  saver2.restore(session, delta1);
  // (a restore replaces the table: saver2's first incremental save is a base)
  const std::string base2 = incremental_save(saver2, session, dir / "again", 2);
  CHECK(checkpoint_chain(base2).size() == 1);
  m->emb.erase(keys_tensor({fresh_keys[0]}));
  m->emb.gather(keys_tensor({erased[0]}));
  train(*m, slice(keys, 100, 130), 3);
  const std::string d2 = incremental_save(saver2, session, dir / "again", 3);
  m->emb.erase(keys_tensor({erased[0], keys[100]}));
  m->emb.gather(keys_tensor({fresh_keys[0]}));
  train(*m, slice(keys, 120, 125), 4);
  const std::string d3 = incremental_save(saver2, session, dir / "again", 4);
  const auto saved3 = contents(m->emb.variable());
  const std::vector<float> saved3_slot = slot_rows(*m);
  REQUIRE(checkpoint_chain(d3).size() == 3);
  CHECK(checkpoint_chain(d2).back().is_delta);
  CHECK(restored(session, d3, dim) == std::tuple{saved3.first, saved3.second, saved3_slot});

  // Compaction folds the chain into plain tensors TensorFlow reads.
  compact_checkpoint(d3, dir / "compact");
  {
    BundleReader c(dir / "compact");
    CHECK(c.read("emb-keys").values<int64_t>() == saved3.first);
    CHECK(c.read("emb-values").values<float>() == saved3.second);
    CHECK(c.read("emb/Adagrad-values").values<float>() == saved3_slot);
    CHECK(c.read("emb/Adagrad-keys").values<int64_t>() == saved3.first);
    CHECK_FALSE(c.contains("emb-keys/.delta_keys"));
  }
  CHECK(restored(session, dir / "compact", dim) ==
        std::tuple{saved3.first, saved3.second, saved3_slot});
  reset_default_graph();
}

TEST_CASE_METHOD(FreshSession,
                 "dynamic checkpoint: another saver's take makes the next save a base",
                 "[dynamic][saver][incremental]") {
  TempDir dir;
  std::unique_ptr<Model> m = make_model(8);
  session.run(global_variables_initializer());
  const std::vector<int64_t> keys = random_keys(1000, kSeed + 8);
  train(*m, keys, 1);
  Saver a({.max_to_keep = 10});
  Saver b({.max_to_keep = 10});
  (void)incremental_save(a, session, dir / "a", 1);
  (void)incremental_save(b, session, dir / "b", 1);
  train(*m, slice(keys, 0, 5), 2);
  // b took the marks since a's base: a's next save cannot know them.
  const std::string next = incremental_save(a, session, dir / "a", 2);
  CHECK(checkpoint_chain(next).size() == 1);
  train(*m, slice(keys, 5, 10), 3);
  const std::string delta = incremental_save(a, session, dir / "a", 3);
  CHECK(checkpoint_chain(delta).size() == 2);
  const auto saved = contents(m->emb.variable());
  CHECK(std::get<0>(restored(session, delta, 8)) == saved.first);
  CHECK(std::get<1>(restored(session, delta, 8)) == saved.second);
  reset_default_graph();
}

TEST_CASE_METHOD(FreshSession, "dynamic checkpoint: a capped table's update history in deltas",
                 "[dynamic][saver][incremental]") {
  TempDir dir;
  auto make = [] {
    return get_dynamic_variable(
        "emb", {.dim = 4,
                .initializer = zeros_initializer(),
                .max_rows = 400,
                .eviction = DynamicVariableOptions::Eviction::kLeastRecentlyUpdated});
  };
  DynamicVariable v = make();
  GradientDescentOptimizer sgd(0.5);
  session.run(global_variables_initializer());
  auto step = [&](int64_t first, int64_t n) {
    std::vector<int64_t> k(static_cast<size_t>(n));
    std::iota(k.begin(), k.end(), first);
    sgd.apply_gradients({v.gradient(
        keys_tensor(k), Tensor::filled(DType::kFloat, {n, 4}, Tensor(0.25f), test_device()))});
  };
  for (int64_t s = 0; s < 4; ++s) step(s * 100, 100);  // full: 400 keys
  Saver saver({.max_to_keep = 10});
  (void)incremental_save(saver, session, dir / "m", 1);
  step(50, 10);   // updated
  step(1000, 5);  // new: evicts the 5 least recently updated
  const std::string delta = incremental_save(saver, session, dir / "m", 2);
  REQUIRE(checkpoint_chain(delta).size() == 2);
  const std::string full = Saver().save(session, dir / "full").wait().value();
  std::unique_ptr<CheckpointReader> chained = open_checkpoint(delta);
  std::unique_ptr<CheckpointReader> whole = open_checkpoint(full);
  for (const char* key : {"emb-keys", "emb-values", "emb-versions", "emb-counts"}) {
    CAPTURE(key);
    CHECK(chained->read(key).bytes == whole->read(key).bytes);
    CHECK(chained->info(key).shape == whole->info(key).shape);
  }
  reset_default_graph();
  DynamicVariable fresh = make();
  session.run(global_variables_initializer());
  Saver().restore(session, delta);
  CHECK(fresh.export_rows().keys.to_vector<int64_t>() == v.export_rows().keys.to_vector<int64_t>());
  reset_default_graph();
}

TEST_CASE_METHOD(FreshSession, "dynamic checkpoint: a bad delta is refused naming the file",
                 "[dynamic][saver][incremental]") {
  TempDir dir;
  std::unique_ptr<Model> m = make_model(8);
  session.run(global_variables_initializer());
  const std::vector<int64_t> keys = random_keys(1000, kSeed + 9);
  train(*m, keys, 1);
  Saver saver({.max_to_keep = 10});
  (void)incremental_save(saver, session, dir / "m", 1);
  train(*m, slice(keys, 0, 10), 2);
  m->emb.erase(keys_tensor(slice(keys, 10, 12)));
  const std::string delta = incremental_save(saver, session, dir / "m", 2);
  REQUIRE(checkpoint_chain(delta).size() == 2);
  const std::string good = read_file(delta + ".index");
  const std::string good_data = read_file(delta + ".data-00000-of-00001");
  auto expect_loss = [&](const std::function<void(std::map<std::string, TensorData>&)>& edit,
                         const std::string& why) {
    rewrite_bundle(delta, edit);
    CAPTURE(why);
    CHECK_THROWS_AS(open_checkpoint(delta), DataLossError);
    CHECK_THROWS_WITH(open_checkpoint(delta), Contains(why) && Contains(delta));
    write_file(delta + ".index", good);
    write_file(delta + ".data-00000-of-00001", good_data);
  };
  expect_loss(
      [](auto& t) {
        std::vector<int64_t> k = t["emb-keys/.delta_keys"].template values<int64_t>();
        std::reverse(k.begin(), k.end());
        t["emb-keys/.delta_keys"] = TensorData::from_values({static_cast<int64_t>(k.size())}, k);
      },
      "not ascending");
  expect_loss([](auto& t) { t.erase("emb-values/.delta_key_rows"); }, "is missing");
  expect_loss(
      [](auto& t) {
        TensorData& rows = t["emb/Adagrad-values/.delta_key_rows"];
        rows.shape[0] -= 1;
        rows.bytes.resize(rows.bytes.size() - 8 * sizeof(float));
      },
      "must hold the rows");
  expect_loss([](auto& t) { t.erase("emb-keys/.delta_keys"); }, "lacks");
  // The untouched delta still restores.
  const auto saved = contents(m->emb.variable());
  CHECK(std::get<0>(restored(session, delta, 8)) == saved.first);
  reset_default_graph();
}

TEST_CASE_METHOD(FreshSession,
                 "dynamic checkpoint: incremental saves while other threads train, insert and "
                 "erase; the last restores the live table",
                 "[dynamic][saver][incremental][stress]") {
  TempDir dir;
  std::unique_ptr<Model> m = make_model(4);
  session.run(global_variables_initializer());
  const std::vector<int64_t> keys = random_keys(20000, kSeed + 10);
  train(*m, keys, 1);
  // No delta is too large here: on a loaded machine the threads can change
  // more than half the rows while one save runs, and the size rule would
  // then write a base (the rule has its own test, incremental_saver_test.cc:
  // "the base policy"). Every save is then a delta unless the table's
  // changes were not all tracked, which is what this test is after.
  Saver saver({.max_to_keep = 20, .max_deltas_per_base = 100, .max_delta_fraction = 1e9});
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  Graph& graph = get_default_graph();
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      auto in_graph = graph.as_default();  // the optimizer's graph on this thread too
      DeviceScope here(test_device_name());
      std::mt19937_64 rng(kSeed + static_cast<uint64_t>(t));
      while (!stop) try {
          const size_t at = rng() % (keys.size() - 8);
          switch (rng() % 3) {
            case 0:
              train(*m, slice(keys, at, at + 8), rng());
              break;
            case 1:
              m->emb.erase(keys_tensor(slice(keys, at, at + 2)));
              break;
            default:
              m->emb.gather(keys_tensor({keys[at], static_cast<int64_t>(rng() % 5000)}));
          }
        } catch (...) {
          failed = true;
          return;
        }
    });
  }
  std::vector<std::string> paths;
  for (int64_t i = 1; i <= 12; ++i) {
    paths.push_back(
        saver.save(session, dir / "m", {.global_step = i, .async = i % 2 == 0, .incremental = true})
            .wait()
            .value());
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  REQUIRE_FALSE(failed);
  int deltas = 0;
  for (const std::string& p : paths) {
    CAPTURE(p);
    std::unique_ptr<CheckpointReader> r = open_checkpoint(p);
    const int64_t n = r->info("emb-keys").shape[0];
    CHECK(r->info("emb-values").shape[0] == n);
    CHECK(r->info("emb/Adagrad-values").shape[0] == n);
    const std::vector<int64_t> k = r->read("emb-keys").values<int64_t>();
    CHECK(std::is_sorted(k.begin(), k.end()));
    deltas += checkpoint_chain(p).back().is_delta ? 1 : 0;
  }
  CHECK(deltas >= 4);
  const std::string last = incremental_save(saver, session, dir / "m", 13);
  CHECK(checkpoint_chain(last).back().is_delta);
  const auto live = contents(m->emb.variable());
  const std::vector<float> live_slot = slot_rows(*m);
  CHECK(restored(session, last, 4) == std::tuple{live.first, live.second, live_slot});
  reset_default_graph();
}

TEST_CASE_METHOD(FreshSession,
                 "dynamic checkpoint: a sharded table saves one table and restores into any "
                 "sharding",
                 "[dynamic][saver]") {
  const int gpus = DeviceManager::instance().num_gpus();
  if (gpus == 0) return;  // one device: nothing to shard over
  std::vector<std::string> all = {"/device:CPU:0"};
  for (int g = 0; g < gpus; ++g) all.push_back("/device:GPU:" + std::to_string(g));
  const std::vector<std::vector<std::string>> targets = {{}, {all.back(), "/device:CPU:0"}, all};
  TempDir dir;
  const std::vector<int64_t> keys = random_keys(1500, kSeed + 11);
  auto run = [&](Model& m) {
    train(m, keys, 1);
    train(m, slice(keys, 0, 300), 2);
    m.emb.erase(keys_tensor(slice(keys, 300, 320)));
  };
  // The same steps on one table and on a sharded one save the same tensors.
  std::unique_ptr<Model> one = make_model(8);
  session.run(global_variables_initializer());
  run(*one);
  const std::string one_path = Saver().save(session, dir / "one").wait().value();
  reset_default_graph();
  std::unique_ptr<Model> sharded = make_model(8, all);
  session.run(global_variables_initializer());
  run(*sharded);
  Saver saver({.max_to_keep = 10});
  const std::string base = incremental_save(saver, session, dir / "sharded", 1);
  for (const char* key : {"emb-keys", "emb-values", "emb/Adagrad-keys", "emb/Adagrad-values"}) {
    CAPTURE(key);
    CHECK(open_checkpoint(base)->read(key).bytes == open_checkpoint(one_path)->read(key).bytes);
  }
  // A delta of the sharded table.
  train(*sharded, slice(keys, 500, 520), 3);
  sharded->emb.erase(keys_tensor(slice(keys, 600, 610)));
  sharded->emb.gather(keys_tensor({7, 8, 9}));
  const std::string delta = incremental_save(saver, session, dir / "sharded", 2);
  REQUIRE(checkpoint_chain(delta).back().is_delta);
  const auto saved = contents(sharded->emb.variable());
  const std::vector<float> saved_slot = slot_rows(*sharded);
  train(*sharded, keys, 4);
  const auto stepped = contents(sharded->emb.variable());
  // Restored into one table, two shards and as many as saved.
  for (const std::vector<std::string>& devices : targets) {
    CAPTURE(devices);
    reset_default_graph();
    std::unique_ptr<Model> fresh = make_model(8, devices);
    session.run(global_variables_initializer());
    Saver().restore(session, delta);
    CHECK(contents(fresh->emb.variable()) == saved);
    CHECK(slot_rows(*fresh) == saved_slot);
    train(*fresh, keys, 4);
    CHECK(contents(fresh->emb.variable()) == stepped);
  }
  // A cap exactly the checkpoint's keys holds them, however unevenly they
  // fall over the shards; one key fewer is refused before anything
  // changes.
  const auto n = static_cast<int64_t>(saved.first.size());
  std::vector<int64_t> per_shard(all.size(), 0);
  for (int64_t k : saved.first) {
    ++per_shard[static_cast<size_t>(
        kernels::device_shard(static_cast<uint64_t>(k), static_cast<int64_t>(all.size())))];
  }
  CHECK(*std::max_element(per_shard.begin(), per_shard.end()) * static_cast<int64_t>(all.size()) >
        n);  // uneven: a cap split evenly would not hold them
  reset_default_graph();
  DynamicVariable exact = get_dynamic_variable("emb", {.dim = 8, .devices = all, .max_rows = n});
  DynamicVariable tight =
      get_dynamic_variable("tight", {.dim = 8, .devices = all, .max_rows = n - 1});
  session.run(global_variables_initializer());
  Saver({.var_list = std::map<std::string, Variable>{{"emb", exact.variable()}}})
      .restore(session, delta);
  CHECK(contents(exact.variable()) == saved);
  tight.gather(keys_tensor({1, 2, 3}));
  const auto before = contents(tight.variable());
  CHECK_THROWS_WITH(Saver({.var_list = std::map<std::string, Variable>{{"emb", tight.variable()}}})
                        .restore(session, delta),
                    Contains("emb-keys") && Contains("max_rows " + std::to_string(n - 1)));
  CHECK(contents(tight.variable()) == before);
  reset_default_graph();
}
