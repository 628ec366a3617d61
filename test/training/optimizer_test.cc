// The optimizers (varstate/optimizers.h): TensorFlow's slot names, devices,
// collections and partition slices; each optimizer's steps equal the
// training ops applied by hand; global_step; learning rates in variables;
// and errors that leave every variable, slot and global_step unchanged.
// Runs on each device (test_optimizers_on_gpu).
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "device_fixture.h"
#include "training/training_test_util.h"
#include "varstate/error.h"
#include "varstate/graph.h"
#include "varstate/optimizers.h"
#include "varstate/partitioners.h"
#include "varstate/training_ops.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

Variable make_step() {
  Variable step(Tensor::from_vector<int64_t>({0}, {}), {.trainable = false, .name = "global_step"});
  step.initializer().run();
  return step;
}

std::vector<std::string> names(const std::vector<Variable>& vars) {
  std::vector<std::string> out;
  for (const Variable& v : vars) out.push_back(v.op_name());
  return out;
}

const std::vector<float> kW = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f, 0.75f};
const std::vector<float> kG = {0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f};

}  // namespace

TEST_CASE_METHOD(FreshGraph, "Adam's slots and beta powers are named and kept as TensorFlow's",
                 "[optimizer]") {
  Variable w = [] {
    NameScope scope("s");
    return make_var(kW, {2, 3}, "w");
  }();
  Variable b = make_var({0.f, 0.f, 0.f}, {3}, "b");
  Variable step = make_step();
  AdamOptimizer adam({.learning_rate = 0.1});
  CHECK(adam.get_slot_names().empty());
  {
    NameScope train("train");
    adam.apply_gradients({{Tensor::from_vector<float>(kG, {2, 3}), w},
                          {Tensor::from_vector<float>({1, 1, 1}, {3}), b}},
                         &step);
  }
  // tf.compat.v1 in the same graph: the TF venv gives exactly these names.
  CHECK(names(global_variables()) == std::vector<std::string>{"s/w", "b", "global_step",
                                                              "train/beta1_power",
                                                              "train/beta2_power", "s/w/Adam",
                                                              "s/w/Adam_1", "b/Adam", "b/Adam_1"});
  CHECK(names(trainable_variables()) == std::vector<std::string>{"s/w", "b"});
  CHECK(adam.get_slot_names() == std::vector<std::string>{"m", "v"});
  CHECK(adam.get_slot(w, "m")->op_name() == "s/w/Adam");
  CHECK(adam.get_slot(w, "v")->op_name() == "s/w/Adam_1");
  CHECK_FALSE(adam.get_slot(w, "accumulator").has_value());
  CHECK(&adam.get_slot(w, "m")->device() == &w.device());
  CHECK(names(adam.variables()) == std::vector<std::string>{"b/Adam", "b/Adam_1", "s/w/Adam",
                                                            "s/w/Adam_1", "train/beta1_power",
                                                            "train/beta2_power"});
  CHECK(step.value().to_vector<int64_t>() == std::vector<int64_t>{1});
}

