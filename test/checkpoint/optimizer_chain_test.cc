// Incremental checkpoints of models trained by optimizers: a delta holds
// the rows a sparse training op changed, of the variable and of each slot,
// and a chain (base + deltas, saved every k steps) restored into a fresh
// graph continues bit for bit as an uninterrupted run and as a restore of a
// full save: every variable, slot, beta power and global_step. The model
// has a dense variable, an embedding and a partitioned embedding, large
// enough (16 KiB and more) to be saved by rows, row-wise Adagrad's [rows]
// accumulator of the embedding too.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <memory>

#include "checkpoint/checkpoint_chain.h"
#include "checkpoint/tensor_bundle.h"
#include "checkpoint_test_util.h"
#include "varstate/graph.h"
#include "varstate/initializers.h"
#include "varstate/optimizers.h"
#include "varstate/partitioned_variable.h"
#include "varstate/partitioners.h"
#include "varstate/saver.h"
#include "varstate/session.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

using Factory = std::function<std::unique_ptr<Optimizer>()>;

constexpr int kEvery = 2;  // steps between incremental saves

// The model's variables, created in the default graph and initialized.
struct Model {
  Variable w, step, emb;
  PartitionedVariable table;

  Model()
      : w(Tensor::from_vector<float>({0.5f, -1.f, 2.f, 0.25f, -0.75f, 1.5f}, {2, 3}),
          {.name = "w"}),
        step(Tensor::from_vector<int64_t>({0}, {}), {.trainable = false, .name = "global_step"}),
        emb(get_variable(
            "emb", {.shape = TensorShape{5000, 8}, .initializer = constant_initializer(0.125f)})),
        table(get_variable("table", {.shape = TensorShape{4096, 4},
                                     .initializer = constant_initializer(0.375f),
                                     .partitioner = fixed_size_partitioner(2)})) {
    Session().run(global_variables_initializer());
  }

  // Step k's gradients (the same for every run): a few rows of each table,
  // with a duplicate id; on the host, or with `ids_on_device` on each
  // table's device (a GPU checks and marks the ids there).
  void train(Optimizer& opt, int k) {
    auto slices = [&](std::vector<float> rows, TensorShape shape, std::vector<int64_t> ids,
                      const Variable& of) {
      const Tensor values = Tensor::from_vector<float>(rows, shape);
      const Tensor t = Tensor::from_vector<int64_t>(ids);
      return ids_on_device ? IndexedSlices(values.to(of.device()), t.to(of.device()))
                           : IndexedSlices(values, t);
    };
    const float s = 0.1f * static_cast<float>(k + 1);
    const Tensor dense = Tensor::from_vector<float>({s, -s, 2 * s, 0.5f, -0.25f, s * s}, {2, 3});
    std::vector<float> rows(24);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = s * static_cast<float>(i % 5) - 0.5f;
    const int64_t r = (37 * k) % 5000;
    const IndexedSlices emb_grad = slices(rows, {3, 8}, {r, 4999, r}, emb);
    std::vector<GradientAndVariable> grads = {{dense, w}, {emb_grad, emb}};
    // One row of each part of the table.
    for (const Variable& part : table.variables()) {
      grads.push_back({slices({s, -s, s, 1}, {1, 4}, {(101 * k) % 2048}, part), part});
    }
    opt.apply_gradients(grads, &step);
  }

  bool ids_on_device = false;

  std::vector<Variable> trained() const {
    std::vector<Variable> out = {w, emb};
    for (const Variable& part : table.variables()) out.push_back(part);
    return out;
  }
};

// name -> bytes of every global variable.
std::map<std::string, std::string> state() {
  std::map<std::string, std::string> out;
  for (const Variable& v : global_variables()) {
    const Tensor t = v.value().to_host();
    out[v.op_name()] = std::string(static_cast<const char*>(t.raw_data()), t.nbytes());
  }
  return out;
}

std::map<std::string, std::string> uninterrupted(const Factory& make, int steps,
                                                 bool ids_on_device) {
  reset_default_graph();
  Model model;
  model.ids_on_device = ids_on_device;
  auto opt = make();
  for (int k = 0; k < steps; ++k) model.train(*opt, k);
  return state();
}

// N steps saved every kEvery steps (incrementally or not) to `prefix`.
struct Saved {
  std::string last;                   // the last checkpoint
  std::vector<std::string> emb_keys;  // "emb" and its slots
};

Saved train_and_save(const Factory& make, int n, const std::string& prefix, bool incremental,
                     bool ids_on_device) {
  reset_default_graph();
  Model model;
  model.ids_on_device = ids_on_device;
  auto opt = make();
  opt->create_slots(model.trained());  // before the Saver, which saves them
  Saver saver;
  Saved saved;
  for (int k = 0; k < n; ++k) {
    model.train(*opt, k);
    if ((k + 1) % kEvery != 0) continue;
    saved.last =
        *saver
             .save(Session(), prefix,
                   {.global_step = k + 1, .write_meta_graph = false, .incremental = incremental})
             .path();
  }
  saved.emb_keys = {model.emb.op_name()};
  for (const std::string& slot : opt->get_slot_names()) {
    saved.emb_keys.push_back(opt->get_slot(model.emb, slot)->op_name());
  }
  return saved;
}

// A fresh graph restored from `checkpoint`, then steps [n, n + m).
std::map<std::string, std::string> resumed(const Factory& make, const std::string& checkpoint,
                                           int n, int m, bool ids_on_device) {
  reset_default_graph();
  Model model;
  model.ids_on_device = ids_on_device;
  auto opt = make();
  opt->create_slots(model.trained());  // as building TensorFlow's train op
  Saver saver;
  saver.restore(Session(), checkpoint);
  for (int k = n; k < n + m; ++k) model.train(*opt, k);
  return state();
}

