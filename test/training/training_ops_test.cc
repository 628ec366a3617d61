// The training ops (varstate/training_ops.h) on variables: each op, dense
// and sparse (duplicate indices summed), against a scalar reference written
// out by hand in TensorFlow's order of operations (float32, compared
// exactly); and every error path, after which the variable and its slots
// are bit-identical. Runs on each device (test_optimizers_on_gpu).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "device_fixture.h"
#include "runtime/distinct_rows.h"
#include "training/training_ops_internal.h"
#include "training/training_test_util.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/math_ops.h"
#include "varstate/scatter.h"
#include "varstate/training_ops.h"

using namespace varstate;
using namespace varstate::testing;

// The call throws `Type` and its message matches `matcher`.
#define CHECK_ERROR(expr, Type, matcher) \
  do {                                   \
    CHECK_THROWS_AS(expr, Type);         \
    CHECK_THROWS_WITH(expr, matcher);    \
  } while (false)

namespace {

const std::vector<float> kVar = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f, 0.75f};
const std::vector<float> kGrad = {0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f};

// Element-wise reference for a dense op: fn(i, var, s0, s1, s2) updates in place.
using ElementFn = std::function<void(size_t, float&, float&, float&, float&)>;

void reference(std::vector<float>& var, std::vector<float>& s0, std::vector<float>& s1,
               std::vector<float>& s2, const ElementFn& fn) {
  for (size_t i = 0; i < var.size(); ++i) {
    float dummy = 0;
    fn(i, var[i], s0.empty() ? dummy : s0[i], s1.empty() ? dummy : s1[i],
       s2.empty() ? dummy : s2[i]);
  }
}

}  // namespace

TEST_CASE_METHOD(FreshGraph, "apply_gradient_descent: var -= alpha * delta", "[training_ops]") {
  Variable w = make_var(kVar, {2, 3}, "w");
  apply_gradient_descent(w, 0.5f, Tensor::from_vector<float>(kGrad, {2, 3}));
  std::vector<float> want = kVar;
  for (size_t i = 0; i < want.size(); ++i) want[i] = want[i] - kGrad[i] * 0.5f;
  CHECK(floats(w) == want);
}

TEST_CASE_METHOD(FreshGraph, "sparse_apply_gradient_descent applies duplicates one by one",
                 "[training_ops]") {
  Variable w = make_var(kVar, {3, 2}, "w");
  const Tensor values = Tensor::from_vector<float>({0.1f, 0.2f, 0.3f, 0.4f}, {2, 2});
  sparse_apply_gradient_descent(w, 0.5f, IndexedSlices(values, Tensor({2, 2})));
  std::vector<float> want = kVar;
  want[4] = (want[4] - 0.1f * 0.5f) - 0.3f * 0.5f;
  want[5] = (want[5] - 0.2f * 0.5f) - 0.4f * 0.5f;
  CHECK(floats(w) == want);
}

// TensorFlow's sparse gradient descent is scatter_sub(var, ids, grad * lr),
// lr cast to the variable's dtype: the same bits in every float dtype
// (the CPU multiplies in the scatter's pass), over both index types,
// duplicates, and enough ids to split over threads.
TEST_CASE_METHOD(FreshGraph,
                 "sparse_apply_gradient_descent equals scatter_sub of grad * lr in every dtype",
                 "[training_ops]") {
  constexpr int64_t kRows = 400, kWidth = 19;
  std::mt19937_64 gen(20261202);
  std::normal_distribution<float> normal(0.f, 3.f);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = normal(gen);
    return v;
  };
  for (const DType dtype : {DType::kFloat, DType::kDouble, DType::kHalf, DType::kBFloat16}) {
    for (const int64_t n : {int64_t{7}, int64_t{3000}}) {
      for (const bool wide_index : {false, true}) {
        CAPTURE(dtype_name(dtype), n, wide_index);
        const Tensor init = Tensor::from_vector<float>(random(kRows * kWidth), {kRows, kWidth});
        Variable fused(init.cast(dtype), {.name = "fused"});
        Variable unfused(init.cast(dtype), {.name = "unfused"});
        fused.initializer().run();
        unfused.initializer().run();
        std::vector<int64_t> ids(static_cast<size_t>(n));
        for (int64_t& id : ids) id = static_cast<int64_t>(gen() % (n < 100 ? 5 : kRows));
        const Tensor indices = wide_index ? Tensor::from_vector<int64_t>(ids)
                                          : Tensor::from_vector<int64_t>(ids).cast(DType::kInt32);
        const Tensor grad = Tensor::from_vector<float>(random(n * kWidth), {n, kWidth}).cast(dtype);
        const float lr = 0.1f;
        // (On a GPU, atomics would subtract the duplicates in any order.)
        const UpdateOptions in_order{.deterministic = true};
        sparse_apply_gradient_descent(
            fused, lr, IndexedSlices(grad.to(test_device()), indices.to(test_device())), in_order);
        const Tensor alpha = Tensor::filled(dtype, {}, Tensor(lr), DeviceManager::instance().cpu());
        scatter_sub(unfused, indices.to(test_device()), (grad * alpha).to(test_device()), in_order);
        const std::vector<double> got = fused.value().cast(DType::kDouble).to_vector<double>();
        const std::vector<double> want = unfused.value().cast(DType::kDouble).to_vector<double>();
        CHECK(got == want);
        // (and the update did something)
        CHECK(got != init.cast(dtype).cast(DType::kDouble).to_vector<double>());
      }
    }
  }
}