TEST_CASE_METHOD(FreshGraph, "slot names of RMSProp, Ftrl, Momentum and Adagrad", "[optimizer]") {
  Variable w = make_var(kW, {2, 3}, "w");
  const Tensor g = Tensor::from_vector<float>(kG, {2, 3});
  RMSPropOptimizer centered(0.1, {.centered = true});
  centered.apply_gradients({{g, w}});
  CHECK(centered.get_slot(w, "rms")->op_name() == "w/RMSProp");
  CHECK(centered.get_slot(w, "mg")->op_name() == "w/RMSProp_1");
  CHECK(centered.get_slot(w, "momentum")->op_name() == "w/RMSProp_2");
  FtrlOptimizer ftrl(0.1);
  ftrl.apply_gradients({{g, w}});
  CHECK(ftrl.get_slot(w, "accum")->op_name() == "w/Ftrl");
  CHECK(ftrl.get_slot(w, "linear")->op_name() == "w/Ftrl_1");
  MomentumOptimizer momentum(0.1, 0.9);
  momentum.apply_gradients({{g, w}});
  CHECK(momentum.get_slot(w, "momentum")->op_name() == "w/Momentum");
  AdagradOptimizer adagrad(0.1);
  adagrad.create_slots({w});
  CHECK(adagrad.get_slot(w, "accumulator")->op_name() == "w/Adagrad");
  CHECK(adagrad.get_slot(w, "accumulator")->value().to_vector<float>() ==
        std::vector<float>(6, 0.1f));
  RowwiseAdagradOptimizer rowwise(0.1);
  rowwise.create_slots({w});
  CHECK(rowwise.get_slot(w, "accumulator")->shape() == TensorShape({2}));
  CHECK(rowwise.get_slot(w, "accumulator")->op_name() == "w/RowwiseAdagrad");
  AdadeltaOptimizer adadelta;
  adadelta.create_slots({w});
  CHECK(adadelta.get_slot(w, "accum")->op_name() == "w/Adadelta");
  CHECK(adadelta.get_slot(w, "accum_update")->op_name() == "w/Adadelta_1");
  CHECK(adadelta.get_slot_names() == std::vector<std::string>{"accum", "accum_update"});
  ProximalAdagradOptimizer proximal(0.1, {.initial_accumulator_value = 0.5});
  proximal.create_slots({w});
  CHECK(proximal.get_slot(w, "accumulator")->op_name() == "w/ProximalAdagrad");
  CHECK(proximal.get_slot(w, "accumulator")->value().to_vector<float>() ==
        std::vector<float>(6, 0.5f));
  ProximalGradientDescentOptimizer proximal_sgd(0.1);
  proximal_sgd.create_slots({w});
  CHECK(proximal_sgd.get_slot_names().empty());
}

TEST_CASE_METHOD(FreshGraph,
                 "Adadelta and the proximal optimizers: steps equal their training ops; bad "
                 "hyperparameters create and change nothing",
                 "[optimizer]") {
  const Tensor g = Tensor::from_vector<float>(kG, {2, 3});
  const IndexedSlices sparse(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}),
                             Tensor({1, 1}));
  // Rows {1, 1} summed first (from zero), as the optimizers do.
  const IndexedSlices summed(
      Tensor::from_vector<float>({0.f + 1.f + 4.f, 0.f + 2.f + 5.f, 0.f + 3.f + 6.f}, {1, 3}),
      Tensor({1}));
  Variable w = make_var(kW, {2, 3}, "w");
  Variable hw = make_var(kW, {2, 3}, "hw");
  Variable a = make_var(std::vector<float>(6, 0), {2, 3}, "a");
  Variable b = make_var(std::vector<float>(6, 0), {2, 3}, "b");
  SECTION("adadelta") {
    AdadeltaOptimizer opt({.learning_rate = 1.0, .rho = 0.9, .epsilon = 1e-6});
    for (int i = 0; i < 2; ++i) {
      opt.apply_gradients({{g, w}});
      apply_adadelta(hw, a, b, 1.0f, 0.9f, 1e-6f, g);
      opt.apply_gradients({{sparse, w}});
      sparse_apply_adadelta(hw, a, b, 1.0f, 0.9f, 1e-6f, summed);
    }
    CHECK(floats(*opt.get_slot(w, "accum_update")) == floats(b));
  }
  SECTION("proximal gradient descent") {
    ProximalGradientDescentOptimizer opt(
        0.1, {.l1_regularization_strength = 0.05, .l2_regularization_strength = 0.5});
    for (int i = 0; i < 2; ++i) {
      opt.apply_gradients({{g, w}});
      apply_proximal_gradient_descent(hw, 0.1f, 0.05f, 0.5f, g);
      opt.apply_gradients({{sparse, w}});
      sparse_apply_proximal_gradient_descent(hw, 0.1f, 0.05f, 0.5f, summed);
    }
  }
  SECTION("proximal adagrad") {
    Variable acc = make_var(std::vector<float>(6, 0.1f), {2, 3}, "acc");
    ProximalAdagradOptimizer opt(
        0.1, {.l1_regularization_strength = 0.05, .l2_regularization_strength = 0.5});
    for (int i = 0; i < 2; ++i) {
      opt.apply_gradients({{g, w}});
      apply_proximal_adagrad(hw, acc, 0.1f, 0.05f, 0.5f, g);
      opt.apply_gradients({{sparse, w}});
      sparse_apply_proximal_adagrad(hw, acc, 0.1f, 0.05f, 0.5f, summed);
    }
    CHECK(floats(*opt.get_slot(w, "accumulator")) == floats(acc));
  }
  CHECK(floats(w) == floats(hw));
  CHECK(floats(w) != kW);
}

