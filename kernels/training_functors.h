// The arithmetic of the training ops (optimizer updates), shared by the CPU
// and CUDA kernels so that both compute the same thing by construction.
//
// Each formula is TensorFlow's, written in the order its CPU kernel
// evaluates it (training_ops.cc for the Apply* / SparseApply* ops; the
// compat.v1 AdamOptimizer's Python graph for sparse Adam), so that float32
// and float64 results match TensorFlow's bit for bit wherever TensorFlow
// itself does not reorder (Eigen's vectorized rsqrt may round differently
// from 1/sqrt). Functors work on the compute type C: float for float16,
// bfloat16 and float32, double for float64; 16-bit values are widened on
// load and rounded on store. Compiled as C++17 by nvcc, C++20 by the host.
#pragma once

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "kernels/elementwise_functors.h"
#include "kernels/host16.h"

namespace varstate::kernels {

// Which update. The slots each op uses, in TrainingSlots order:
//   kGradientDescent   -
//   kMomentum          s0 = accum
//   kAdagrad           s0 = accum
//   kAdam, kLazyAdam   s0 = m, s1 = v
//   kRMSProp           s0 = ms, s1 = mom
//   kCenteredRMSProp   s0 = ms, s1 = mom, s2 = mg
//   kFtrl              s0 = accum, s1 = linear
//   kRowwiseAdagrad    s0 = accum, one element per row (not TensorFlow's)
//   kAdadelta          s0 = accum, s1 = accum_update
//   kProximalGradientDescent  -
//   kProximalAdagrad   s0 = accum
//   kAdagradDA         s0 = gradient_accumulator, s1 = gradient_squared_accumulator
//   kMovingAverage     -   (var is the average, g the averaged value, lr
//                          1 - decay: TensorFlow's assign_moving_average)
// kLazyAdam and kRowwiseAdagrad are varstate's, not TensorFlow's; nor is
// kMovingAverage an op of TensorFlow's, which builds it from Sub, Mul and
// AssignSub: the kernel rounds after each of the three as they do (to 16
// bits for the half types; float32 and float64 without a fused
// multiply-add).
enum class TrainingOp {
  kGradientDescent,
  kMomentum,
  kAdagrad,
  kAdam,
  kLazyAdam,
  kRMSProp,
  kCenteredRMSProp,
  kFtrl,
  kRowwiseAdagrad,
  kAdadelta,
  kProximalGradientDescent,
  kProximalAdagrad,
  kAdagradDA,
  kMovingAverage,
};

// The ops that branch on l1 > 0: TensorFlow's proximal (Fobos) step
// (proximal_step), and AdagradDA's closed form.
template <TrainingOp Op>
inline constexpr bool kProximal =
    Op == TrainingOp::kProximalGradientDescent || Op == TrainingOp::kProximalAdagrad ||
    Op == TrainingOp::kAdagradDA;

// The storage types the training ops are defined for: the floating types
// of TensorFlow's Apply*/SparseApply* CPU kernels (which also take complex
// types, except Ftrl; varstate's do not). The one list every backend
// instantiates and the runtime dispatches on.
#define VARSTATE_FOR_EACH_TRAINING_TYPE(X) \
  X(kHalf, ::varstate::half)               \
  X(kBFloat16, ::varstate::bfloat16)       \
  X(kFloat, float)                         \
  X(kDouble, double)

// The slots op uses (their count, in TrainingSlots order).
constexpr int training_slot_count(TrainingOp op) {
  switch (op) {
    case TrainingOp::kGradientDescent:
    case TrainingOp::kProximalGradientDescent:
    case TrainingOp::kMovingAverage:
      return 0;
    case TrainingOp::kMomentum:
    case TrainingOp::kAdagrad:
    case TrainingOp::kRowwiseAdagrad:
    case TrainingOp::kProximalAdagrad:
      return 1;
    case TrainingOp::kCenteredRMSProp:
      return 3;
    default:
      return 2;
  }
}

// Calls fn(std::integral_constant<TrainingOp, op>{}): one instantiation
// per op, so that kernels have no switch in their loops.
template <typename Fn>
void dispatch_training_op(TrainingOp op, Fn&& fn) {
  using O = TrainingOp;
  switch (op) {
#define VARSTATE_TRAINING_CASE(E) \
  case O::E:                      \
    return fn(std::integral_constant<O, O::E>{});
    VARSTATE_TRAINING_CASE(kGradientDescent)
    VARSTATE_TRAINING_CASE(kMomentum)
    VARSTATE_TRAINING_CASE(kAdagrad)
    VARSTATE_TRAINING_CASE(kAdam)
    VARSTATE_TRAINING_CASE(kLazyAdam)
    VARSTATE_TRAINING_CASE(kRMSProp)
    VARSTATE_TRAINING_CASE(kCenteredRMSProp)
    VARSTATE_TRAINING_CASE(kFtrl)
    VARSTATE_TRAINING_CASE(kRowwiseAdagrad)
    VARSTATE_TRAINING_CASE(kAdadelta)
    VARSTATE_TRAINING_CASE(kProximalGradientDescent)
    VARSTATE_TRAINING_CASE(kProximalAdagrad)
    VARSTATE_TRAINING_CASE(kAdagradDA)
    VARSTATE_TRAINING_CASE(kMovingAverage)
#undef VARSTATE_TRAINING_CASE
  }
}

// The compute type of storage (or device) type T.
template <typename T>
using training_compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// The scalar hyperparameters of every op, as the runtime read them (each
// is rounded to the variable's dtype before use, as TensorFlow's kernels
// receive them). Members an op does not use are ignored. Adam's step size
// alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power) is computed by the
// kernel in the variable's dtype.
struct TrainingHyper {
  double lr = 0;
  double beta1 = 0;  // Adam
  double beta2 = 0;
  double beta1_power = 0;
  double beta2_power = 0;
  double epsilon = 0;   // Adam, RMSProp, Adadelta
  double momentum = 0;  // Momentum, RMSProp
  double rho = 0;       // RMSProp's and Adadelta's decay
  double l1 = 0;        // Ftrl, the proximal ops
  double l2 = 0;
  double l2_shrinkage = 0;  // Ftrl: > 0 selects ApplyFtrlV2
  double lr_power = -0.5;
  double global_step = 0;     // AdagradDA: the step the update is for (>= 1)
  bool use_nesterov = false;  // Momentum, dense Adam
};

// The variable and its slots (null where the op has none), each with the
// variable's element count, except kRowwiseAdagrad's accum (one per row).
template <typename T>
struct TrainingSlots {
  T* var = nullptr;
  T* s0 = nullptr;
  T* s1 = nullptr;
  T* s2 = nullptr;
};

// The hyperparameters in compute type C, each rounded through T first.
template <typename C>
struct TrainingParams {
  C lr, alpha, beta1, beta2, one_minus_beta1, one_minus_beta2, epsilon, momentum, rho,
      one_minus_rho, l1, l2, two_l2, two_l2_shrinkage, lr_power, neg_lr_power;
  // Proximal gradient descent's constants: lr * l1 and 1 + l2 * lr.
  C lr_l1, one_plus_l2_lr;
  // AdagradDA's, T the global step: the dense kernel's T * l1 and
  // l2 * (T * lr) (T through float first, as TensorFlow's), the sparse
  // kernel's T and T * lr.
  C da_steps_l1, da_l2_steps_lr, da_steps, da_steps_lr;
  bool use_nesterov;
  bool shrinkage;
  bool sqrt_power;   // lr_power == -0.5: TensorFlow's sqrt special case
  bool l1_positive;  // the proximal ops: l1 > 0 selects the soft threshold
  // Proximal gradient descent: 1 + l2 * lr is exactly 1 (l2 = 0), so its
  // division changes nothing and is left out. (The dividend is always an
  // arithmetic result, never a signaling NaN, so x / 1 is x bit for bit.)
  bool unit_divisor;
};

// Rounds x to the storage (or device) type T and back: the identity when
// T is C, a rounding to 16 bits for the half types.
template <typename T, typename C>
VARSTATE_HD C round_through(C x) {
  if constexpr (std::is_same_v<T, C>) {
    return x;
  } else if constexpr (std::is_same_v<T, ::varstate::half>) {
    return static_cast<C>(host16_round_to_half(static_cast<float>(x)));
  } else if constexpr (kIsHalfLike<T>) {
    return static_cast<C>(host16_to_float(host16_from_float<T>(static_cast<float>(x))));
  } else {
    return static_cast<C>(static_cast<float>(T(static_cast<float>(x))));
  }
}

VARSTATE_HD float sqrt_of(float x) { return ::sqrtf(x); }
VARSTATE_HD double sqrt_of(double x) { return ::sqrt(x); }

// Host-side: the params of `h` for storage type T, compute type C.
template <typename T, typename C>
TrainingParams<C> training_params(const TrainingHyper& h) {
  auto r = [](double x) { return round_through<T, C>(static_cast<C>(x)); };
  TrainingParams<C> p{};
  p.lr = r(h.lr);
  p.beta1 = r(h.beta1);
  p.beta2 = r(h.beta2);
  p.one_minus_beta1 = round_through<T, C>(C(1) - p.beta1);
  p.one_minus_beta2 = round_through<T, C>(C(1) - p.beta2);
  const C b1p = r(h.beta1_power);
  const C b2p = r(h.beta2_power);
  p.alpha = round_through<T, C>(p.lr * sqrt_of(C(1) - b2p) / (C(1) - b1p));
  p.epsilon = r(h.epsilon);
  p.momentum = r(h.momentum);
  p.rho = r(h.rho);
  p.one_minus_rho = round_through<T, C>(C(1) - p.rho);
  p.l1 = r(h.l1);
  p.l2 = r(h.l2);
  p.two_l2 = round_through<T, C>(C(2) * p.l2);
  p.two_l2_shrinkage = round_through<T, C>(C(2) * r(h.l2_shrinkage));
  p.lr_power = r(h.lr_power);
  p.neg_lr_power = -p.lr_power;
  p.lr_l1 = round_through<T, C>(p.lr * p.l1);
  p.one_plus_l2_lr = round_through<T, C>(C(1) + round_through<T, C>(p.l2 * p.lr));
  // (var.constant(float(T)) is rounded to the dtype; float(T) * lr is a
  // float product, rounded once.)
  const auto steps_f = static_cast<C>(static_cast<float>(h.global_step));
  p.da_steps_l1 = round_through<T, C>(round_through<T, C>(steps_f) * p.l1);
  p.da_l2_steps_lr = round_through<T, C>(p.l2 * round_through<T, C>(steps_f * p.lr));
  p.da_steps = r(h.global_step);
  p.da_steps_lr = round_through<T, C>(p.da_steps * p.lr);
  p.use_nesterov = h.use_nesterov;
  p.shrinkage = h.l2_shrinkage > 0;
  p.sqrt_power = p.lr_power == C(-0.5);
  p.l1_positive = p.l1 > C(0);
  p.unit_divisor = p.one_plus_l2_lr == C(1);
  return p;
}

// Eigen's sign(), abs() and cwiseMax(0) as the l1 steps below use them, in
// selects the loops vectorize: a NaN has sign 0 and is not above 0.
template <typename C>
VARSTATE_HD C sign_of(C x) {
  return x > C(0) ? C(1) : (x < C(0) ? C(-1) : C(0));
}
template <typename C>
VARSTATE_HD C abs_of(C x) {
  return x < C(0) ? -x : x;
}
template <typename C>
VARSTATE_HD C positive_part(C x) {
  return x > C(0) ? x : C(0);
}

// The proximal ops' step from prox = var - g * step_lr (TensorFlow's Fobos
// update): with l1 > 0 the soft threshold sign(prox) * max(|prox| - l1_lr,
// 0), then (unless `divide` is false: a divisor of exactly 1) the division
// by one_plus_l2_lr.
template <typename C>
VARSTATE_HD C proximal_step(C prox, C l1_lr, C one_plus_l2_lr, bool l1_positive,
                            bool divide = true) {
  const C shrunk = l1_positive ? sign_of(prox) * positive_part(abs_of(prox) - l1_lr) : prox;
  return divide ? shrunk / one_plus_l2_lr : shrunk;
}

// One element's update with gradient g, S the storage type (void: C
// itself), for kMovingAverage's roundings. `Sparse` selects the formulas of
// the sparse kernels where TensorFlow's differ from the dense ones
// (RMSProp's, and Adam's compat.v1 sparse graph). kGradientDescent's
// sparse form is a scatter_sub in the runtime; kRowwiseAdagrad is per row
// (rowwise_adagrad_element).
template <TrainingOp Op, bool Sparse, typename S = void, typename C>
VARSTATE_HD void apply_element(const TrainingParams<C>& p, C g, C& var, C& s0, C& s1, C& s2) {
  if constexpr (Op == TrainingOp::kGradientDescent) {
    var = var - g * p.lr;
  } else if constexpr (Op == TrainingOp::kMomentum) {
    s0 = s0 * p.momentum + g;
    if (p.use_nesterov && Sparse) {
      var = var - (g * p.lr + s0 * (p.momentum * p.lr));  // SparseApplyMomentum's order
    } else if (p.use_nesterov) {
      var = var - (g * p.lr + s0 * p.momentum * p.lr);
    } else {
      var = var - s0 * p.lr;
    }
  } else if constexpr (Op == TrainingOp::kAdagrad) {
    s0 = s0 + g * g;
    var = var - g * p.lr * (C(1) / sqrt_of(s0));
  } else if constexpr (Op == TrainingOp::kAdam && !Sparse) {
    s0 = s0 + (g - s0) * p.one_minus_beta1;
    s1 = s1 + (g * g - s1) * p.one_minus_beta2;
    if (p.use_nesterov) {
      var = var - ((g * p.one_minus_beta1 + p.beta1 * s0) * p.alpha) / (sqrt_of(s1) + p.epsilon);
    } else {
      var = var - (s0 * p.alpha) / (sqrt_of(s1) + p.epsilon);
    }
  } else if constexpr (Op == TrainingOp::kAdam) {
    // The compat.v1 graph computes (g * g) * (1 - beta2); TensorFlow's
    // graph optimizer (on by default) reassociates it to g * (g * (1 - beta2)).
    s0 = s0 * p.beta1 + g * p.one_minus_beta1;
    s1 = s1 * p.beta2 + g * (g * p.one_minus_beta2);
    var = var - (p.alpha * s0) / (sqrt_of(s1) + p.epsilon);
  } else if constexpr (Op == TrainingOp::kLazyAdam) {
    s0 = s0 * p.beta1 + g * p.one_minus_beta1;
    s1 = s1 * p.beta2 + (g * g) * p.one_minus_beta2;
    var = var - (p.alpha * s0) / (sqrt_of(s1) + p.epsilon);
  } else if constexpr (Op == TrainingOp::kRMSProp && !Sparse) {
    s0 = s0 + (g * g - s0) * p.one_minus_rho;
    s1 = s1 * p.momentum + (g * p.lr) / sqrt_of(s0 + p.epsilon);
    var = var - s1;
  } else if constexpr (Op == TrainingOp::kRMSProp) {
    s0 = s0 * p.rho + (g * g) * p.one_minus_rho;
    s1 = s1 * p.momentum + (C(1) / sqrt_of(s0 + p.epsilon)) * p.lr * g;
    var = var - s1;
  } else if constexpr (Op == TrainingOp::kCenteredRMSProp && !Sparse) {
    s0 = s0 + (g * g - s0) * p.one_minus_rho;
    s2 = s2 + (g - s2) * p.one_minus_rho;
    s1 = s1 * p.momentum + (g * p.lr) / sqrt_of((s0 - s2 * s2) + p.epsilon);
    var = var - s1;
  } else if constexpr (Op == TrainingOp::kCenteredRMSProp) {
    s0 = s0 * p.rho + (g * g) * p.one_minus_rho;
    s2 = s2 * p.rho + g * p.one_minus_rho;
    s1 = s1 * p.momentum + (C(1) / sqrt_of((s0 - s2 * s2) + p.epsilon)) * p.lr * g;
    var = var - s1;
  } else if constexpr (Op == TrainingOp::kFtrl) {
    const C gs = p.shrinkage ? g + p.two_l2_shrinkage * var : g;
    const C new_accum = s0 + g * g;
    const C new_pow = p.sqrt_power ? sqrt_of(new_accum) : pow_of(new_accum, p.neg_lr_power);
    const C old_pow = p.sqrt_power ? sqrt_of(s0) : pow_of(s0, p.neg_lr_power);
    s1 = s1 + (gs - (new_pow - old_pow) / p.lr * var);
    const C upper = s1 < p.l1 ? s1 : p.l1;
    const C clamped = upper > -p.l1 ? upper : -p.l1;
    var = (clamped - s1) / (new_pow / p.lr + p.two_l2);
    s0 = new_accum;
  } else if constexpr (Op == TrainingOp::kAdadelta) {
    // ApplyAdadelta's and SparseApplyAdadelta's order; TensorFlow's
    // (accum + epsilon).rsqrt() is the CPU's approximate rsqrt.
    s0 = s0 * p.rho + (g * g) * p.one_minus_rho;
    const C update = sqrt_of(s1 + p.epsilon) * (C(1) / sqrt_of(s0 + p.epsilon)) * g;
    var = var - update * p.lr;
    s1 = s1 * p.rho + (update * update) * p.one_minus_rho;
  } else if constexpr (Op == TrainingOp::kMovingAverage) {
    // TensorFlow's Sub, Mul and AssignSub, each rounded to the dtype.
    using Storage = std::conditional_t<std::is_void_v<S>, C, S>;
    const C diff = round_through<Storage, C>(var - g);
    var = var - round_through<Storage, C>(diff * p.lr);
  } else if constexpr (Op == TrainingOp::kProximalGradientDescent) {
    var = proximal_step(var - g * p.lr, p.lr_l1, p.one_plus_l2_lr, p.l1_positive, !p.unit_divisor);
  } else if constexpr (Op == TrainingOp::kProximalAdagrad) {
    // The learning rate lr * accum.rsqrt() (approximate in TensorFlow's
    // CPU kernel, as Adagrad's), then ProximalGradientDescent's step with
    // it, each product per element.
    s0 = s0 + g * g;
    const C step_lr = p.lr * (C(1) / sqrt_of(s0));
    var = proximal_step(var - g * step_lr, step_lr * p.l1, C(1) + p.l2 * step_lr, p.l1_positive);
  } else if constexpr (Op == TrainingOp::kAdagradDA) {
    // The accumulators, then var in closed form from them. TensorFlow's
    // dense and sparse kernels write the same formula two ways: dense
    // -lr * sign(g) * max(|g| - T * l1, 0) / (l2 * T * lr + sqrt(gg)),
    // sparse -sign(g) * max(|g| / T - l1, 0) / (l2 + sqrt(gg) / (T * lr)).
    s0 = s0 + g;
    s1 = s1 + g * g;
    if constexpr (Sparse) {
      const C num = p.l1_positive ? -sign_of(s0) * positive_part(abs_of(s0) / p.da_steps - p.l1)
                                  : -(s0 / p.da_steps);
      var = num / (p.l2 + sqrt_of(s1) / p.da_steps_lr);
    } else {
      const C num = p.l1_positive
                        ? (-p.lr * sign_of(s0)) * positive_part(abs_of(s0) - p.da_steps_l1)
                        : -(p.lr * s0);
      var = num / (p.da_l2_steps_lr + sqrt_of(s1));
    }
  }
}

// Widening load and rounding store between a storage (or device) type T
// and the compute type C.
template <typename C, typename T>
VARSTATE_HD C load_as(T x) {
  if constexpr (std::is_same_v<T, C>) {
    return x;
  } else if constexpr (kIsHalfLike<T>) {
    return static_cast<C>(host16_to_float(x));
  } else {
    return static_cast<C>(static_cast<float>(x));
  }
}
template <typename T, typename C>
VARSTATE_HD T store_as(C x) {
  if constexpr (std::is_same_v<T, C>) {
    return x;
  } else if constexpr (kIsHalfLike<T>) {
    return host16_from_float<T>(static_cast<float>(x));
  } else {
    return T(static_cast<float>(x));
  }
}

// apply_element on element i of the variable and the slots Op uses.
template <TrainingOp Op, bool Sparse, typename T, typename C>
VARSTATE_HD void update_element(const TrainingParams<C>& p, const TrainingSlots<T>& s, int64_t i,
                                C g) {
  constexpr int kSlots = training_slot_count(Op);
  C var = load_as<C>(s.var[i]);
  C a = kSlots > 0 ? load_as<C>(s.s0[i]) : C(0);
  C b = kSlots > 1 ? load_as<C>(s.s1[i]) : C(0);
  C c = kSlots > 2 ? load_as<C>(s.s2[i]) : C(0);
  apply_element<Op, Sparse, T>(p, g, var, a, b, c);
  s.var[i] = store_as<T>(var);
  if constexpr (kSlots > 0) s.s0[i] = store_as<T>(a);
  if constexpr (kSlots > 1) s.s1[i] = store_as<T>(b);
  if constexpr (kSlots > 2) s.s2[i] = store_as<T>(c);
}

// Adam's compat.v1 sparse update of an element whose row has no gradient
// in the batch: the decays still apply to every row (TensorFlow's graph
// assigns m * beta1 and v * beta2 to the whole slot, then scatters).
// adam_decay_value computes it on values in the compute type (each then
// rounded once to T by its caller).
template <typename C>
VARSTATE_HD void adam_decay_value(const TrainingParams<C>& p, C& var, C& m, C& v) {
  m = m * p.beta1;
  v = v * p.beta2;
  var = var - (p.alpha * m) / (sqrt_of(v) + p.epsilon);
}
template <typename T, typename C>
VARSTATE_HD void adam_decay_element(const TrainingParams<C>& p, const TrainingSlots<T>& s,
                                    int64_t i) {
  C var = load_as<C>(s.var[i]), m = load_as<C>(s.s0[i]), v = load_as<C>(s.s1[i]);
  adam_decay_value(p, var, m, v);
  s.var[i] = store_as<T>(var);
  s.s0[i] = store_as<T>(m);
  s.s1[i] = store_as<T>(v);
}

// Row-wise Adagrad (not TensorFlow's): the row's accumulator grows by the
// mean of g^2 over the row (`mean_square`, summed in column order then
// divided by the row width); each element then moves as Adagrad's would,
// with the row's new accumulator.
// `grad_at(c)` gives the row's gradient at column c.
template <typename T, typename C, typename G>
VARSTATE_HD void rowwise_adagrad_row(const TrainingParams<C>& p, const TrainingSlots<T>& s,
                                     int64_t row, int64_t width, const G& grad_at) {
  C sum = 0;
  for (int64_t c = 0; c < width; ++c) {
    const C g = grad_at(c);
    sum = sum + g * g;
  }
  const T accum = store_as<T>(load_as<C>(s.s0[row]) + (width > 0 ? sum / C(width) : C(0)));
  s.s0[row] = accum;
  const C rsqrt = C(1) / sqrt_of(load_as<C>(accum));
  for (int64_t c = 0; c < width; ++c) {
    const int64_t i = row * width + c;
    s.var[i] = store_as<T>(load_as<C>(s.var[i]) - grad_at(c) * p.lr * rsqrt);
  }
}

}  // namespace varstate::kernels