TEST_CASE_METHOD(FreshGraph, "dense training ops follow TensorFlow's formulas exactly",
                 "[training_ops]") {
  const Tensor grad = Tensor::from_vector<float>(kGrad, {2, 3});
  const float lr = 0.1f, mom = 0.9f, b1 = 0.9f, b2 = 0.999f, eps = 1e-7f, rho = 0.9f;
  std::vector<float> var = kVar, s0(6, 0.5f), s1(6, 0.25f), s2(6, 0.125f);
  Variable w = make_var(var, {2, 3}, "w");
  Variable a = make_var(s0, {2, 3}, "a");
  Variable b = make_var(s1, {2, 3}, "b");
  Variable c = make_var(s2, {2, 3}, "c");
  auto check = [&] {
    CHECK(floats(w) == var);
    CHECK(floats(a) == s0);
    CHECK(floats(b) == s1);
    CHECK(floats(c) == s2);
  };
  SECTION("momentum and nesterov") {
    for (bool nesterov : {false, true}) {
      apply_momentum(w, a, lr, grad, mom, nesterov);
      reference(var, s0, s1, s2, [&](size_t i, float& v, float& acc, float&, float&) {
        acc = acc * mom + kGrad[i];
        v = nesterov ? v - (kGrad[i] * lr + acc * mom * lr) : v - acc * lr;
      });
      check();
    }
  }
  SECTION("adagrad") {
    apply_adagrad(w, a, lr, grad);
    reference(var, s0, s1, s2, [&](size_t i, float& v, float& acc, float&, float&) {
      acc = acc + kGrad[i] * kGrad[i];
      v = v - kGrad[i] * lr * (1.0f / std::sqrt(acc));
    });
    check();
  }
  SECTION("adam and nesterov adam") {
    for (bool nesterov : {false, true}) {
      const float b1p = 0.81f, b2p = 0.998f;
      apply_adam(w, a, b, b1p, b2p, lr, b1, b2, eps, grad, nesterov);
      const float alpha = lr * std::sqrt(1.0f - b2p) / (1.0f - b1p);
      reference(var, s0, s1, s2, [&](size_t i, float& v, float& m, float& vv, float&) {
        const float g = kGrad[i];
        m = m + (g - m) * (1.0f - b1);
        vv = vv + (g * g - vv) * (1.0f - b2);
        const float num = nesterov ? (g * (1.0f - b1) + b1 * m) : m;
        v = v - (num * alpha) / (std::sqrt(vv) + eps);
      });
      check();
    }
  }
  SECTION("rmsprop and centered rmsprop") {
    apply_rms_prop(w, a, b, lr, rho, mom, eps, grad);
    reference(var, s0, s1, s2, [&](size_t i, float& v, float& ms, float& mo, float&) {
      const float g = kGrad[i];
      ms = ms + (g * g - ms) * (1.0f - rho);
      mo = mo * mom + (g * lr) / std::sqrt(ms + eps);
      v = v - mo;
    });
    check();
    apply_centered_rms_prop(w, c, a, b, lr, rho, mom, eps, grad);
    reference(var, s0, s1, s2, [&](size_t i, float& v, float& ms, float& mo, float& mg) {
      const float g = kGrad[i];
      ms = ms + (g * g - ms) * (1.0f - rho);
      mg = mg + (g - mg) * (1.0f - rho);
      mo = mo * mom + (g * lr) / std::sqrt((ms - mg * mg) + eps);
      v = v - mo;
    });
    check();
  }
  SECTION("ftrl, ftrl with another lr_power, ftrl_v2") {
    const float l1 = 0.05f, l2 = 0.02f, shrink = 0.1f;
    auto ftrl_ref = [&](float power, float shrinkage) {
      reference(var, s0, s1, s2, [&](size_t i, float& v, float& acc, float& lin, float&) {
        const float g = kGrad[i];
        const float gs = shrinkage > 0 ? g + 2.0f * shrinkage * v : g;
        const float na = acc + g * g;
        const float pn = power == -0.5f ? std::sqrt(na) : std::pow(na, -power);
        const float po = power == -0.5f ? std::sqrt(acc) : std::pow(acc, -power);
        lin = lin + (gs - (pn - po) / lr * v);
        const float clamped = std::max(std::min(lin, l1), -l1);
        v = (clamped - lin) / (pn / lr + 2.0f * l2);
        acc = na;
      });
    };
    apply_ftrl(w, a, b, grad, lr, l1, l2, -0.5f);
    ftrl_ref(-0.5f, 0);
    check();
    apply_ftrl(w, a, b, grad, lr, l1, l2, -0.3f);
    ftrl_ref(-0.3f, 0);
    CHECK_THAT(floats(w), Catch::Approx(var).epsilon(1e-6));
    var = floats(w), s0 = floats(a), s1 = floats(b);
    apply_ftrl_v2(w, a, b, grad, lr, l1, l2, shrink, -0.5f);
    ftrl_ref(-0.5f, shrink);
    check();
  }
  SECTION("adadelta") {
    for (int step = 0; step < 2; ++step) {
      apply_adadelta(w, a, b, lr, rho, eps, grad);
      reference(var, s0, s1, s2, [&](size_t i, float& v, float& acc, float& acc_update, float&) {
        const float g = kGrad[i];
        acc = acc * rho + (g * g) * (1.0f - rho);
        const float update = std::sqrt(acc_update + eps) * (1.0f / std::sqrt(acc + eps)) * g;
        v = v - update * lr;
        acc_update = acc_update * rho + (update * update) * (1.0f - rho);
      });
      check();
    }
  }
  // sign(prox) * max(|prox| - lr_l1, 0) / denominator, or prox / denominator.
  auto proximal = [](float prox, float lr_l1, float denominator, float l1) {
    if (!(l1 > 0)) return prox / denominator;
    const float sign = prox > 0 ? 1.0f : (prox < 0 ? -1.0f : 0.0f);
    return sign * std::max(std::fabs(prox) - lr_l1, 0.0f) / denominator;
  };
  SECTION("proximal gradient descent, with and without l1") {
    // l1 = 0.5 zeroes the elements whose step ends within lr * l1 of zero.
    // With l2 = 0 the kernel leaves out its division by 1 + 0 * lr: the
    // reference divides.
    for (const float l2 : {0.25f, 0.0f}) {
      for (const float l1 : {0.5f, 0.0f}) {
        apply_proximal_gradient_descent(w, lr, l1, l2, grad);
        reference(var, s0, s1, s2, [&](size_t i, float& v, float&, float&, float&) {
          v = proximal(v - kGrad[i] * lr, lr * l1, 1.0f + l2 * lr, l1);
        });
        check();
      }
    }
    CHECK(std::count(var.begin(), var.end(), 0.0f) == 0);
    apply_proximal_gradient_descent(w, lr, 100.0f, 0.0f, grad);  // every |prox| < lr * l1
    CHECK(floats(w) == std::vector<float>(6, 0.0f));
  }
  SECTION("adagrad_da, with and without l1") {
    // Steps 1 and 2: var from the accumulators alone.
    for (const float l1 : {0.02f, 0.0f}) {
      const float l2 = 0.5f;
      for (int64_t step = 1; step <= 2; ++step) {
        apply_adagrad_da(w, a, b, grad, lr, l1, l2, Tensor(step));
        reference(var, s0, s1, s2, [&](size_t i, float& v, float& ga, float& gga, float&) {
          const float g = kGrad[i];
          ga = ga + g;
          gga = gga + g * g;
          const auto t = static_cast<float>(step);
          const float denominator = l2 * (t * lr) + std::sqrt(gga);
          if (l1 > 0) {
            const float sign = ga > 0 ? 1.0f : (ga < 0 ? -1.0f : 0.0f);
            v = (-lr * sign) * std::max(std::fabs(ga) - t * l1, 0.0f) / denominator;
          } else {
            v = -(lr * ga) / denominator;
          }
        });
        check();
      }
    }
  }
  SECTION("proximal adagrad, with and without l1") {
    for (const float l1 : {0.05f, 0.0f}) {
      const float l2 = 0.02f;
      apply_proximal_adagrad(w, a, lr, l1, l2, grad);
      reference(var, s0, s1, s2, [&](size_t i, float& v, float& acc, float&, float&) {
        const float g = kGrad[i];
        acc = acc + g * g;
        const float step_lr = lr * (1.0f / std::sqrt(acc));
        v = proximal(v - g * step_lr, step_lr * l1, 1.0f + l2 * step_lr, l1);
      });
      check();
    }
  }
}