TEST_CASE_METHOD(FreshGraph,
                 "AdagradDA: TensorFlow's slots; each step is for global_step + 1; a global_step "
                 "that is not an integer scalar creates and changes nothing",
                 "[optimizer]") {
  const Tensor g = Tensor::from_vector<float>(kG, {2, 3});
  const IndexedSlices sparse(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}),
                             Tensor({1, 1}));
  const IndexedSlices summed(
      Tensor::from_vector<float>({0.f + 1.f + 4.f, 0.f + 2.f + 5.f, 0.f + 3.f + 6.f}, {1, 3}),
      Tensor({1}));
  Variable step = make_step();
  Variable w = make_var(kW, {2, 3}, "w");
  Variable hw = make_var(kW, {2, 3}, "hw");
  Variable ga = make_var(std::vector<float>(6, 0), {2, 3}, "ga");
  Variable gga = make_var(std::vector<float>(6, 0.1f), {2, 3}, "gga");
  AdagradDAOptimizer opt(0.1, step,
                         {.l1_regularization_strength = 0.01, .l2_regularization_strength = 0.02});
  CHECK_THROWS_AS(AdagradDAOptimizer(0.1, step, {.initial_gradient_squared_accumulator_value = 0}),
                  ValueError);
  for (int64_t i = 1; i <= 2; ++i) {
    opt.apply_gradients({{g, w}}, &step);
    apply_adagrad_da(hw, ga, gga, g, 0.1f, 0.01f, 0.02f, Tensor(2 * i - 1));
    opt.apply_gradients({{sparse, w}}, &step);
    sparse_apply_adagrad_da(hw, ga, gga, summed, 0.1f, 0.01f, 0.02f, Tensor(2 * i));
  }
  CHECK(floats(w) == floats(hw));
  CHECK(floats(w) != kW);
  CHECK(opt.get_slot(w, "gradient_accumulator")->op_name() == "w/AdagradDA");
  CHECK(opt.get_slot(w, "gradient_squared_accumulator")->op_name() == "w/AdagradDA_1");
  CHECK(floats(*opt.get_slot(w, "gradient_squared_accumulator")) == floats(gga));

  Variable float_step = make_var({0.f}, {}, "float_step");
  Variable v = make_var(kW, {2, 3}, "v");
  AdagradDAOptimizer bad(0.1, float_step);
  CHECK_THROWS_AS(bad.apply_gradients({{g, v}}), InvalidArgumentError);
  CHECK_FALSE(bad.get_slot(v, "gradient_accumulator").has_value());
  CHECK(floats(v) == kW);
}

TEST_CASE_METHOD(FreshGraph, "proximal Adagrad's hyperparameters are checked before anything",
                 "[optimizer][errors]") {
  CHECK_THROWS_AS(ProximalAdagradOptimizer(0.1, {.initial_accumulator_value = 0}), ValueError);
  Variable w = make_var(kW, {2, 3}, "w");
  const Tensor g = Tensor::from_vector<float>(kG, {2, 3});
  for (const auto& [lr, l1, l2] :
       {std::tuple{0.0, 0.0, 0.0}, {0.1, -0.01, 0.0}, {0.1, 0.0, -0.01}}) {
    CAPTURE(lr, l1, l2);
    ProximalAdagradOptimizer opt(
        lr, {.l1_regularization_strength = l1, .l2_regularization_strength = l2});
    CHECK_THROWS_AS(opt.apply_gradients({{g, w}}), InvalidArgumentError);
    CHECK_FALSE(opt.get_slot(w, "accumulator").has_value());  // nothing created
    CHECK(floats(w) == kW);
  }
}

