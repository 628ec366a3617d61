// Learning rate decay (varstate/learning_rate_decay.h): each schedule
// against float32 / float64 values written out here from its formula;
// optimizers reading a schedule at every apply; errors. The interop suite
// (test/interop/test_lr_schedules.py) checks every schedule against
// TensorFlow bit for bit over 2,500 steps.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "device_fixture.h"
#include "training/training_test_util.h"
#include "varstate/error.h"
#include "varstate/learning_rate_decay.h"
#include "varstate/optimizers.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

Variable int64_step(int64_t value) {
  Variable step(Tensor::from_vector<int64_t>({value}, {}),
                {.trainable = false, .name = "global_step"});
  step.initializer().run();
  return step;
}

void set_step(Variable& step, int64_t value) {
  step.assign(Tensor::from_vector<int64_t>({value}, {}));
}

float rate(const Hyperparameter& h) {
  const Tensor t = h.tensor();
  REQUIRE(t.dtype() == DType::kFloat);
  return t.to_host().scalar<float>();
}

}  // namespace

TEST_CASE_METHOD(FreshGraph, "exponential, natural exp and inverse time decay", "[learning_rate]") {
  Variable step = int64_step(0);
  Hyperparameter exp = exponential_decay(0.1, step, 100, 0.96);
  Hyperparameter stair = exponential_decay(0.1, step, 100, 0.96, true);
  Hyperparameter natural = natural_exp_decay(0.1, step, 100, 0.5);
  Hyperparameter inverse = inverse_time_decay(0.1, step, 100, 0.5, true);
  CHECK(rate(exp) == 0.1f);
  for (int64_t s : {0, 1, 99, 100, 150, 1234}) {
    set_step(step, s);
    // step / decay_steps as TensorFlow's graph computes it: times the
    // reciprocal of the constant.
    const float p = static_cast<float>(s) * (1.0f / 100.0f);
    CHECK(rate(exp) == 0.1f * std::pow(0.96f, p));
    CHECK(rate(stair) == 0.1f * std::pow(0.96f, std::floor(p)));
    CHECK(rate(natural) == 0.1f * std::pow(std::exp(-0.5f), p));
    CHECK(rate(inverse) == 0.1f / (1.0f + 0.5f * std::floor(p)));
  }
  set_step(step, 250);
  CHECK(rate(stair) == Approx(0.1 * 0.96 * 0.96).epsilon(1e-6));
}

TEST_CASE_METHOD(FreshGraph, "a float64 learning rate variable computes in float64",
                 "[learning_rate]") {
  Variable step = int64_step(150);
  Variable lr(Tensor::from_vector<double>({0.1}, {}), {.trainable = false, .name = "lr"});
  lr.initializer().run();
  const Tensor t = exponential_decay(lr, step, 100, 0.96).tensor();
  REQUIRE(t.dtype() == DType::kDouble);
  // 0.96 goes through float32 first (TensorFlow's cast of a Python float).
  const double rate96 = static_cast<float>(0.96);
  CHECK(t.scalar<double>() == 0.1 * std::pow(rate96, 150.0 * (1.0 / 100.0)));
  // The learning rate is read at every evaluation.
  lr.assign(Tensor::from_vector<double>({0.2}, {}));
  CHECK(exponential_decay(lr, step, 100, 0.96).tensor().scalar<double>() ==
        0.2 * std::pow(rate96, 1.5));
}

TEST_CASE_METHOD(FreshGraph, "polynomial decay, with and without cycles", "[learning_rate]") {
  Variable step = int64_step(0);
  Hyperparameter linear = polynomial_decay(0.1, step, 1000);
  Hyperparameter cycle = polynomial_decay(0.1, step, 300, 0.001, 0.5, true);
  auto p_of = [](float s, float steps) { return s * (1.0f / steps); };
  for (int64_t s : {0, 1, 299, 300, 301, 999, 1000, 5000}) {
    set_step(step, s);
    const float held = std::min(static_cast<float>(s), 1000.0f);
    CHECK(rate(linear) == (0.1f - 0.0001f) * (1.0f - p_of(held, 1000.0f)) + 0.0001f);
    const float multiplier = s == 0 ? 1.0f : std::ceil(static_cast<float>(s) * (1.0f / 300.0f));
    const float p = static_cast<float>(s) / (300.0f * multiplier);
    CHECK(rate(cycle) == (0.1f - 0.001f) * std::sqrt(1.0f - p) + 0.001f);
  }
  set_step(step, 5000);
  CHECK(rate(linear) == 0.0001f);  // held at the end rate
}