TEST_CASE_METHOD(FreshGraph, "sparse training ops sum duplicate indices, then update each row once",
                 "[training_ops]") {
  // Rows 2, 0, 2: row 2's gradient is (0 + g0) + g2, rows without a gradient unchanged.
  const std::vector<float> values = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  const IndexedSlices grad(Tensor::from_vector<float>(values, {3, 2}), Tensor({2, 0, 2}));
  const std::vector<float> g = {0.3f, 0.4f, 0, 0, 0.1f + 0.5f, 0.2f + 0.6f};
  const std::vector<bool> touched = {true, true, false, false, true, true};
  const float lr = 0.1f;
  std::vector<float> var = kVar, s0(6, 0.5f), s1(6, 0.25f), s2;
  Variable w = make_var(var, {3, 2}, "w");
  Variable a = make_var(s0, {3, 2}, "a");
  Variable b = make_var(s1, {3, 2}, "b");
  SECTION("adagrad") {
    sparse_apply_adagrad(w, a, lr, grad);
    reference(var, s0, s1, s2, [&](size_t i, float& v, float& acc, float&, float&) {
      if (!touched[i]) return;
      acc = acc + g[i] * g[i];
      v = v - g[i] * lr * (1.0f / std::sqrt(acc));
    });
  }
  SECTION("sparse rmsprop uses the sparse kernel's order") {
    sparse_apply_rms_prop(w, a, b, lr, 0.9f, 0.5f, 1e-7f, grad);
    reference(var, s0, s1, s2, [&](size_t i, float& v, float& ms, float& mo, float&) {
      if (!touched[i]) return;
      ms = ms * 0.9f + (g[i] * g[i]) * (1.0f - 0.9f);
      mo = mo * 0.5f + (1.0f / std::sqrt(ms + 1e-7f)) * lr * g[i];
      v = v - mo;
    });
  }
  SECTION("compat.v1 sparse adam decays every row; lazy adam only the batch's") {
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    const float alpha = lr * std::sqrt(1.0f - 0.999f) / (1.0f - 0.9f);
    for (bool lazy : {false, true}) {
      if (lazy) {
        sparse_apply_lazy_adam(w, a, b, 0.9f, 0.999f, lr, b1, b2, eps, grad);
      } else {
        sparse_apply_adam(w, a, b, 0.9f, 0.999f, lr, b1, b2, eps, grad);
      }
      reference(var, s0, s1, s2, [&](size_t i, float& v, float& m, float& vv, float&) {
        if (lazy && !touched[i]) return;
        m = touched[i] ? m * b1 + g[i] * (1.0f - b1) : m * b1;
        const float v_step = lazy ? (g[i] * g[i]) * (1.0f - b2) : g[i] * (g[i] * (1.0f - b2));
        vv = touched[i] ? vv * b2 + v_step : vv * b2;
        v = v - (alpha * m) / (std::sqrt(vv) + eps);
      });
      CHECK(floats(w) == var);
    }
  }
  SECTION("adadelta, proximal adagrad and proximal gradient descent") {
    const float rho = 0.95f, eps = 1e-6f, l1 = 0.01f, l2 = 0.02f;
    sparse_apply_adadelta(w, a, b, lr, rho, eps, grad);
    reference(var, s0, s1, s2, [&](size_t i, float& v, float& acc, float& acc_update, float&) {
      if (!touched[i]) return;
      acc = acc * rho + (g[i] * g[i]) * (1.0f - rho);
      const float update = std::sqrt(acc_update + eps) * (1.0f / std::sqrt(acc + eps)) * g[i];
      v = v - update * lr;
      acc_update = acc_update * rho + (update * update) * (1.0f - rho);
    });
    CHECK(floats(w) == var);
    sparse_apply_proximal_adagrad(w, a, lr, l1, l2, grad);
    reference(var, s0, s1, s2, [&](size_t i, float& v, float& acc, float&, float&) {
      if (!touched[i]) return;
      acc = acc + g[i] * g[i];
      const float step_lr = lr * (1.0f / std::sqrt(acc));
      const float prox = v - g[i] * step_lr;
      const float sign = prox > 0 ? 1.0f : (prox < 0 ? -1.0f : 0.0f);
      v = sign * std::max(std::fabs(prox) - step_lr * l1, 0.0f) / (1.0f + l2 * step_lr);
    });
    CHECK(floats(w) == var);
    // AdagradDA's sparse kernel divides through by T * lr (T = 4).
    Variable ga = make_var(std::vector<float>(6, 0.0f), {3, 2}, "ga");
    std::vector<float> ga_ref(6, 0.0f), gga_ref = s1;
    sparse_apply_adagrad_da(w, ga, b, grad, lr, l1, l2, Tensor(int64_t{4}));
    for (size_t i = 0; i < 6; ++i) {
      if (!touched[i]) continue;
      ga_ref[i] = ga_ref[i] + g[i];
      gga_ref[i] = gga_ref[i] + g[i] * g[i];
      const float sign = ga_ref[i] > 0 ? 1.0f : (ga_ref[i] < 0 ? -1.0f : 0.0f);
      const float shrunk = std::max(std::fabs(ga_ref[i]) / 4.0f - l1, 0.0f);
      var[i] = (-sign * shrunk) / (l2 + std::sqrt(gga_ref[i]) / (4.0f * lr));
    }
    s1 = gga_ref;
    CHECK(floats(ga) == ga_ref);
    CHECK(floats(w) == var);
    // Duplicates summed first (TensorFlow's optimizer), unlike
    // sparse_apply_gradient_descent's one by one.
    sparse_apply_proximal_gradient_descent(w, lr, 0.0f, l2, grad);
    reference(var, s0, s1, s2, [&](size_t i, float& v, float&, float&, float&) {
      if (touched[i]) v = (v - g[i] * lr) / (1.0f + l2 * lr);
    });
  }
  SECTION("row-wise adagrad keeps one accumulator per row") {
    Variable acc = make_var({0.1f, 0.2f, 0.3f}, {3}, "acc");
    sparse_apply_rowwise_adagrad(w, acc, lr, grad);
    std::vector<float> want_acc = {0.1f, 0.2f, 0.3f};
    for (int r : {0, 2}) {
      const float sum = g[2 * r] * g[2 * r] + g[2 * r + 1] * g[2 * r + 1];
      want_acc[r] = want_acc[r] + sum / 2.0f;
      for (int c = 0; c < 2; ++c) {
        var[2 * r + c] = var[2 * r + c] - g[2 * r + c] * lr * (1.0f / std::sqrt(want_acc[r]));
      }
    }
    CHECK(acc.value().to_vector<float>() == want_acc);
    s0 = floats(a);
  }
  CHECK(floats(w) == var);
  CHECK(floats(a) == s0);
  CHECK(floats(b) == s1);
}