TEST_CASE_METHOD(FreshGraph, "each optimizer's steps equal its training op applied by hand",
                 "[optimizer]") {
  const Tensor g = Tensor::from_vector<float>(kG, {2, 3});
  const IndexedSlices sparse(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}),
                             Tensor({1, 1}));
  Variable w = make_var(kW, {2, 3}, "w");
  Variable e = make_var(kW, {2, 3}, "e");
  Variable step = make_step();
  Variable hw = make_var(kW, {2, 3}, "hw");
  Variable he = make_var(kW, {2, 3}, "he");
  Variable m1 = make_var(std::vector<float>(6, 0), {2, 3}, "m1");
  Variable v1 = make_var(std::vector<float>(6, 0), {2, 3}, "v1");
  Variable m2 = make_var(std::vector<float>(6, 0), {2, 3}, "m2");
  Variable v2 = make_var(std::vector<float>(6, 0), {2, 3}, "v2");
  AdamOptimizer adam({.learning_rate = 0.01});
  float b1p = 0.9f, b2p = 0.999f;
  for (int i = 0; i < 3; ++i) {
    adam.apply_gradients({{g, w}, {sparse, e}}, &step);
    apply_adam(hw, m1, v1, b1p, b2p, 0.01f, 0.9f, 0.999f, 1e-8f, g);
    sparse_apply_adam(he, m2, v2, b1p, b2p, 0.01f, 0.9f, 0.999f, 1e-8f, sparse);
    b1p = b1p * 0.9f;
    b2p = b2p * 0.999f;
  }
  CHECK(floats(w) == floats(hw));
  CHECK(floats(e) == floats(he));
  CHECK(floats(*adam.get_slot(e, "v")) == floats(v2));
  CHECK(step.value().to_vector<int64_t>() == std::vector<int64_t>{3});
  for (const Variable& power : adam.variables()) {
    if (power.op_name() == "beta1_power") CHECK(power.value().scalar<float>() == b1p);
    if (power.op_name() == "beta2_power") CHECK(power.value().scalar<float>() == b2p);
  }

  Variable lr = make_var({0.5f}, {}, "lr");
  Variable s = make_var(kW, {2, 3}, "s");
  GradientDescentOptimizer sgd(lr);
  sgd.apply_gradients({{g, s}});
  lr.assign(Tensor(0.25f));
  sgd.apply_gradients({{sparse, s}});
  std::vector<float> want = kW;
  for (size_t i = 0; i < 6; ++i) want[i] = want[i] - kG[i] * 0.5f;
  for (int c = 0; c < 3; ++c) want[3 + c] = (want[3 + c] - (1.f + c) * 0.25f) - (4.f + c) * 0.25f;
  CHECK(floats(s) == want);
}

