#include "varstate/learning_rate_decay.h"

#include <cmath>
#include <string>
#include <utility>

#include "varstate/error.h"

// Every formula below is TensorFlow's schedule (its Keras
// learning_rate_schedule classes, which tf.compat.v1.train's decay
// functions call), one rounded operation per TensorFlow op, in the order
// its graph evaluates them, as TensorFlow's graph optimizer (on by
// default) leaves it: that optimizer turns a division by a constant into a
// multiplication by the constant's reciprocal (div_by_constant), which
// rounds differently from the division, and a power by some constant
// exponents into an exact form (pow_by_constant). This file is built with
// -ffp-contract=off: no multiply-add is fused, as none is in TensorFlow's
// scalar kernels.

namespace varstate {
namespace {

// A Python number given to math_ops.cast(x, T): converted to a tensor on
// its own first (an int to int32 or int64, exact; a float to float32),
// then cast to T.
template <typename T>
T cast_number(double x) {
  if (std::floor(x) == x && std::fabs(x) < 9.2e18) return static_cast<T>(x);
  return static_cast<T>(static_cast<float>(x));
}

// The float32 constant_op.constant(math.pi) of TensorFlow's cosine
// schedules, in T.
template <typename T>
T pi_constant() {
  return static_cast<T>(static_cast<float>(M_PI));
}

// The C library's functions of T (cosf for float, cos for double, ...), as
// Eigen's scalar kernels call them.
template <typename T>
T cos_of(T x) {
  return std::cos(x);
}
template <typename T>
T log_of(T x) {
  return std::log(x);
}
template <typename T>
T pow_of(T x, T y) {
  return std::pow(x, y);
}

// x / c where c is a constant of TensorFlow's graph: x * (1 / c), as
// TensorFlow's graph optimizer rewrites it.
template <typename T>
T div_by_constant(T x, T c) {
  return x * (T(1) / c);
}

// pow(x, c) for an exponent c that is a constant of TensorFlow's graph:
// its graph optimizer replaces Pow by an exact form for some exponents.
template <typename T>
T pow_by_constant(T x, T c) {
  if (c == T(1)) return x;
  if (c == T(2)) return x * x;
  if (c == T(0.5)) return std::sqrt(x);
  if (c == T(-0.5)) return T(1) / std::sqrt(x);
  if (c == T(-1)) return T(1) / x;
  if (c == T(0)) return T(1);
  return pow_of(x, c);
}

// The value of a real scalar tensor `t` (named `what` in errors) cast to
// dtype, as TensorFlow's math_ops.cast.
Tensor real_scalar(const Tensor& t, const std::string& what, const std::string& schedule) {
  if (!t.valid() || t.rank() != 0 || !dtype_is_numeric(t.dtype()) || dtype_is_complex(t.dtype())) {
    throw InvalidArgumentError(
        schedule + ": " + what + " is not a real scalar: " +
        (t.valid() ? std::string(dtype_name(t.dtype())) + " " + t.shape().to_string()
                   : std::string("an empty tensor")));
  }
  return t.to_host();
}

// A schedule computing fn(learning_rate, step) in the learning rate's
// dtype (float32 or float64) at every read.
template <typename Fn>
Hyperparameter make_schedule(const std::string& name, Hyperparameter learning_rate,
                             Variable global_step, Fn fn) {
  auto schedule = [name, learning_rate = std::move(learning_rate),
                   global_step = std::move(global_step), fn]() -> Tensor {
    const Tensor lr = real_scalar(learning_rate.tensor(), "learning_rate", name);
    const Tensor step =
        real_scalar(global_step.value(), "global_step " + quoted(global_step.op_name()), name);
    if (lr.dtype() == DType::kFloat) {
      const float out = fn(lr.scalar<float>(), step.cast(DType::kFloat).scalar<float>());
      return Tensor::from_vector<float>({out}, {});
    }
    if (lr.dtype() == DType::kDouble) {
      const double out = fn(lr.scalar<double>(), step.cast(DType::kDouble).scalar<double>());
      return Tensor::from_vector<double>({out}, {});
    }
    throw InvalidArgumentError(name + ": learning_rate must be float32 or float64, got " +
                               std::string(dtype_name(lr.dtype())));
  };
  return Hyperparameter(std::move(schedule), name);
}

// ExponentialDecay's p: step / decay_steps, floored with staircase.
template <typename T>
T decay_exponent(T step, double decay_steps, bool staircase) {
  const T p = div_by_constant(step, cast_number<T>(decay_steps));
  return staircase ? std::floor(p) : p;
}

}  // namespace

// ExponentialDecay: learning_rate * rate ^ p (rate cast as a Python number).
static Hyperparameter exponential_schedule(const std::string& name, Hyperparameter learning_rate,
                                           Variable global_step, double decay_steps, double rate,
                                           bool staircase) {
  return make_schedule(name, std::move(learning_rate), std::move(global_step),
                       [=](auto lr, auto step) {
                         using T = decltype(lr);
                         const T p = decay_exponent(step, decay_steps, staircase);
                         return lr * pow_of(cast_number<T>(rate), p);
                       });
}

Hyperparameter exponential_decay(Hyperparameter learning_rate, Variable global_step,
                                 double decay_steps, double decay_rate, bool staircase) {
  return exponential_schedule("exponential_decay", std::move(learning_rate), std::move(global_step),
                              decay_steps, decay_rate, staircase);
}

Hyperparameter natural_exp_decay(Hyperparameter learning_rate, Variable global_step,
                                 double decay_steps, double decay_rate, bool staircase) {
  // math_ops.exp(math_ops.negative(decay_rate)): a float32 tensor, which
  // ExponentialDecay casts to the learning rate's dtype (a float converts
  // to double and back exactly).
  const float rate = std::exp(-static_cast<float>(decay_rate));
  return exponential_schedule("natural_exp_decay", std::move(learning_rate), std::move(global_step),
                              decay_steps, rate, staircase);
}

Hyperparameter inverse_time_decay(Hyperparameter learning_rate, Variable global_step,
                                  double decay_steps, double decay_rate, bool staircase) {
  return make_schedule("inverse_time_decay", std::move(learning_rate), std::move(global_step),
                       [=](auto lr, auto step) {
                         using T = decltype(lr);
                         const T p = decay_exponent(step, decay_steps, staircase);
                         const T denom = T(1) + cast_number<T>(decay_rate) * p;
                         return lr / denom;
                       });
}

Hyperparameter polynomial_decay(Hyperparameter learning_rate, Variable global_step,
                                double decay_steps, double end_learning_rate, double power,
                                bool cycle) {
  // A number learning rate makes lr - end a constant of the graph.
  const bool constant_rate = learning_rate.is_number();
  return make_schedule(
      "polynomial_decay", std::move(learning_rate), std::move(global_step),
      [=](auto lr, auto step) {
        using T = decltype(lr);
        const T end = cast_number<T>(end_learning_rate);
        const T pw = cast_number<T>(power);
        T steps = cast_number<T>(decay_steps);
        if (cycle) {
          // step / self.decay_steps: the Python number
          // converted to T directly.
          const T multiplier =
              step == T(0) ? T(1) : std::ceil(div_by_constant(step, static_cast<T>(decay_steps)));
          steps = steps * multiplier;
          step = step / steps;
        } else {
          step = div_by_constant(step < steps ? step : steps, steps);
        }
        const T p = step;
        const T scale = lr - end;
        const T base = T(1) - p;
        if (pw == T(3)) {
          // The graph optimizer's cube: Square(base) times
          // base, and with a constant scale the scale
          // moved onto the second factor.
          const T square = base * base;
          return (constant_rate ? square * (scale * base) : (square * base) * scale) + end;
        }
        return scale * pow_by_constant(base, pw) + end;
      });
}

Hyperparameter cosine_decay(Hyperparameter learning_rate, Variable global_step, double decay_steps,
                            double alpha) {
  return make_schedule(
      "cosine_decay", std::move(learning_rate), std::move(global_step), [=](auto lr, auto step) {
        using T = decltype(lr);
        const T steps = cast_number<T>(decay_steps);
        step = step < steps ? step : steps;
        const T completed = div_by_constant(step, steps);
        const T cosine = T(0.5) * (T(1) + cos_of(pi_constant<T>() * completed));
        // (1 - self.alpha) in Python, then converted.
        const T decayed = static_cast<T>(1.0 - alpha) * cosine + static_cast<T>(alpha);
        return lr * decayed;
      });
}

Hyperparameter cosine_decay_restarts(Hyperparameter learning_rate, Variable global_step,
                                     double first_decay_steps, double t_mul, double m_mul,
                                     double alpha) {
  return make_schedule(
      "cosine_decay_restarts", std::move(learning_rate), std::move(global_step),
      [=](auto lr, auto step) {
        using T = decltype(lr);
        const T first = cast_number<T>(first_decay_steps);
        const T a = cast_number<T>(alpha);
        const T tm = cast_number<T>(t_mul);
        const T mm = cast_number<T>(m_mul);
        T completed = div_by_constant(step, first);
        T restart;
        if (tm == T(1)) {
          restart = std::floor(completed);
          completed = completed - restart;
        } else {
          restart = std::floor(div_by_constant(log_of(T(1) - completed * (T(1) - tm)), log_of(tm)));
          const T sum_r = div_by_constant(T(1) - pow_of(tm, restart), T(1) - tm);
          completed = (completed - sum_r) / pow_of(tm, restart);
        }
        const T m_fac = pow_of(mm, restart);
        // (1 - alpha) * (0.5 * m_fac * (1 + cos)) + alpha, with the graph
        // optimizer's constant push-down: the constants 1 - alpha and 0.5
        // multiplied first.
        const T scale = T(0.5) * (T(1) - a);
        const T decayed = (scale * m_fac) * (T(1) + cos_of(pi_constant<T>() * completed)) + a;
        return lr * decayed;
      });
}

Hyperparameter linear_cosine_decay(Hyperparameter learning_rate, Variable global_step,
                                   double decay_steps, double num_periods, double alpha,
                                   double beta) {
  return make_schedule("linear_cosine_decay", std::move(learning_rate), std::move(global_step),
                       [=](auto lr, auto step) {
                         using T = decltype(lr);
                         const T steps = cast_number<T>(decay_steps);
                         const T periods = cast_number<T>(num_periods);
                         const T a = cast_number<T>(alpha);
                         const T b = cast_number<T>(beta);
                         step = step < steps ? step : steps;
                         const T linear = div_by_constant(steps - step, steps);
                         const T completed = div_by_constant(step, steps);
                         const T fraction = T(2) * periods * completed;
                         const T cosine = T(0.5) * (T(1) + cos_of(pi_constant<T>() * fraction));
                         return lr * ((a + linear) * cosine + b);
                       });
}

Hyperparameter piecewise_constant(Variable x, std::vector<double> boundaries,
                                  std::vector<double> values) {
  const std::string name = "piecewise_constant";
  if (boundaries.empty()) throw ValueError(name + ": boundaries is empty");
  if (values.size() != boundaries.size() + 1) {
    throw ValueError(name + ": the length of boundaries should be 1 less than the length of " +
                     "values: " + std::to_string(boundaries.size()) + " boundaries, " +
                     std::to_string(values.size()) + " values");
  }
  const DType dtype = x.dtype();
  if (!dtype_is_numeric(dtype) || dtype_is_complex(dtype)) {
    throw ValueError(name + ": x " + quoted(x.op_name()) + " must be a real scalar, got " +
                     std::string(dtype_name(dtype)));
  }
  const bool integral = dtype_is_integer(dtype);
  for (size_t i = 0; i < boundaries.size(); ++i) {
    if (integral && std::floor(boundaries[i]) != boundaries[i]) {
      throw ValueError(name + ": boundaries[" + std::to_string(i) +
                       "] = " + std::to_string(boundaries[i]) + " must have the same dtype as x (" +
                       std::string(dtype_name(dtype)) + ")");
    }
  }
  auto schedule = [name, x = std::move(x), boundaries = std::move(boundaries),
                   values = std::move(values), integral]() -> Tensor {
    const Tensor t = real_scalar(x.value(), "x " + quoted(x.op_name()), name);
    // Compare in x's dtype: int64 for integers, else x's float type (a
    // Python float boundary converted to it).
    auto pick = [&](auto v, auto convert) {
      size_t i = 0;
      while (i < boundaries.size() && v > convert(boundaries[i])) ++i;
      return static_cast<float>(values[i]);
    };
    float out;
    if (integral) {
      out = pick(t.cast(DType::kInt64).scalar<int64_t>(),
                 [](double b) { return static_cast<int64_t>(b); });
    } else if (t.dtype() == DType::kDouble) {
      out = pick(t.scalar<double>(), [](double b) { return b; });
    } else {
      out = pick(t.cast(DType::kFloat).scalar<float>(),
                 [](double b) { return static_cast<float>(b); });
    }
    return Tensor::from_vector<float>({out}, {});
  };
  return Hyperparameter(std::move(schedule), name);
}

}  // namespace varstate
