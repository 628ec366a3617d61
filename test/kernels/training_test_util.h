// Shared by the CPU and GPU training-op kernel tests: seeded inputs that
// keep every op's arithmetic finite (positive accumulators, RMSProp's
// centered denominator above zero) and the naive reference loop, which
// applies kernels/training_functors.h one element at a time after summing
// duplicate gradient rows in their original order with a std::map.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/training_functors.h"
#include "scatter_test_util.h"

namespace varstate::testing {

using kernels::TrainingOp;

inline const std::vector<TrainingOp>& all_training_ops() {
  static const std::vector<TrainingOp> ops = {TrainingOp::kGradientDescent,
                                              TrainingOp::kMomentum,
                                              TrainingOp::kAdagrad,
                                              TrainingOp::kAdam,
                                              TrainingOp::kLazyAdam,
                                              TrainingOp::kRMSProp,
                                              TrainingOp::kCenteredRMSProp,
                                              TrainingOp::kFtrl,
                                              TrainingOp::kRowwiseAdagrad,
                                              TrainingOp::kAdadelta,
                                              TrainingOp::kProximalGradientDescent,
                                              TrainingOp::kProximalAdagrad,
                                              TrainingOp::kAdagradDA,
                                              TrainingOp::kMovingAverage};
  return ops;
}

// The ops whose s1 is a sum of squares (Adam's v, Adadelta's accum_update,
// AdagradDA's gradient_squared_accumulator): their test data keeps it >= 0,
// so that its square root is a number.
inline bool squares_in_s1(TrainingOp op) {
  return op == TrainingOp::kAdam || op == TrainingOp::kLazyAdam || op == TrainingOp::kAdadelta ||
         op == TrainingOp::kAdagradDA;
}

inline kernels::TrainingHyper test_hyper(bool nesterov, double lr_power = -0.5,
                                         double shrinkage = 0, double l1 = 0.01, double l2 = 0.02) {
  kernels::TrainingHyper h;
  h.lr = 0.05;
  h.beta1 = 0.9;
  h.beta2 = 0.999;
  h.beta1_power = 0.81;
  h.beta2_power = 0.998;
  h.epsilon = 1e-7;
  h.momentum = 0.5;
  h.rho = 0.9;
  h.l1 = l1;
  h.l2 = l2;
  h.l2_shrinkage = shrinkage;
  h.lr_power = lr_power;
  h.global_step = 3;
  h.use_nesterov = nesterov;
  return h;
}

// The variable, three slots and a gradient of n elements (the row-wise
// accumulator has `rows` elements), as host vectors of T.
template <typename T>
struct TrainingData {
  std::vector<T> var, s0, s1, s2, grad;

  kernels::TrainingSlots<T> slots() { return {var.data(), s0.data(), s1.data(), s2.data()}; }
};

template <typename T>
TrainingData<T> training_data(int64_t n, int64_t rows, int64_t grad_elements, uint64_t seed,
                              TrainingOp op = TrainingOp::kGradientDescent) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> sym(-1.f, 1.f), pos(0.1f, 1.f);
  TrainingData<T> d;
  auto fill = [&](std::vector<T>& v, int64_t count, auto& dist, float scale) {
    v.resize(count);
    for (auto& x : v) x = T(dist(gen) * scale);
  };
  fill(d.var, n, sym, 1.f);
  fill(d.s0, std::max(n, rows), pos, 1.f);  // accumulators, ms: positive
  fill(d.s1, n, sym, 0.5f);
  fill(d.s2, n, sym, 0.1f);  // mg^2 < ms
  fill(d.grad, grad_elements, sym, 1.f);
  if (squares_in_s1(op)) {
    for (auto& x : d.s1) x = T(std::fabs(static_cast<float>(x)));
  }
  return d;
}

// The reference: dense applies element by element; sparse sums each row's
// gradient rows (from zero, rounding to T after each addition) then applies,
// and compat.v1 Adam decays the rows without a gradient.
template <typename T, typename Index>
void reference_apply(TrainingOp op, const kernels::TrainingHyper& h, TrainingData<T>& d,
                     int64_t rows, int64_t width, const std::vector<Index>* indices) {
  using C = kernels::training_compute_t<T>;
  const auto p = kernels::training_params<T, C>(h);
  auto s = d.slots();
  std::map<int64_t, std::vector<C>> summed;
  if (indices == nullptr) {
    for (int64_t r = 0; r < rows; ++r) {
      auto& g = summed[r];
      for (int64_t c = 0; c < width; ++c) g.push_back(kernels::load_as<C>(d.grad[r * width + c]));
    }
  } else {
    for (size_t i = 0; i < indices->size(); ++i) {
      auto [it, fresh] = summed.try_emplace((*indices)[i], std::vector<C>(width, C(0)));
      for (int64_t c = 0; c < width; ++c) {
        it->second[c] =
            kernels::round_through<T>(it->second[c] + kernels::load_as<C>(d.grad[i * width + c]));
      }
    }
  }
  const bool sparse = indices != nullptr;
  kernels::dispatch_training_op(op, [&](auto tag) {
    constexpr TrainingOp kOp = decltype(tag)::value;
    for (int64_t r = 0; r < rows; ++r) {
      auto it = summed.find(r);
      if constexpr (kOp == TrainingOp::kRowwiseAdagrad) {
        if (it == summed.end()) continue;
        const auto& g = it->second;
        kernels::rowwise_adagrad_row(p, s, r, width, [&g](int64_t c) { return g[c]; });
      } else {
        for (int64_t c = 0; c < width; ++c) {
          const int64_t i = r * width + c;
          if (it != summed.end()) {
            if (sparse) {
              kernels::update_element<kOp, true>(p, s, i, it->second[c]);
            } else {
              kernels::update_element<kOp, false>(p, s, i, it->second[c]);
            }
          } else if (kOp == TrainingOp::kAdam) {
            kernels::adam_decay_element(p, s, i);
          }
        }
      }
    }
  });
}

// Byte-exact equality of two vectors, naming the first difference. Two NaNs
// are equal whatever their sign and payload: a GPU's conversions produce the
// canonical NaN, the CPU's keep the sign (kernels/cuda/scatter.h).
template <typename T>
std::string training_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(to_double(a[i])) && std::isnan(to_double(b[i]))) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      return "element " + std::to_string(i) + ": " + std::to_string(to_double(a[i])) + " vs " +
             std::to_string(to_double(b[i]));
    }
  }
  return "";
}

}  // namespace varstate::testing
