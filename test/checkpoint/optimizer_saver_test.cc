// Restore and continue, for every optimizer: N steps, a Saver checkpoint,
// a fresh graph with fresh variables (a new process in all but address
// space) restored from it, M more steps — every variable, slot, beta power
// and global_step equals N + M uninterrupted steps bit for bit. The model
// has a dense variable, an embedding updated by IndexedSlices with
// duplicate ids, and a partitioned embedding. Runs on each device.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <memory>

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

// The model's variables, created in the default graph and initialized.
struct Model {
  Variable w, emb, step;
  std::vector<Variable> parts;

  Model()
      : w(Tensor::from_vector<float>({0.5f, -1.f, 2.f, 0.25f, -0.75f, 1.5f}, {2, 3}),
          {.name = "w"}),
        emb(Tensor::from_vector<float>(std::vector<float>(24, 0.125f), {8, 3}), {.name = "emb"}),
        step(Tensor::from_vector<int64_t>({0}, {}), {.trainable = false, .name = "global_step"}) {
    PartitionedVariable table = get_variable("table", {.shape = TensorShape{6, 3},
                                                       .initializer = constant_initializer(0.375f),
                                                       .partitioner = fixed_size_partitioner(2)});
    parts = table.variables();
    Session().run(global_variables_initializer());
  }

  // Step k's gradients: the same for every run.
  void train(Optimizer& opt, int k) {
    const float s = 0.1f * static_cast<float>(k + 1);
    const Tensor dense = Tensor::from_vector<float>({s, -s, 2 * s, 0.5f, -0.25f, s * s}, {2, 3});
    const IndexedSlices rows(
        Tensor::from_vector<float>({s, 1, -1, 2, s, 0.5f, -s, 0.25f, 1}, {3, 3}),
        Tensor({k % 8, 5, k % 8}));
    std::vector<GradientAndVariable> grads = {{dense, w}, {rows, emb}};
    for (Variable& part : parts) {
      grads.push_back(
          {IndexedSlices(Tensor::from_vector<float>({s, s, -s}, {1, 3}), Tensor({k % 3})), part});
    }
    opt.apply_gradients(grads, &step);
  }

  std::vector<Variable> trained() const {
    std::vector<Variable> out = {w, emb};
    out.insert(out.end(), parts.begin(), parts.end());
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

std::map<std::string, std::string> uninterrupted(const Factory& make, int steps) {
  reset_default_graph();
  Model model;
  auto opt = make();
  for (int k = 0; k < steps; ++k) model.train(*opt, k);
  return state();
}

std::map<std::string, std::string> resumed(const Factory& make, int n, int m,
                                           const std::string& prefix) {
  {
    reset_default_graph();
    Model model;
    auto opt = make();
    for (int k = 0; k < n; ++k) model.train(*opt, k);
    Saver saver;
    saver.save(Session(), prefix).wait();
  }
  reset_default_graph();
  Model model;
  auto opt = make();
  opt->create_slots(model.trained());  // as building TensorFlow's train op
  Saver saver;
  saver.restore(Session(), prefix);
  for (int k = n; k < n + m; ++k) model.train(*opt, k);
  return state();
}

}  // namespace

TEST_CASE_METHOD(FreshGraph, "every optimizer restores and continues bit-exactly",
                 "[optimizer][saver]") {
  const std::vector<std::pair<std::string, Factory>> optimizers = {
      {"sgd", [] { return std::make_unique<GradientDescentOptimizer>(0.1); }},
      {"momentum", [] { return std::make_unique<MomentumOptimizer>(0.1, 0.9); }},
      {"nesterov",
       [] {
         return std::make_unique<MomentumOptimizer>(0.1, 0.9,
                                                    MomentumOptions{.use_nesterov = true});
       }},
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
      {"centered-rmsprop",
       [] { return std::make_unique<RMSPropOptimizer>(0.01, RMSPropOptions{.centered = true}); }},
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
  TempDir dir;
  for (const auto& [name, make] : optimizers) {
    CAPTURE(name);
    const auto want = uninterrupted(make, 5);
    const auto got = resumed(make, 3, 2, dir / name);
    CHECK(got.size() == want.size());
    if (name != "sgd" && name != "proximal-sgd") CHECK(got.size() > 5);  // and the slots
    for (const auto& [var, bytes] : want) {
      CAPTURE(var);
      CHECK(got.count(var) == 1);
      CHECK((got.count(var) == 1 && got.at(var) == bytes));
    }
  }
}