TEST_CASE_METHOD(FreshGraph,
                 "numbers given as hyperparameters are float32, as TensorFlow's Python floats",
                 "[optimizer]") {
  // TensorFlow's optimizers turn a Python float into a float32 tensor and
  // cast it to the variable's dtype: a float64 variable trains with
  // double(float(0.1)). A float64 Variable as the learning rate is used
  // as it is. Adam's beta powers are float32 whatever the variables are.
  const std::vector<double> init = {1.0, -2.0, 0.5};
  const std::vector<double> grad = {0.3, -0.7, 0.11};
  const Tensor g = Tensor::from_vector<double>(grad, {3});
  auto make64 = [&](const std::string& name) {
    Variable v(Tensor::from_vector<double>(init, {3}), {.name = name});
    v.initializer().run();
    return v;
  };
  Variable d = make64("d");
  GradientDescentOptimizer(0.1).apply_gradients({{g, d}});
  Variable rate(Tensor::from_vector<double>({0.1}, {}), {.trainable = false, .name = "rate"});
  rate.initializer().run();
  Variable e = make64("e");
  GradientDescentOptimizer(rate).apply_gradients({{g, e}});
  const double lr32 = static_cast<float>(0.1);
  for (int i = 0; i < 3; ++i) {
    CHECK(d.value().to_vector<double>()[i] == init[i] - grad[i] * lr32);
    CHECK(e.value().to_vector<double>()[i] == init[i] - grad[i] * 0.1);
  }
  REQUIRE(lr32 != 0.1);
  Variable a = make64("a");
  AdamOptimizer adam({.learning_rate = 0.01});
  adam.apply_gradients({{g, a}});
  for (const Variable& v : adam.variables()) {
    if (v.op_name().find("_power") != std::string::npos) {
      CHECK(v.dtype() == DType::kFloat);
    } else {
      CHECK(v.dtype() == DType::kDouble);
    }
  }
  Variable ha = make64("ha");
  Variable m(Tensor::from_vector<double>({0, 0, 0}, {3}), {.name = "m"});
  Variable v(Tensor::from_vector<double>({0, 0, 0}, {3}), {.name = "v"});
  m.initializer().run();
  v.initializer().run();
  auto f = [](double x) { return Tensor(static_cast<double>(static_cast<float>(x))); };
  apply_adam(ha, m, v, f(0.9), f(0.999), f(0.01), f(0.9), f(0.999), f(1e-8), g);
  CHECK(a.value().to_vector<double>() == ha.value().to_vector<double>());
}

TEST_CASE_METHOD(FreshGraph, "Adam reads beta powers changed outside its steps", "[optimizer]") {
  // Adam keeps the powers it wrote on the host (a GPU step then waits for
  // nothing); an assign or a restore in between must still be seen.
  const Tensor g = Tensor::from_vector<float>(kG, {2, 3});
  Variable w = make_var(kW, {2, 3}, "w");
  Variable hw = make_var(kW, {2, 3}, "hw");
  Variable m = make_var(std::vector<float>(6, 0), {2, 3}, "m");
  Variable v = make_var(std::vector<float>(6, 0), {2, 3}, "v");
  AdamOptimizer adam({.learning_rate = 0.01});
  adam.apply_gradients({{g, w}});
  apply_adam(hw, m, v, 0.9f, 0.999f, 0.01f, 0.9f, 0.999f, 1e-8f, g);
  Variable* beta1_power = nullptr;
  std::vector<Variable> vars = adam.variables();
  for (Variable& power : vars) {
    if (power.op_name() == "beta1_power") beta1_power = &power;
  }
  REQUIRE(beta1_power != nullptr);
  beta1_power->assign(Tensor(0.5f));
  adam.apply_gradients({{g, w}});
  apply_adam(hw, m, v, 0.5f, 0.999f * 0.999f, 0.01f, 0.9f, 0.999f, 1e-8f, g);
  CHECK(floats(w) == floats(hw));
  CHECK(beta1_power->value().scalar<float>() == 0.5f * 0.9f);
  // And after a step the host copy is the device's product, bit for bit.
  adam.apply_gradients({{g, w}});
  apply_adam(hw, m, v, 0.5f * 0.9f, 0.999f * 0.999f * 0.999f, 0.01f, 0.9f, 0.999f, 1e-8f, g);
  CHECK(floats(w) == floats(hw));
  // In a new graph the optimizer makes new powers, which start over.
  reset_default_graph();
  Variable w2 = make_var(kW, {2, 3}, "w");
  Variable hw2 = make_var(kW, {2, 3}, "hw");
  Variable m2 = make_var(std::vector<float>(6, 0), {2, 3}, "m");
  Variable v2 = make_var(std::vector<float>(6, 0), {2, 3}, "v");
  adam.apply_gradients({{g, w2}});
  apply_adam(hw2, m2, v2, 0.9f, 0.999f, 0.01f, 0.9f, 0.999f, 1e-8f, g);
  CHECK(floats(w2) == floats(hw2));
}

