// Moving averages (varstate/moving_averages.h): the averages' names,
// devices, collections and partition slices; each update against a
// float32 / float64 reference written out here op by op; num_updates and
// decay variables; zero debiasing; variables_to_restore; and errors that
// leave the graph and every variable as they were. Runs on each device
// (test_optimizers_on_gpu). The interop suite checks the same against
// TensorFlow bit for bit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "device_fixture.h"
#include "training/training_test_util.h"
#include "varstate/dynamic_variable.h"
#include "varstate/error.h"
#include "varstate/graph.h"
#include "varstate/math_ops.h"
#include "varstate/moving_averages.h"
#include "varstate/partitioners.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

std::vector<std::string> names(const std::vector<Variable>& vars) {
  std::vector<std::string> out;
  for (const Variable& v : vars) out.push_back(v.op_name());
  return out;
}

// One update of the reference, each operation rounded to T as in
// TensorFlow's graph: avg - (avg - value) * factor.
template <typename T>
void reference_update(std::vector<T>& avg, const std::vector<T>& value, T factor) {
  for (size_t i = 0; i < avg.size(); ++i) {
    const T diff = avg[i] - value[i];
    const T delta = diff * factor;
    avg[i] = avg[i] - delta;
  }
}

const std::vector<float> kW = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f, 0.75f};

}  // namespace

TEST_CASE_METHOD(FreshGraph, "averages are named, placed and collected as TensorFlow's",
                 "[moving_average]") {
  Variable w = [] {
    NameScope scope("s");
    return make_var(kW, {2, 3}, "w");
  }();
  Variable b = make_var({0.f, 0.f, 0.f}, {3}, "b");
  ExponentialMovingAverage ema(0.9);
  CHECK(ema.name() == "ExponentialMovingAverage");
  CHECK(ema.average_name(w) == "s/w/ExponentialMovingAverage");
  CHECK_FALSE(ema.average(w).has_value());
  Op op = [&] {
    NameScope train("train");
    return ema.apply({w, b});
  }();
  CHECK(op.name() == "train/ExponentialMovingAverage");
  CHECK(names(global_variables()) == std::vector<std::string>{"s/w", "b",
                                                              "s/w/ExponentialMovingAverage",
                                                              "b/ExponentialMovingAverage"});
  CHECK(names(trainable_variables()) == std::vector<std::string>{"s/w", "b"});
  CHECK(names(moving_average_variables()) == std::vector<std::string>{"s/w", "b"});
  const Variable avg = *ema.average(w);
  CHECK(avg.op_name() == "s/w/ExponentialMovingAverage");
  CHECK(ema.average_name(w) == avg.op_name());
  CHECK(&avg.device() == &w.device());
  CHECK_FALSE(avg.trainable());
  CHECK(names(ema.averages()) ==
        std::vector<std::string>{"s/w/ExponentialMovingAverage", "b/ExponentialMovingAverage"});
  // Applying again reuses the averages; another object makes its own.
  Op again = ema.apply({w});
  CHECK(again.name() == "ExponentialMovingAverage");
  CHECK(global_variables().size() == 4);
  ExponentialMovingAverage other(0.5);
  other.apply({w});
  CHECK(other.average(w)->op_name() == "s/w/ExponentialMovingAverage_1");
  CHECK(names(moving_average_variables()) == std::vector<std::string>{"s/w", "b", "s/w"});
  // Without a list: the trainable variables.
  ExponentialMovingAverage all(0.5, {.name = "All"});
  all.apply();
  CHECK(names(all.averages()) == std::vector<std::string>{"s/w/All", "b/All"});
}

TEST_CASE_METHOD(FreshGraph, "an average starts at its variable's initialized value",
                 "[moving_average]") {
  Variable w(Tensor::from_vector<float>(kW, {2, 3}), {.name = "w"});
  ExponentialMovingAverage ema(0.9);
  Op op = ema.apply({w});
  Variable avg = *ema.average(w);
  CHECK_FALSE(avg.is_initialized());
  // Uninitialized variable or average: nothing runs.
  CHECK_THROWS_WITH(op.run(), Catch::Contains("uninitialized value w"));
  global_variables_initializer().run();
  CHECK(floats(avg) == kW);
  // Initialized later, an average takes the variable's value then.
  w.assign(Tensor::from_vector<float>({1, 1, 1, 1, 1, 1}, {2, 3}));
  Variable x = make_var({5.f, 6.f}, {2}, "x");
  x.assign(Tensor::from_vector<float>({7.f, 8.f}, {2}));
  ExponentialMovingAverage late(0.9);
  late.apply({x});
  CHECK_THROWS_AS(late.apply({x}).run(), FailedPreconditionError);
  variables_initializer(late.averages()).run();
  CHECK(floats(*late.average(x)) == std::vector<float>{7.f, 8.f});
}