TEST_CASE_METHOD(FreshGraph, "compat.v1 sparse Adam decays every row even for an empty batch",
                 "[training_ops]") {
  Variable w = make_var(kVar, {3, 2}, "w");
  Variable m = make_var(std::vector<float>(6, 0.5f), {3, 2}, "m");
  Variable v = make_var(std::vector<float>(6, 0.25f), {3, 2}, "v");
  const IndexedSlices empty(Tensor::zeros(DType::kFloat, {0, 2}),
                            Tensor::zeros(DType::kInt64, {0}));
  sparse_apply_adam(w, m, v, 0.9f, 0.999f, 0.1f, 0.9f, 0.999f, 1e-8f, empty);
  const float alpha = 0.1f * std::sqrt(1.0f - 0.999f) / (1.0f - 0.9f);
  std::vector<float> want = kVar;
  for (float& x : want) x = x - (alpha * (0.5f * 0.9f)) / (std::sqrt(0.25f * 0.999f) + 1e-8f);
  CHECK(floats(w) == want);
  CHECK(floats(m) == std::vector<float>(6, 0.5f * 0.9f));
  Variable lazy_m = make_var(std::vector<float>(6, 0.5f), {3, 2}, "lazy_m");
  sparse_apply_lazy_adam(w, lazy_m, v, 0.9f, 0.999f, 0.1f, 0.9f, 0.999f, 1e-8f, empty);
  CHECK(floats(w) == want);
  CHECK(floats(lazy_m) == std::vector<float>(6, 0.5f));
}