TEST_CASE_METHOD(FreshGraph, "slots of a partitioned variable are partitions of the whole slot",
                 "[optimizer]") {
  PartitionedVariable emb =
      get_variable("emb", {.shape = TensorShape{10, 3}, .partitioner = fixed_size_partitioner(2)});
  for (const Variable& part : emb.variables()) Variable(part).initializer().run();
  AdagradOptimizer adagrad(0.1);
  RowwiseAdagradOptimizer rowwise(0.1);
  std::vector<GradientAndVariable> grads;
  for (const Variable& part : emb.variables()) {
    grads.push_back(
        {IndexedSlices(Tensor::from_vector<float>({1, 2, 3}, {1, 3}), Tensor({1})), part});
  }
  adagrad.apply_gradients(grads);
  rowwise.apply_gradients(grads);
  const Variable& part1 = emb.variables()[1];
  const Variable slot = *adagrad.get_slot(part1, "accumulator");
  CHECK(slot.op_name() == "emb/part_1/Adagrad");
  REQUIRE(slot.save_slice_info().has_value());
  CHECK(slot.save_slice_info()->full_name == "emb/Adagrad");
  CHECK(slot.save_slice_info()->full_shape == part1.save_slice_info()->full_shape);
  CHECK(slot.save_slice_info()->var_offset == part1.save_slice_info()->var_offset);
  const Variable row_slot = *rowwise.get_slot(part1, "accumulator");
  CHECK(row_slot.save_slice_info()->full_name == "emb/RowwiseAdagrad");
  CHECK(row_slot.save_slice_info()->full_shape == std::vector<int64_t>{10});
  CHECK(row_slot.save_slice_info()->var_offset == std::vector<int64_t>{5});
}

TEST_CASE_METHOD(FreshGraph, "a failing apply_gradients changes no variable, slot or global_step",
                 "[optimizer][errors]") {
  Variable w = make_var(kW, {2, 3}, "w");
  Variable e = make_var(kW, {2, 3}, "e");
  Variable step = make_step();
  AdamOptimizer adam({.learning_rate = 0.01});
  const Tensor g = Tensor::from_vector<float>(kG, {2, 3});
  adam.apply_gradients({{g, w}, {g, e}}, &step);
  auto state = [&] {
    std::vector<std::vector<float>> out = {floats(w), floats(e)};
    for (const Variable& v : adam.variables()) out.push_back(floats(v));
    out.push_back({static_cast<float>(step.value().to_vector<int64_t>()[0])});
    return out;
  };
  const auto before = state();
  const IndexedSlices out_of_range(Tensor::from_vector<float>({1, 2, 3}, {1, 3}), Tensor({2}));
  CHECK_THROWS_AS(adam.apply_gradients({{g, w}, {out_of_range, e}}, &step), InvalidArgumentError);
  CHECK_THROWS_WITH(adam.apply_gradients({{g, w}, {out_of_range, e}}, &step),
                    Catch::Contains("Adam on \"e\": indices[0] = 2 is not in [0, 2)"));
  CHECK_THROWS_AS(adam.apply_gradients({{g, w}, {Tensor::zeros(DType::kFloat, {3}), e}}, &step),
                  InvalidArgumentError);
  CHECK_THROWS_AS(adam.apply_gradients({{g, w}, {g, w}}, &step), ValueError);
  CHECK_THROWS_AS(adam.apply_gradients({{Tensor(), w}}, &step), ValueError);
  CHECK_THROWS_AS(adam.apply_gradients({}, &step), ValueError);
  Variable float_step = make_var({0.f}, {}, "float_step");
  CHECK_THROWS_AS(adam.apply_gradients({{g, w}}, &float_step), TypeError);
  Variable bad_lr = make_var({0.1f, 0.2f}, {2}, "bad_lr");
  GradientDescentOptimizer sgd(bad_lr);
  CHECK_THROWS_AS(sgd.apply_gradients({{g, w}}, &step), InvalidArgumentError);
  CHECK(state() == before);
  CHECK_THROWS_AS(FtrlOptimizer(0.1, {.learning_rate_power = 0.5}), ValueError);
}

