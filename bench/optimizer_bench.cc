// Optimizer updates through the training ops of varstate/training_ops.h
// (validation, duplicate summing and the fused kernel), CPU and GPU,
// against the same-run copy bandwidth.
//
// Configurations (name: optimizer/<dev>/<op>/<path>/N<rows>xD<width>/M<ids>):
//   sparse   Adagrad, Adam (compat.v1: every row of var, m and v moves),
//            lazy Adam and row-wise Adagrad on a [1,000,000, 64] float32
//            table, 65,536 uniform ids per step (duplicates included), on
//            the default and the deterministic path (the same kernels:
//            their ratio shows what determinism costs — nothing);
//   dense    Adam on 64M float32 elements (M0);
//   both     Adadelta, proximal gradient descent, proximal Adagrad and
//            AdagradDA (l1 = l2 = 0.001, step 100), sparse on the default
//            path and dense;
//   moving   ExponentialMovingAverage(0.999)'s Op over a variable of 64M
//            float32 elements (varstate/moving_averages.h; M0, "dense").
// bytes moved (read + written, float32):
//   sparse Adagrad        M*D*4 (grad) + U*D*4*4 (var, accum: read, write)
//   row-wise Adagrad      M*D*4 + U*D*4*2 + U*4*2
//   lazy Adam             M*D*4 + U*D*4*6
//   compat.v1 sparse Adam M*D*4 + N*D*4*6
//   dense Adam            N*4*7 (read var, m, v, grad; write var, m, v)
//   the four others       sparse M*D*4 + U*D*4*2*(1 + slots), dense
//                         N*4*(3 + 2*slots) (Adadelta and AdagradDA 2
//                         slots, proximal Adagrad 1, proximal gradient
//                         descent none; the moving average, as
//                         gradient descent, N*4*3: avg in and out, var in)
// with U the distinct ids. Counters: GBps, limit_GBps, ratio (bench_util.h)
// and steps_per_s. The quick run uses N = 262,144 and 16M dense elements.
// bench/compare_tf_optimizers.py runs TensorFlow's optimizers on the same
// configurations.
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench_util.h"
#include "varstate/device_manager.h"
#include "varstate/graph.h"
#include "varstate/moving_averages.h"
#include "varstate/placement.h"
#include "varstate/training_ops.h"
#include "varstate/variable.h"
#include "varstate/variables.h"