TEST_CASE_METHOD(FreshGraph, "training ops take float16, bfloat16 and float64 variables",
                 "[training_ops]") {
  for (DType dtype : {DType::kHalf, DType::kBFloat16, DType::kDouble}) {
    CAPTURE(dtype_name(dtype));
    Variable w(Tensor::from_vector<float>(kVar, {2, 3}).cast(dtype), {.name = "w"});
    Variable acc(Tensor::from_vector<float>(std::vector<float>(6, 0.5f), {2, 3}).cast(dtype),
                 {.name = "acc"});
    w.initializer().run();
    acc.initializer().run();
    apply_adagrad(w, acc, 0.1, Tensor::from_vector<float>(kGrad, {2, 3}).cast(dtype));
    const std::vector<double> got = w.value().cast(DType::kDouble).to_vector<double>();
    for (size_t i = 0; i < kVar.size(); ++i) {
      const double want = kVar[i] - kGrad[i] * 0.1 / std::sqrt(0.5 + kGrad[i] * kGrad[i]);
      CHECK(got[i] == Approx(want).epsilon(dtype == DType::kDouble ? 1e-6 : 2e-2));
    }
  }
}

// ---------------------------------------------------------------------------
// Errors: raised before anything is written.

namespace {

struct Snapshot {
  std::vector<std::vector<float>> values;
  explicit Snapshot(const std::vector<Variable*>& vars) {
    for (Variable* v : vars) values.push_back(floats(*v));
  }
  bool same(const std::vector<Variable*>& vars) const { return Snapshot(vars).values == values; }
};

}  // namespace