TEST_CASE_METHOD(FreshGraph, "each run updates the averages as TensorFlow's graph does",
                 "[moving_average]") {
  Variable w = make_var(kW, {2, 3}, "w");
  Variable d(Tensor::from_vector<double>({0.5, -1.25, 3.0}, {3}), {.name = "d"});
  d.initializer().run();
  Variable step(Tensor::from_vector<int64_t>({0}, {}), {.trainable = false, .name = "step"});
  step.initializer().run();
  ExponentialMovingAverage ema(0.99, {.num_updates = step});
  Op op = ema.apply({w, d});
  variables_initializer(ema.averages()).run();
  std::vector<float> avg_w = kW;
  std::vector<double> avg_d = {0.5, -1.25, 3.0};
  for (int s = 1; s <= 4; ++s) {
    std::vector<float> wv(6);
    std::vector<double> dv(3);
    for (int i = 0; i < 6; ++i) wv[i] = 0.37f * static_cast<float>(i * s) - 1.1f;
    for (int i = 0; i < 3; ++i) dv[i] = 0.3 * (i + 1) / s;
    w.assign(Tensor::from_vector<float>(wv, {2, 3}));
    d.assign(Tensor::from_vector<double>(dv, {3}));
    step.assign(Tensor::from_vector<int64_t>({s * 100 - 100}, {}));
    op.run();
    // The decay in float32: min(0.99, (1 + n) / (10 + n)); 1 - decay in
    // float32, cast to each variable's dtype.
    const float n = static_cast<float>(s * 100 - 100);
    const float decay = std::min(0.99f, (1.0f + n) / (10.0f + n));
    const float factor = 1.0f - decay;
    reference_update(avg_w, wv, factor);
    reference_update(avg_d, dv, static_cast<double>(factor));
    CHECK(floats(*ema.average(w)) == avg_w);
    CHECK(ema.average(d)->value().to_vector<double>() == avg_d);
  }
  // The early decay was used at n = 0 (0.1, not 0.99): the average moved
  // most of the way to the first value.
  CHECK(avg_w[0] != kW[0]);
}