TEST_CASE_METHOD(FreshGraph, "cosine decays", "[learning_rate]") {
  Variable step = int64_step(0);
  Hyperparameter cosine = cosine_decay(0.1, step, 1000, 0.1);
  Hyperparameter restarts = cosine_decay_restarts(0.1, step, 200);
  Hyperparameter linear = linear_cosine_decay(0.1, step, 1000, 2.0, 0.05, 0.01);
  const float pi = static_cast<float>(M_PI);
  for (int64_t s : {0, 1, 199, 200, 201, 599, 600, 999, 1000, 3000}) {
    set_step(step, s);
    const float held = std::min(static_cast<float>(s), 1000.0f);
    const float done = held * (1.0f / 1000.0f);
    const float c = 0.5f * (1.0f + std::cos(pi * done));
    CHECK(rate(cosine) == 0.1f * (0.9f * c + 0.1f));
    // Periods 200, 400, 800, ...: restart i starts at 200 * (2^i - 1).
    const float f = static_cast<float>(s) * (1.0f / 200.0f);
    const float i = std::floor(std::log(1.0f - f * (1.0f - 2.0f)) * (1.0f / std::log(2.0f)));
    const float sum = (1.0f - std::pow(2.0f, i)) * (1.0f / (1.0f - 2.0f));
    const float within = (f - sum) / std::pow(2.0f, i);
    CHECK(rate(restarts) == 0.1f * ((0.5f * 1.0f) * (1.0f + std::cos(pi * within)) + 0.0f));
    const float lin = (1000.0f - held) * (1.0f / 1000.0f);
    const float cl = 0.5f * (1.0f + std::cos(pi * (2.0f * 2.0f * done)));
    CHECK(rate(linear) == 0.1f * ((0.05f + lin) * cl + 0.01f));
  }
  set_step(step, 200);  // a restart: the full rate again
  CHECK(rate(restarts) == 0.1f);
  set_step(step, 600);
  CHECK(rate(restarts) == 0.1f);
}

TEST_CASE_METHOD(FreshGraph, "piecewise constant on integer and float steps", "[learning_rate]") {
  Variable step = int64_step(0);
  Hyperparameter pw = piecewise_constant(step, {100, 300}, {1.0, 0.5, 0.1});
  const std::vector<std::pair<int64_t, float>> expect = {{0, 1.0f},   {100, 1.0f}, {101, 0.5f},
                                                         {300, 0.5f}, {301, 0.1f}, {100000, 0.1f}};
  for (const auto& [s, r] : expect) {
    set_step(step, s);
    CHECK(rate(pw) == r);
  }
  Variable x(Tensor::from_vector<float>({0.f}, {}), {.trainable = false, .name = "x"});
  x.initializer().run();
  Hyperparameter fx = piecewise_constant(x, {0.5, 1.7}, {0.3, 0.2, 0.1});
  x.assign(Tensor::from_vector<float>({0.5f}, {}));
  CHECK(rate(fx) == 0.3f);
  x.assign(Tensor::from_vector<float>({0.50001f}, {}));
  CHECK(rate(fx) == 0.2f);
  x.assign(Tensor::from_vector<float>({1.7f}, {}));  // float32(1.7) <= float32(1.7)
  CHECK(rate(fx) == 0.2f);
}

TEST_CASE_METHOD(FreshGraph, "an optimizer reads its schedule at every apply", "[learning_rate]") {
  Variable step = int64_step(0);
  Variable w = make_var({1.f, 2.f}, {2}, "w");
  GradientDescentOptimizer sgd(exponential_decay(0.5, step, 1, 0.5, true));
  const Tensor g = Tensor::from_vector<float>({1.f, 1.f}, {2});
  std::vector<float> expect = {1.f, 2.f};
  float lr = 0.5f;
  for (int s = 0; s < 4; ++s) {
    sgd.apply_gradients({{g, w}}, &step);
    for (float& e : expect) e = e - 1.f * lr;
    lr *= 0.5f;
    CHECK(floats(w) == expect);
  }
  CHECK(step.value().to_host().scalar<int64_t>() == 4);
}

TEST_CASE_METHOD(FreshGraph, "schedule errors", "[learning_rate][errors]") {
  Variable step = int64_step(0);
  CHECK_THROWS_AS(piecewise_constant(step, {100, 300}, {1.0, 0.5}), ValueError);
  CHECK_THROWS_WITH(piecewise_constant(step, {100, 300}, {1.0, 0.5}),
                    Catch::Contains("2 boundaries, 2 values"));
  CHECK_THROWS_AS(piecewise_constant(step, {}, {1.0}), ValueError);
  CHECK_THROWS_WITH(piecewise_constant(step, {100.5}, {1.0, 0.5}),
                    Catch::Contains("boundaries[0] = 100.5"));
  Variable vec(Tensor::from_vector<int64_t>({1, 2}, {2}), {.name = "vec"});
  vec.initializer().run();
  CHECK_THROWS_WITH(exponential_decay(0.1, vec, 100, 0.96).tensor(),
                    Catch::Contains("global_step \"vec\" is not a real scalar: int64 [2]"));
  Variable half(Tensor::from_vector<float>({0.1f}, {}).cast(DType::kHalf), {.name = "h"});
  half.initializer().run();
  CHECK_THROWS_WITH(cosine_decay(half, step, 10).tensor(),
                    Catch::Contains("learning_rate must be float32 or float64, got float16"));
  // An optimizer reading a broken schedule changes nothing.
  Variable w = make_var({1.f}, {1}, "w");
  GradientDescentOptimizer sgd(exponential_decay(0.1, vec, 100, 0.96));
  CHECK_THROWS_AS(sgd.apply_gradients({{Tensor::from_vector<float>({1.f}, {1}), w}}, &step),
                  InvalidArgumentError);
  CHECK(floats(w) == std::vector<float>{1.f});
  CHECK(step.value().to_host().scalar<int64_t>() == 0);
}