TEST_CASE_METHOD(FreshGraph, "training op errors name the op and the variable, and change nothing",
                 "[training_ops][errors]") {
  Variable w = make_var(kVar, {3, 2}, "w");
  Variable m = make_var(std::vector<float>(6, 0.5f), {3, 2}, "m");
  Variable v = make_var(std::vector<float>(6, 0.5f), {3, 2}, "v");
  const std::vector<Variable*> all = {&w, &m, &v};
  const Snapshot before(all);
  const Tensor grad = Tensor::from_vector<float>(kGrad, {3, 2});
  auto adam = [&](const Tensor& g, const Tensor& lr) {
    apply_adam(w, m, v, 0.9f, 0.999f, lr, 0.9f, 0.999f, 1e-8f, g);
  };
  CHECK_ERROR(adam(Tensor::zeros(DType::kFloat, {2, 3}), 0.1f), InvalidArgumentError,
              Catch::Equals("ApplyAdam on \"w\": var and grad do not have the same "
                            "shape: [3,2] vs [2,3]"));
  CHECK_ERROR(adam(grad.cast(DType::kDouble), 0.1f), TypeError,
              Catch::Contains("grad is float64, expected float32"));
  CHECK_ERROR(adam(grad, Tensor({0.1f, 0.2f})), InvalidArgumentError,
              Catch::Equals("ApplyAdam on \"w\": lr is not a scalar: [2]"));
  CHECK_ERROR(adam(grad, Tensor::from_vector<double>({0.1}, {})), TypeError,
              Catch::Contains("lr is float64, expected float32"));
  const IndexedSlices bad_rows(Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}), Tensor({1, 3}));
  CHECK_ERROR(sparse_apply_adagrad(w, m, 0.1f, bad_rows), InvalidArgumentError,
              Catch::Equals("SparseApplyAdagrad on \"w\": indices[1] = 3 is not in "
                            "[0, 3)"));
  const IndexedSlices bad_width(Tensor::from_vector<float>({1, 2, 3}, {1, 3}), Tensor({1}));
  CHECK_ERROR(sparse_apply_adagrad(w, m, 0.1f, bad_width), InvalidArgumentError,
              Catch::Contains("var and grad.values do not match beyond dimension 0"));
  Variable short_slot = make_var({1, 2}, {2}, "short");
  CHECK_ERROR(apply_adagrad(w, short_slot, 0.1f, grad), InvalidArgumentError,
              Catch::Contains("var and accum do not have the same shape: [3,2] vs [2]"));
  CHECK_ERROR(apply_adam(w, m, m, 0.9f, 0.999f, 0.1f, 0.9f, 0.999f, 1e-8f, grad),
              InvalidArgumentError, Catch::Contains("v is the same variable as m"));
  Variable uninitialized(Tensor::zeros(DType::kFloat, {3, 2}), {.name = "later"});
  CHECK_THROWS_AS(apply_adagrad(w, uninitialized, 0.1f, grad), FailedPreconditionError);
  Variable ints(Tensor::from_vector<int32_t>({1, 2}, {2}), {.name = "ints"});
  ints.initializer().run();
  CHECK_ERROR(apply_gradient_descent(ints, 1, Tensor({1, 1})), TypeError,
              Catch::Contains("float16, bfloat16, float32 or float64 only, got int32"));
  CHECK_ERROR(apply_ftrl(w, m, v, grad, -0.1f, 0.f, 0.f, -0.5f), InvalidArgumentError,
              Catch::Contains("lr is not positive"));
  CHECK_ERROR(apply_proximal_adagrad(w, m, 0.0f, 0.f, 0.f, grad), InvalidArgumentError,
              Catch::Equals("ApplyProximalAdagrad on \"w\": lr is not a positive scalar, got "
                            "0.000000"));
  CHECK_ERROR(sparse_apply_proximal_adagrad(w, m, 0.1f, -0.01f, 0.f,
                                            IndexedSlices(grad, Tensor({0, 1, 2}))),
              InvalidArgumentError,
              Catch::Contains("SparseApplyProximalAdagrad on \"w\": l1 regularization strength "
                              "is not a non-negative scalar, got -0.01"));
  CHECK_ERROR(apply_proximal_adagrad(w, m, 0.1f, 0.f, -1.f, grad), InvalidArgumentError,
              Catch::Contains("l2 regularization strength is not a non-negative scalar"));
  CHECK_ERROR(apply_adadelta(w, m, m, 0.1f, 0.95f, 1e-6f, grad), InvalidArgumentError,
              Catch::Contains("accum_update is the same variable as accum"));
  CHECK_ERROR(apply_adagrad_da(w, m, v, grad, 0.1f, 0.f, 0.f, Tensor(2.0)), TypeError,
              Catch::Equals("ApplyAdagradDA on \"w\": global_step is float64, expected int64"));
  CHECK_ERROR(apply_adagrad_da(w, m, v, grad, 0.1f, 0.f, 0.f, Tensor({1, 2})), InvalidArgumentError,
              Catch::Contains("global_step is not a scalar: [2]"));
  CHECK_ERROR(apply_proximal_gradient_descent(w, Tensor({0.1f, 0.2f}), 0.f, 0.f, grad),
              InvalidArgumentError,
              Catch::Equals("ApplyProximalGradientDescent on \"w\": alpha is not a scalar: [2]"));
  CHECK(before.same(all));
}