TEST_CASE_METHOD(FreshGraph, "16-bit averages round after each of TensorFlow's three ops",
                 "[moving_average]") {
  // The reference is TensorFlow's graph as varstate's element-wise ops run
  // it: Sub, Mul, AssignSub, each rounded to the dtype.
  for (DType dtype : {DType::kBFloat16, DType::kHalf}) {
    INFO(dtype_name(dtype));
    reset_default_graph();
    std::vector<float> init(257), next(257);
    for (int i = 0; i < 257; ++i) {
      init[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
      next[i] = std::cos(0.11f * static_cast<float>(i)) * 2.0f;
    }
    Variable w(Tensor::from_vector<float>(init, {257}).cast(dtype), {.name = "w"});
    w.initializer().run();
    ExponentialMovingAverage ema(0.9);
    Op op = ema.apply({w});
    variables_initializer(ema.averages()).run();
    Tensor ref = Tensor::from_vector<float>(init, {257}).cast(dtype);
    const Tensor factor = Tensor::from_vector<float>({1.0f - 0.9f}, {}).cast(dtype);
    for (int step = 0; step < 3; ++step) {
      w.assign(Tensor::from_vector<float>(next, {257}).cast(dtype));
      op.run();
      const Tensor value = w.value().to_host();
      ref = subtract(ref, multiply(subtract(ref, value), factor));
      const Tensor got = ema.average(w)->value().to_host();
      CHECK(got.cast(DType::kFloat).to_vector<float>() ==
            ref.cast(DType::kFloat).to_vector<float>());
      for (float& x : next) x = x * 0.5f + 0.25f;
    }
  }
}

TEST_CASE_METHOD(FreshGraph, "a decay variable is read at every run", "[moving_average]") {
  Variable w = make_var({2.f, 4.f}, {2}, "w");
  Variable decay(Tensor::from_vector<float>({0.5f}, {}), {.trainable = false, .name = "decay"});
  decay.initializer().run();
  ExponentialMovingAverage ema(decay);
  Op op = ema.apply({w});
  variables_initializer(ema.averages()).run();
  w.assign(Tensor::from_vector<float>({0.f, 0.f}, {2}));
  op.run();
  CHECK(floats(*ema.average(w)) == std::vector<float>{1.f, 2.f});
  decay.assign(Tensor::from_vector<float>({0.75f}, {}));
  op.run();
  CHECK(floats(*ema.average(w)) == std::vector<float>{0.75f, 1.5f});
  // A decay that is no scalar fails the run before any average changes.
  Variable bad(Tensor::from_vector<float>({0.5f, 0.5f}, {2}), {.name = "bad"});
  bad.initializer().run();
  ExponentialMovingAverage broken(bad);
  Op broken_op = broken.apply({w});
  variables_initializer(broken.averages()).run();
  CHECK_THROWS_WITH(broken_op.run(), Catch::Contains("\"bad\" is not a real scalar"));
  CHECK(floats(*broken.average(w)) == std::vector<float>{0.f, 0.f});
}

TEST_CASE_METHOD(FreshGraph, "the averages of partitions are partitions of the whole average",
                 "[moving_average]") {
  PartitionedVariable emb =
      get_variable("emb", {.shape = TensorShape{10, 3}, .partitioner = fixed_size_partitioner(2)});
  ExponentialMovingAverage ema(0.9);
  ema.apply(emb.variables());
  global_variables_initializer().run();
  const Variable& part1 = emb.variables()[1];
  const Variable avg = *ema.average(part1);
  CHECK(avg.op_name() == "emb/part_1/ExponentialMovingAverage");
  REQUIRE(avg.save_slice_info().has_value());
  CHECK(avg.save_slice_info()->full_name == "emb/ExponentialMovingAverage");
  CHECK(avg.save_slice_info()->full_shape == part1.save_slice_info()->full_shape);
  CHECK(avg.save_slice_info()->var_offset == part1.save_slice_info()->var_offset);
  CHECK(floats(avg) == floats(part1));
}

TEST_CASE_METHOD(FreshGraph, "variables_to_restore maps the averages' names to the variables",
                 "[moving_average]") {
  Variable w = make_var(kW, {2, 3}, "w");
  Variable b = make_var({0.f}, {1}, "b");
  Variable step(Tensor::from_vector<int64_t>({0}, {}), {.trainable = false, .name = "step"});
  ExponentialMovingAverage ema(0.9);
  ema.apply({w});
  const auto map = ema.variables_to_restore();
  std::vector<std::string> keys;
  for (const auto& [name, var] : map) keys.push_back(name + "->" + var.op_name());
  // b is trainable without an average: the name its average would get.
  CHECK(keys == std::vector<std::string>{"b/ExponentialMovingAverage->b", "step->step",
                                         "w/ExponentialMovingAverage->w"});
  const auto only_w = ema.variables_to_restore({w});
  keys.clear();
  for (const auto& [name, var] : only_w) keys.push_back(name + "->" + var.op_name());
  CHECK(keys == std::vector<std::string>{"b->b", "step->step", "w/ExponentialMovingAverage->w"});
}

TEST_CASE_METHOD(FreshGraph, "apply on a variable it cannot average creates nothing",
                 "[moving_average][errors]") {
  Variable w = make_var(kW, {2, 3}, "w");
  Variable i(Tensor::from_vector<int32_t>({1, 2}, {2}), {.name = "i"});
  ExponentialMovingAverage ema(0.9);
  CHECK_THROWS_AS(ema.apply({w, i}), TypeError);
  CHECK_THROWS_WITH(ema.apply({w, i}),
                    Catch::Contains("The variables must be half, float, or double: i:0"));
  CHECK(global_variables().size() == 2);
  CHECK(moving_average_variables().empty());
  CHECK_FALSE(ema.average(w).has_value());
  DynamicVariable table = get_dynamic_variable("table", {.dim = 4});
  CHECK_THROWS_WITH(ema.apply({w, table.variable()}),
                    Catch::Contains("\"table\": a dynamic (hash-keyed) variable"));
  CHECK_FALSE(ema.average(w).has_value());
}

TEST_CASE_METHOD(FreshGraph, "assign_moving_average without and with zero debiasing",
                 "[moving_average]") {
  const std::vector<std::vector<float>> values = {{1.f, -2.f}, {0.5f, 4.f}, {3.f, 0.25f}};
  Variable plain = make_var({0.f, 0.f}, {2}, "plain");
  Variable v = make_var({0.f, 0.f}, {2}, "v");
  // A Python float decay: 1.0 - 0.9 in double, then float32.
  const float factor = static_cast<float>(1.0 - 0.9);
  std::vector<float> ref_plain = {0.f, 0.f};
  std::vector<float> biased = {0.f, 0.f};
  for (size_t s = 0; s < values.size(); ++s) {
    const Tensor value = Tensor::from_vector<float>(values[s], {2});
    assign_moving_average(plain, value, 0.9, false);
    const Tensor out = assign_moving_average(v, value, 0.9);
    reference_update(ref_plain, values[s], factor);
    reference_update(biased, values[s], factor);
    CHECK(floats(plain) == ref_plain);
    const float bias_factor = 1.0f - std::pow(1.0f - factor, static_cast<float>(s + 1));
    for (int i = 0; i < 2; ++i) {
      CHECK(floats(v)[i] == Approx(biased[i] / bias_factor).epsilon(1e-6));
    }
    CHECK(out.to_host().to_vector<float>() == floats(v));
  }
  // The debiased average of a constant series is the constant at once.
  Variable c = make_var({0.f}, {1}, "c");
  assign_moving_average(c, Tensor::from_vector<float>({2.5f}, {1}), 0.99);
  CHECK(floats(c)[0] == Approx(2.5f).epsilon(1e-6));
  CHECK(names(global_variables()) == std::vector<std::string>{"plain", "v", "v/biased",
                                                              "v/local_step", "c", "c/biased",
                                                              "c/local_step"});
  auto by_name = [](const std::string& name) {
    for (const Variable& x : global_variables()) {
      if (x.op_name() == name) return x;
    }
    FAIL("no variable " << name);
    throw;
  };
  CHECK(floats(by_name("v/biased")) == biased);
  CHECK(floats(by_name("v/local_step")) == std::vector<float>{3.f});
  CHECK(&by_name("v/biased").device() == &v.device());
  CHECK_FALSE(by_name("v/biased").trainable());
}

TEST_CASE_METHOD(FreshGraph, "assign_moving_average's errors change nothing",
                 "[moving_average][errors]") {
  Variable v = make_var({1.f, 2.f}, {2}, "v");
  const std::vector<float> before = floats(v);
  CHECK_THROWS_AS(assign_moving_average(v, Tensor::from_vector<float>({1, 2, 3}, {3}), 0.9),
                  ValueError);
  CHECK_THROWS_AS(assign_moving_average(v, Tensor::from_vector<double>({1, 2}, {2}), 0.9),
                  TypeError);
  Variable i(Tensor::from_vector<int32_t>({1, 2}, {2}), {.name = "i"});
  i.initializer().run();
  CHECK_THROWS_WITH(assign_moving_average(i, Tensor::from_vector<int32_t>({1, 2}, {2}), 0.9),
                    Catch::Contains("The variables must be half, float, or double: i:0"));
  Variable u(Tensor::from_vector<float>({1.f, 2.f}, {2}), {.name = "u"});
  CHECK_THROWS_WITH(assign_moving_average(u, Tensor::from_vector<float>({1, 2}, {2}), 0.9),
                    Catch::Contains("uninitialized value u"));
  CHECK(floats(v) == before);
  CHECK(names(global_variables()) == std::vector<std::string>{"v", "i", "u"});
  // A "v/biased" of another shape is reported, not reused or replaced.
  Variable wrong = make_var({0.f, 0.f, 0.f}, {3}, "w");
  make_var({0.f}, {1}, "w/biased");
  CHECK_THROWS_WITH(assign_moving_average(wrong, Tensor::from_vector<float>({1, 2, 3}, {3}), 0.9),
                    Catch::Contains("\"w/biased\" is float32 [1], expected float32 [3]"));
  CHECK(floats(wrong) == std::vector<float>{0.f, 0.f, 0.f});
}

TEST_CASE_METHOD(FreshGraph, "apply and its Op from several threads", "[moving_average][stress]") {
  constexpr int kThreads = 4;
  constexpr int kVars = 8;
  std::vector<Variable> vars;
  for (int k = 0; k < kThreads * kVars; ++k) {
    vars.push_back(make_var({static_cast<float>(k)}, {1}, "v" + std::to_string(k)));
  }
  ExponentialMovingAverage ema(0.5);
  std::vector<std::thread> threads;
  std::vector<Op> ops(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      DeviceScope device(test_device_name());
      std::vector<Variable> mine(vars.begin() + t * kVars, vars.begin() + (t + 1) * kVars);
      // Every thread also asks for the first variable: one average for it.
      mine.push_back(vars[0]);
      ops[t] = ema.apply(mine);
    });
  }
  for (std::thread& th : threads) th.join();
  CHECK(ema.averages().size() == kThreads * kVars);
  variables_initializer(ema.averages()).run();
  for (Variable& v : vars) v.assign(Tensor::from_vector<float>({0.f}, {1}));
  for (const Op& op : ops) op.run();
  // vars[0] was averaged once per Op, the others once.
  CHECK(floats(*ema.average(vars[0])) == std::vector<float>{0.f});
  for (int k = 1; k < kThreads * kVars; ++k) {
    CHECK(floats(*ema.average(vars[k])) == std::vector<float>{static_cast<float>(k) * 0.5f});
  }
}