void check_same(const std::map<std::string, std::string>& got,
                const std::map<std::string, std::string>& want) {
  CHECK(got.size() == want.size());
  for (const auto& [var, bytes] : want) {
    CAPTURE(var);
    CHECK((got.count(var) == 1 && got.at(var) == bytes));
  }
}

}  // namespace

TEST_CASE_METHOD(FreshGraph,
                 "a delta holds the rows a sparse Adagrad step changed, in its slot too",
                 "[optimizer][saver][incremental]") {
  TempDir dir;
  Variable v =
      get_variable("v", {.shape = TensorShape{1000, 8}, .initializer = constant_initializer(0.5f)});
  Session().run(global_variables_initializer());
  AdagradOptimizer opt(0.1);
  opt.create_slots({v});
  Saver saver;
  saver.save(Session(), dir / "m", {.global_step = 0, .incremental = true});
  std::vector<float> g(24, 0.25f);
  // The ids on the host, then on the variable's device (a GPU checks and
  // marks them there).
  for (const bool on_device : {false, true}) {
    CAPTURE(on_device);
    const int64_t first = on_device ? 100 : 0;
    const Tensor ids = Tensor::from_vector<int64_t>({640 + first, 3 + first, 17 + first});
    const Tensor values = Tensor::from_vector<float>(g, {3, 8});
    opt.apply_gradients(
        {GradientAndVariable{on_device ? IndexedSlices(values.to(v.device()), ids.to(v.device()))
                                       : IndexedSlices(values, ids),
                             v}});
    const std::string delta =
        *saver.save(Session(), dir / "m", {.global_step = first + 1, .incremental = true}).path();
    const BundleReader reader(delta);
    for (const std::string key : {"v", "v/Adagrad"}) {
      CAPTURE(key);
      REQUIRE(reader.contains(delta_ids_key(key, std::nullopt)));
      CHECK(reader.read(delta_ids_key(key, std::nullopt)).values<int64_t>() ==
            std::vector<int64_t>{3 + first, 17 + first, 640 + first});
    }
  }
}

TEST_CASE_METHOD(FreshGraph, "every optimizer's chain restores and continues bit-exactly",
                 "[optimizer][saver][incremental]") {
  const std::vector<std::pair<std::string, Factory>> optimizers = {
      {"momentum", [] { return std::make_unique<MomentumOptimizer>(0.1, 0.9); }},
      {"adagrad", [] { return std::make_unique<AdagradOptimizer>(0.1); }},
      {"rowwise-adagrad", [] { return std::make_unique<RowwiseAdagradOptimizer>(0.1); }},
      {"adam", [] { return std::make_unique<AdamOptimizer>(AdamOptions{.learning_rate = 0.01}); }},
      {"lazy-adam",
       [] {
         return std::make_unique<LazyAdamOptimizer>(
             AdamOptions{.learning_rate = 0.01, .name = "LazyAdam"});
       }},
      {"rmsprop",
       [] { return std::make_unique<RMSPropOptimizer>(0.01, RMSPropOptions{.momentum = 0.5}); }},
      {"ftrl",
       [] {
         return std::make_unique<FtrlOptimizer>(0.1,
                                                FtrlOptions{.l1_regularization_strength = 0.01});
       }},
      {"adadelta",
       [] { return std::make_unique<AdadeltaOptimizer>(AdadeltaOptions{.learning_rate = 1.0}); }},
      {"proximal-sgd",
       [] {
         return std::make_unique<ProximalGradientDescentOptimizer>(
             0.1, ProximalGradientDescentOptions{.l1_regularization_strength = 0.01});
       }},
      {"proximal-adagrad",
       [] {
         return std::make_unique<ProximalAdagradOptimizer>(
             0.1, ProximalAdagradOptions{.l1_regularization_strength = 0.01,
                                         .l2_regularization_strength = 0.02});
       }},
  };
  constexpr int kN = 6;  // a base at step 2, deltas at 4 and 6
  constexpr int kM = 3;
  TempDir dir;
  for (const auto& [name, make] : optimizers) {
    for (const bool ids_on_device : {false, true}) {
      CAPTURE(name, ids_on_device);
      const std::string tag = name + (ids_on_device ? "-device-ids" : "");
      const Saved chain = train_and_save(make, kN, dir / (tag + "-chain"), true, ids_on_device);
      const Saved full = train_and_save(make, kN, dir / (tag + "-full"), false, ids_on_device);
      // The last save is a delta holding rows of the embedding and its slots;
      // compat.v1 sparse Adam moves every row, so its deltas would be as
      // large as a base and are bases.
      const BundleReader reader(chain.last);
      const auto links = read_chain_record(reader);
      if (name == "adam") {
        CHECK_FALSE(reader.contains(delta_ids_key("emb", std::nullopt)));
      } else {
        CHECK((links && links->size() == 2));
        // The table and its slots (proximal gradient descent has none).
        CHECK(chain.emb_keys.size() > (name == "proximal-sgd" ? 0u : 1u));
        for (const std::string& key : chain.emb_keys) {
          CAPTURE(key);
          CHECK(reader.contains(delta_ids_key(key, std::nullopt)));
        }
        CHECK(reader.contains(delta_ids_key("table", int64_t{0})));
        CHECK(reader.contains(delta_ids_key("table", int64_t{2048})));
      }
      const auto want = uninterrupted(make, kN + kM, ids_on_device);
      // Ids checked on the device train as ids checked on the host do.
      if (ids_on_device) check_same(want, uninterrupted(make, kN + kM, false));
      check_same(resumed(make, chain.last, kN, kM, ids_on_device), want);
      check_same(resumed(make, full.last, kN, kM, ids_on_device), want);
    }
  }
}