TEST_CASE_METHOD(FreshGraph,
                 "sparse training ops with indices on the variable's device: the same bits; a "
                 "bad index writes nothing and is raised by the variable",
                 "[training_ops][errors]") {
  // On a GPU the indices are checked there (no copy to the host) and the
  // error is deferred to the variable; on the CPU they are the host's.
  const std::vector<float> g = {0.5f, -1.f, 0.25f, 2.f, -0.5f, 1.f};
  const bool deferred = !test_device().is_cpu();
  auto ids = [](std::vector<int64_t> v) {
    return Tensor::from_vector<int64_t>(v).to(test_device());
  };
  using Op = std::function<void(Variable&, Variable&, Variable&, const IndexedSlices&,
                                const UpdateOptions&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"SparseApplyAdagrad",
       [](Variable& w, Variable& a, Variable&, const IndexedSlices& d, const UpdateOptions& o) {
         sparse_apply_adagrad(w, a, 0.1f, d, o);
       }},
      {"SparseApplyMomentum",
       [](Variable& w, Variable& a, Variable&, const IndexedSlices& d, const UpdateOptions& o) {
         sparse_apply_momentum(w, a, 0.1f, d, 0.9f, false, o);
       }},
      {"SparseApplyFtrl",
       [](Variable& w, Variable& a, Variable& l, const IndexedSlices& d, const UpdateOptions& o) {
         sparse_apply_ftrl(w, a, l, d, 0.1f, 0.01f, 0.f, -0.5f, o);
       }},
      {"SparseApplyAdam",
       [](Variable& w, Variable& m, Variable& v, const IndexedSlices& d, const UpdateOptions& o) {
         sparse_apply_adam(w, m, v, 0.9f, 0.999f, 0.01f, 0.9f, 0.999f, 1e-8f, d, o);
       }},
      {"SparseApplyGradientDescent",
       [](Variable& w, Variable&, Variable&, const IndexedSlices& d, const UpdateOptions& o) {
         sparse_apply_gradient_descent(w, 0.5f, d, o);
       }},
  };
  for (const auto& [name, op] : ops) {
    CAPTURE(name);
    auto vars = [&, n = name](const std::string& tag) {
      return std::array<Variable, 3>{
          make_var(kVar, {3, 2}, n + tag + "_w"),
          make_var({0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f}, {3, 2}, n + tag + "_s0"),
          make_var({0, 0, 0, 0, 0, 0}, {3, 2}, n + tag + "_s1")};
    };
    auto host = vars("_host");
    auto dev = vars("_dev");
    // Duplicates, in two calls: the same bits as with host indices.
    for (const std::vector<int64_t>& rows : {std::vector<int64_t>{2, 0, 2}, {1}}) {
      const Tensor values = Tensor::from_vector<float>(
          std::vector<float>(g.begin(), g.begin() + 2 * static_cast<int64_t>(rows.size())),
          {static_cast<int64_t>(rows.size()), 2});
      op(host[0], host[1], host[2], IndexedSlices(values, Tensor::from_vector<int64_t>(rows)), {});
      op(dev[0], dev[1], dev[2], IndexedSlices(values.to(test_device()), ids(rows)), {});
    }
    for (int k = 0; k < 3; ++k) CHECK(floats(dev[k]) == floats(host[k]));
    // A bad index: nothing written to the variable or its slots; the error
    // names the op, the variable and the position, once.
    const std::vector<std::vector<float>> before = {floats(dev[0]), floats(dev[1]), floats(dev[2])};
    // (An IndexedSlices keeps its indices where its values are.)
    const IndexedSlices bad(Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}).to(test_device()),
                            ids({1, 3}));
    const std::string message =
        name + " on \"" + name + "_dev_w\": indices[1] = 3 is not in [0, 3)";
    if (deferred) {
      op(dev[0], dev[1], dev[2], bad, {});  // returns before the check's verdict
      CHECK_THROWS_WITH(dev[0].sync(), Catch::StartsWith(message) &&
                                           Catch::Contains("found by the device-side check"));
      CHECK_NOTHROW(dev[0].sync());  // raised once
      CHECK_THROWS_WITH(op(dev[0], dev[1], dev[2], bad, {.synchronous = true}),
                        Catch::StartsWith(message));
    } else {
      CHECK_THROWS_WITH(op(dev[0], dev[1], dev[2], bad, {}), Catch::Equals(message));
    }
    for (int k = 0; k < 3; ++k) CHECK(floats(dev[k]) == before[static_cast<size_t>(k)]);
  }
}