TEST_CASE_METHOD(FreshGraph,
                 "apply_gradients with indices on a GPU: a bad one fails its variable alone, "
                 "raised by that variable",
                 "[optimizer][errors]") {
  // Host indices are checked before anything changes (above); indices on
  // the variables' GPU are checked there, as a GPU scatter's are.
  Variable w = make_var(kW, {2, 3}, "w");
  Variable e = make_var(kW, {2, 3}, "e");
  AdagradOptimizer adagrad(0.1);
  adagrad.create_slots({w, e});
  Device& dev = test_device();
  const IndexedSlices good(Tensor::from_vector<float>({1, 2, 3}, {1, 3}).to(dev),
                           Tensor::from_vector<int64_t>({1}).to(dev));
  const IndexedSlices bad(Tensor::from_vector<float>({1, 2, 3}, {1, 3}).to(dev),
                          Tensor::from_vector<int64_t>({2}).to(dev));
  const std::vector<float> w_before = floats(w), e_before = floats(e);
  const std::vector<float> e_slot = floats(*adagrad.get_slot(e, "accumulator"));
  const std::string message = "Adagrad on \"e\": indices[0] = 2 is not in [0, 2)";
  if (dev.is_cpu()) {
    CHECK_THROWS_WITH(adagrad.apply_gradients({{good, w}, {bad, e}}), Catch::Equals(message));
    CHECK(floats(w) == w_before);
  } else {
    adagrad.apply_gradients({{good, w}, {bad, e}});
    // Named by the training op that found it.
    CHECK_THROWS_WITH(e.sync(), Catch::StartsWith("SparseApply" + message) &&
                                    Catch::Contains("nothing was written"));
    CHECK(floats(w) != w_before);  // the other variable was applied
  }
  CHECK(floats(e) == e_before);
  CHECK(floats(*adagrad.get_slot(e, "accumulator")) == e_slot);
}

namespace {

// What apply_gradients may not change when it throws: the graph's variables
// and its collections' sizes.
struct GraphState {
  std::vector<std::string> variables;
  std::map<std::string, size_t> collections;
  bool operator==(const GraphState&) const = default;
};

GraphState graph_state(const Graph& g) {
  GraphState s;
  for (const Variable& v : g.variables()) s.variables.push_back(v.op_name());
  for (const std::string& key : g.collection_keys()) s.collections[key] = g.collection_size(key);
  return s;
}

}  // namespace

TEST_CASE_METHOD(FreshGraph, "apply_gradients on a dtype it cannot train creates nothing",
                 "[optimizer][errors]") {
  Variable ints(Tensor::from_vector<int32_t>({1, 2, 3}, {3}), {.name = "ints"});
  Variable cplx(Tensor::from_vector<complex64>({{1, 1}, {2, 2}}, {2}), {.name = "cplx"});
  ints.initializer().run();
  cplx.initializer().run();
  Variable w = make_var(kW, {2, 3}, "w");
  Variable step = make_step();
  const Tensor g = Tensor::from_vector<float>(kG, {2, 3});
  const Tensor int_grad = Tensor::from_vector<int32_t>({1, 1, 1}, {3});
  const Tensor complex_grad = Tensor::from_vector<complex64>({{1, 0}, {1, 0}}, {2});
  std::vector<std::function<std::unique_ptr<Optimizer>()>> makers = {
      [] { return std::make_unique<AdamOptimizer>(AdamOptions{.learning_rate = 0.1}); },
      [] { return std::make_unique<AdagradOptimizer>(0.1); },
      [] { return std::make_unique<MomentumOptimizer>(0.1, 0.9); },
      [] { return std::make_unique<GradientDescentOptimizer>(0.1); }};
  for (const auto& make : makers) {
    const std::unique_ptr<Optimizer> opt = make();
    CAPTURE(opt->get_name());
    const GraphState before = graph_state(get_default_graph());
    // The bad variable sorts first: Adam would make its beta powers of its
    // dtype.
    CHECK_THROWS_AS(opt->apply_gradients({{int_grad, ints}, {g, w}}, &step), ValueError);
    CHECK_THROWS_WITH(opt->apply_gradients({{int_grad, ints}, {g, w}}, &step),
                      opt->get_name() +
                          ": invalid type int32 for variable \"ints\", expected: "
                          "[float16, bfloat16, float32, float64]");
    CHECK_THROWS_AS(opt->apply_gradients({{complex_grad, cplx}, {g, w}}, &step), ValueError);
    CHECK_THROWS_AS(opt->create_slots({cplx, w}), ValueError);
    CHECK(graph_state(get_default_graph()) == before);
    CHECK(opt->variables().empty());
    CHECK(step.value().to_vector<int64_t>() == std::vector<int64_t>{0});
    // A valid call afterwards makes float32 state.
    opt->apply_gradients({{g, w}});
    for (const Variable& v : opt->variables()) CHECK(v.dtype() == DType::kFloat);
  }
}