namespace varstate::bench {
namespace {

enum class Op {
  kAdagrad,
  kRowwiseAdagrad,
  kAdam,
  kLazyAdam,
  kAdadelta,
  kProximalGradientDescent,
  kProximalAdagrad,
  kAdagradDA,
  kMovingAverage
};

// The slots of the four ops of the second group.
int slots_of(Op op) {
  switch (op) {
    case Op::kAdadelta:
    case Op::kAdagradDA:
      return 2;
    case Op::kProximalAdagrad:
      return 1;
    default:
      return 0;
  }
}

struct Config {
  bool gpu = false;
  Op op = Op::kAdagrad;
  bool deterministic = false;
  bool dense = false;
  int64_t rows = 1'000'000;
  int64_t width = 64;
  int64_t ids = 65'536;
};

const char* op_label(Op op) {
  switch (op) {
    case Op::kAdagrad:
      return "adagrad";
    case Op::kRowwiseAdagrad:
      return "rowwise-adagrad";
    case Op::kAdam:
      return "adam";
    case Op::kLazyAdam:
      return "lazy-adam";
    case Op::kAdadelta:
      return "adadelta";
    case Op::kProximalGradientDescent:
      return "proximal-sgd";
    case Op::kProximalAdagrad:
      return "proximal-adagrad";
    case Op::kAdagradDA:
      return "adagrad-da";
    case Op::kMovingAverage:
      return "moving-average";
  }
  return "";
}

std::string name_of(const Config& c) {
  return std::string("optimizer/") + (c.gpu ? "gpu/" : "cpu/") + op_label(c.op) + "/" +
         (c.dense           ? "dense"
          : c.deterministic ? "deterministic"
                            : "default") +
         "/N" + std::to_string(c.rows) + "xD" + std::to_string(c.width) + "/M" +
         std::to_string(c.dense ? 0 : c.ids);
}

Variable filled(Device& device, const TensorShape& shape, float value, const std::string& name) {
  Variable v(Tensor::filled(DType::kFloat, shape, Tensor(value), device), {.name = name});
  v.initializer().run();
  return v;
}

Tensor uniform(Device& device, const TensorShape& shape, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(shape.num_elements()));
  for (float& x : v) x = u(gen);
  return Tensor::from_vector<float>(v, shape).to(device);
}

void run(benchmark::State& state, const Config& c) {
  Device* device = &DeviceManager::instance().cpu();
  if (c.gpu && (device = gpu_or_skip(state)) == nullptr) return;
  reset_default_graph();
  DeviceScope scope(device->name());
  const TensorShape shape = c.dense ? TensorShape({c.rows}) : TensorShape({c.rows, c.width});
  const int64_t n = shape.num_elements();
  Variable var = filled(*device, shape, 0.5f, "var");
  const bool rowwise = c.op == Op::kRowwiseAdagrad;
  Variable s0 = filled(*device, rowwise ? TensorShape({c.rows}) : shape, 0.1f, "s0");
  const bool adam = c.op == Op::kAdam || c.op == Op::kLazyAdam;
  const int slots = slots_of(c.op);
  std::optional<Variable> s1;
  if (adam || slots == 2) s1 = filled(*device, shape, 0.f, "s1");
  std::mt19937_64 gen(20261125);
  std::vector<int64_t> ids(static_cast<size_t>(c.ids));
  for (int64_t& id : ids) id = static_cast<int64_t>(gen() % static_cast<uint64_t>(c.rows));
  const double unique = static_cast<double>(std::set<int64_t>(ids.begin(), ids.end()).size());
  const Tensor grad = uniform(*device, c.dense ? shape : TensorShape({c.ids, c.width}), 7);
  const IndexedSlices slices =
      c.dense ? IndexedSlices(Tensor::zeros(DType::kFloat, {0, c.width}, *device),
                              Tensor::from_vector<int64_t>({}).to(*device))
              : IndexedSlices(grad, Tensor::from_vector<int64_t>(ids).to(*device));
  const double row = 4.0 * static_cast<double>(c.width);
  double moved = 0;
  const bool second_group = c.op >= Op::kAdadelta;
  if (second_group) {
    moved = c.dense ? 4.0 * n * (3 + 2 * slots) : c.ids * row + unique * row * 2 * (1 + slots);
  } else if (c.dense) {
    moved = 4.0 * n * 7;
  } else if (c.op == Op::kAdagrad) {
    moved = c.ids * row + unique * row * 4;
  } else if (rowwise) {
    moved = c.ids * row + unique * (row * 2 + 8);
  } else if (c.op == Op::kLazyAdam) {
    moved = c.ids * row + unique * row * 6;
  } else {
    moved = c.ids * row + static_cast<double>(c.rows) * row * 6;
  }
  const size_t copy_bytes = static_cast<size_t>(std::min<double>(moved / 2, 512.0 * (1 << 20)));
  const double limit = c.gpu ? limit_gbps(Limit::kDeviceCopy, copy_bytes, device)
                             : limit_gbps(Limit::kHostMemcpy, copy_bytes);
  const UpdateOptions options{.deterministic = c.deterministic};
  const Tensor lr(0.01f), b1(0.9f), b2(0.999f), eps(1e-8f), b1p(0.9f), b2p(0.999f), rho(0.95f),
      l1(0.001f), l2(0.001f), step(int64_t{100});
  const int reps = moved >= 256e6 ? 2 : moved >= 32e6 ? 5 : c.gpu ? 50 : 10;
  // The moving average of var (its average another variable of var's size).
  std::optional<ExponentialMovingAverage> ema;
  varstate::Op maintain_average;
  if (c.op == Op::kMovingAverage) {
    ema.emplace(0.999);
    maintain_average = ema->apply({var});
    variables_initializer(ema->averages()).run();
  }
  run_timed(state, moved, limit, reps, c.gpu ? device : nullptr, [&] {
    switch (c.op) {
      case Op::kAdagrad:
        if (c.dense) {
          apply_adagrad(var, s0, lr, grad, options);
        } else {
          sparse_apply_adagrad(var, s0, lr, slices, options);
        }
        break;
      case Op::kRowwiseAdagrad:
        sparse_apply_rowwise_adagrad(var, s0, lr, slices, options);
        break;
      case Op::kAdam:
        if (c.dense) {
          apply_adam(var, s0, *s1, b1p, b2p, lr, b1, b2, eps, grad, false, options);
        } else {
          sparse_apply_adam(var, s0, *s1, b1p, b2p, lr, b1, b2, eps, slices, options);
        }
        break;
      case Op::kLazyAdam:
        sparse_apply_lazy_adam(var, s0, *s1, b1p, b2p, lr, b1, b2, eps, slices, options);
        break;
      case Op::kAdadelta:
        if (c.dense) {
          apply_adadelta(var, s0, *s1, lr, rho, eps, grad, options);
        } else {
          sparse_apply_adadelta(var, s0, *s1, lr, rho, eps, slices, options);
        }
        break;
      case Op::kProximalGradientDescent:
        if (c.dense) {
          apply_proximal_gradient_descent(var, lr, l1, l2, grad, options);
        } else {
          sparse_apply_proximal_gradient_descent(var, lr, l1, l2, slices, options);
        }
        break;
      case Op::kProximalAdagrad:
        if (c.dense) {
          apply_proximal_adagrad(var, s0, lr, l1, l2, grad, options);
        } else {
          sparse_apply_proximal_adagrad(var, s0, lr, l1, l2, slices, options);
        }
        break;
      case Op::kAdagradDA:
        if (c.dense) {
          apply_adagrad_da(var, s0, *s1, grad, lr, l1, l2, step, options);
        } else {
          sparse_apply_adagrad_da(var, s0, *s1, slices, lr, l1, l2, step, options);
        }
        break;
      case Op::kMovingAverage:
        maintain_average.run();
        break;
    }
  });
  var.sync();
  state.counters["steps_per_s"] = state.counters["GBps"] * 1e9 / moved;
}

void add(const Config& c) {
  benchmark::RegisterBenchmark(name_of(c).c_str(), [c](benchmark::State& s) { run(s, c); })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(5);
}

void register_for(bool gpu) {
  const int64_t rows = quick_run() ? 262'144 : 1'000'000;
  for (Op op : {Op::kAdagrad, Op::kAdam, Op::kLazyAdam, Op::kRowwiseAdagrad}) {
    for (bool det : {false, true}) {
      add({.gpu = gpu, .op = op, .deterministic = det, .rows = rows});
    }
  }
  add({.gpu = gpu, .op = Op::kAdam, .dense = true, .rows = (quick_run() ? 16 : 64) << 20});
  for (Op op :
       {Op::kAdadelta, Op::kProximalGradientDescent, Op::kProximalAdagrad, Op::kAdagradDA}) {
    add({.gpu = gpu, .op = op, .rows = rows});
    add({.gpu = gpu, .op = op, .dense = true, .rows = (quick_run() ? 16 : 64) << 20});
  }
  add({.gpu = gpu, .op = Op::kMovingAverage, .dense = true, .rows = (quick_run() ? 16 : 64) << 20});
}

const bool registered = [] {
  register_for(false);
  register_for(true);
  return true;
}();

}  // namespace
}  // namespace varstate::bench