TEST_CASE_METHOD(FreshGraph, "a slot on another device than its variable is refused",
                 "[training_ops][errors]") {
  if (!testing_on_gpu()) return;  // needs a second device
  Variable w = make_var(kVar, {3, 2}, "w");
  std::optional<Variable> acc;
  {
    DeviceScope cpu("/device:CPU:0");
    acc = make_var(std::vector<float>(6, 0.5f), {3, 2}, "acc");
  }
  CHECK_ERROR(apply_adagrad(w, *acc, 0.1f, Tensor::from_vector<float>(kGrad, {3, 2})),
              InvalidArgumentError, Catch::Contains("slots live on their variable's"));
  CHECK(floats(w) == kVar);
}

TEST_CASE("distinct_rows: the rows a batch touches, each index's place among them",
          "[training_ops][remote]") {
  const std::vector<int64_t> rows = {7, 3, 7, 9, 3, 3, 0};
  const internal::DistinctRows d = internal::distinct_rows(rows, false);
  CHECK(d.unique == std::vector<int64_t>{0, 3, 7, 9});
  CHECK(d.local == std::vector<int64_t>{2, 1, 2, 3, 1, 1, 0});
  CHECK(d.first == std::vector<int64_t>{6, 1, 0, 3});
  // Without duplicates, the positions only when asked for.
  const std::vector<int64_t> once = {5, 2, 8};
  CHECK(internal::distinct_rows(once, false).local.empty());
  CHECK(internal::distinct_rows(once, true).local == std::vector<int64_t>{1, 0, 2});
  // The Tensor form: int32 indices too, the order of equal indices kept.
  Tensor compact;
  CHECK(internal::distinct_rows(Tensor::from_vector<int32_t>({4, 1, 4}), compact) ==
        std::vector<int64_t>{1, 4});
  CHECK(compact.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  CHECK(internal::distinct_rows(std::span<const int64_t>(), true).unique.empty());
}