TEST_CASE_METHOD(FreshGraph, "a failing first apply_gradients leaves the graph as it was",
                 "[optimizer][errors]") {
  Variable w = make_var(kW, {2, 3}, "w");
  Variable s = make_var({1.f}, {}, "s");
  Variable step = make_step();
  const Tensor g = Tensor::from_vector<float>(kG, {2, 3});
  // A learning rate that is not a scalar: found before the slots exist.
  Variable bad_lr = make_var({0.1f, 0.2f}, {2}, "bad_lr");
  const GraphState before = graph_state(get_default_graph());
  AdamOptimizer adam({.learning_rate = bad_lr});
  CHECK_THROWS_AS(adam.apply_gradients({{g, w}}, &step), InvalidArgumentError);
  CHECK(graph_state(get_default_graph()) == before);
  // Row-wise Adagrad on a scalar, after a variable it could train.
  RowwiseAdagradOptimizer rowwise(0.1);
  CHECK_THROWS_AS(rowwise.apply_gradients({{g, w}, {Tensor(1.f), s}}), InvalidArgumentError);
  CHECK_THROWS_AS(rowwise.create_slots({w, s}), InvalidArgumentError);
  CHECK(graph_state(get_default_graph()) == before);
  CHECK(rowwise.variables().empty());
}

TEST_CASE_METHOD(FreshGraph, "apply_gradients refuses a variable of another graph",
                 "[optimizer][errors]") {
  Graph other;
  Variable x = [&] {
    auto guard = other.as_default();
    return make_var(kW, {2, 3}, "x");
  }();
  Variable step = make_step();
  const Tensor g = Tensor::from_vector<float>(kG, {2, 3});
  const GraphState mine = graph_state(get_default_graph());
  const GraphState theirs = graph_state(other);
  AdamOptimizer adam({.learning_rate = 0.1});
  CHECK_THROWS_AS(adam.apply_gradients({{g, x}}, &step), ValueError);
  CHECK_THROWS_WITH(adam.apply_gradients({{g, x}}, &step),
                    Catch::Contains("Adam: variable \"x\" must be from the same graph"));
  CHECK(graph_state(get_default_graph()) == mine);
  CHECK(graph_state(other) == theirs);
  CHECK(x.value().to_vector<float>() == kW);
  // A global_step of another graph likewise; with its graph the default,
  // the variable trains there.
  Variable other_step = [&] {
    auto guard = other.as_default();
    return make_step();
  }();
  Variable w = make_var(kW, {2, 3}, "w");
  CHECK_THROWS_AS(adam.apply_gradients({{g, w}}, &other_step), ValueError);
  CHECK_THROWS_WITH(adam.apply_gradients({{g, w}}, &other_step),
                    Catch::Contains("global_step \"global_step\" must be from the same graph"));
  {
    auto guard = other.as_default();
    adam.apply_gradients({{g, x}}, &other_step);
  }
  CHECK(&adam.get_slot(x, "m")->graph() == &other);
  CHECK(other_step.value().to_vector<int64_t>() == std::vector<int64_t>{1});
}
