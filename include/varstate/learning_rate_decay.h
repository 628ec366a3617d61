// Learning rates that follow the global step: TensorFlow 1.x's decay
// functions (tf.compat.v1.train.exponential_decay, piecewise_constant, ...).
//
//   Variable step = get_or_create_global_step();
//   GradientDescentOptimizer sgd(exponential_decay(0.1, step, 1000, 0.96, true));
//   sgd.apply_gradients(grads_and_vars, &step);   // lr = 0.1 * 0.96^floor(step / 1000)
//
// Each returns a Hyperparameter (varstate/optimizer.h) that computes the
// rate from the step variable's value whenever it is read: an optimizer
// reads it at every apply_gradients, as TensorFlow's graph evaluates the
// decayed rate at every run of the training op. It can also be read
// directly (value(), tensor()).
//
// The arithmetic is TensorFlow's, operation by operation, in the dtype of
// `learning_rate` (float32 for a number, as a Python float; a Variable's
// own dtype, float32 or float64), with the step cast to it and the
// other numbers converted as TensorFlow converts Python numbers (a
// number combined with a tensor becomes one of the tensor's dtype; a
// number computed from numbers is computed in double first, as Python
// does), in the form TensorFlow's graph optimizer (on by default) gives
// the graph: a division by a constant is a multiplication by its
// reciprocal, a power by 0.5, 1, 2 or 3 a square root or products, and the
// restarts' constants are multiplied together first. The rates equal
// TensorFlow 2.21's bit for bit (the interop suite compares 21 schedules
// at each of 2,500 steps); cos, exp, log and pow are the C library's, as
// TensorFlow's CPU kernels call them. (TensorFlow's cosine schedules take
// float32 rates only; here float64 too, with TensorFlow's float32 pi.)
//
// Errors: ValueError for piecewise_constant's boundaries and values of
// mismatched lengths or dtypes, when the schedule is made (as TensorFlow
// raises it when it builds the graph); at a read, InvalidArgumentError for
// a step or learning rate that is not a real scalar (a learning rate must
// be float32 or float64), naming it. A decay_steps of 0 divides by zero,
// as in TensorFlow (inf or NaN rates).
//
// TensorFlow's noisy_linear_cosine_decay draws a normal sample at every
// evaluation from its own random stream, which nothing outside TensorFlow
// reproduces; it is not provided.
#pragma once

#include <cstdint>
#include <vector>

#include "varstate/optimizer.h"  // Hyperparameter
#include "varstate/variable.h"

namespace varstate {

// learning_rate * decay_rate ^ (step / decay_steps), the exponent floored
// with staircase.
Hyperparameter exponential_decay(Hyperparameter learning_rate, Variable global_step,
                                 double decay_steps, double decay_rate, bool staircase = false);

// exponential_decay with decay rate exp(-decay_rate) (float32).
Hyperparameter natural_exp_decay(Hyperparameter learning_rate, Variable global_step,
                                 double decay_steps, double decay_rate, bool staircase = false);

// learning_rate / (1 + decay_rate * step / decay_steps), the quotient
// floored with staircase.
Hyperparameter inverse_time_decay(Hyperparameter learning_rate, Variable global_step,
                                  double decay_steps, double decay_rate, bool staircase = false);

// (learning_rate - end) * (1 - step / decay_steps) ^ power + end, the step
// held at decay_steps; with cycle, decay_steps is the first multiple of it
// at or above the step (1x at step 0) instead.
Hyperparameter polynomial_decay(Hyperparameter learning_rate, Variable global_step,
                                double decay_steps, double end_learning_rate = 0.0001,
                                double power = 1.0, bool cycle = false);

// learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step,
// decay_steps) / decay_steps)) + alpha).
Hyperparameter cosine_decay(Hyperparameter learning_rate, Variable global_step, double decay_steps,
                            double alpha = 0.0);

// Cosine decay with warm restarts (SGDR): periods of first_decay_steps,
// each t_mul times longer and its rate m_mul times smaller than the one
// before.
Hyperparameter cosine_decay_restarts(Hyperparameter learning_rate, Variable global_step,
                                     double first_decay_steps, double t_mul = 2.0,
                                     double m_mul = 1.0, double alpha = 0.0);

// learning_rate * ((alpha + (decay_steps - s) / decay_steps) * 0.5 * (1 +
// cos(pi * 2 * num_periods * s / decay_steps)) + beta), s = min(step,
// decay_steps).
Hyperparameter linear_cosine_decay(Hyperparameter learning_rate, Variable global_step,
                                   double decay_steps, double num_periods = 0.5, double alpha = 0.0,
                                   double beta = 0.001);

// values[0] while x <= boundaries[0], values[i] while boundaries[i - 1] <
// x <= boundaries[i], values.back() once x > boundaries.back(). The
// boundaries compare in x's dtype: integers for an integer x (a boundary
// with a fraction is a ValueError there, as TensorFlow's dtype check),
// float32 or float64 for a floating x. The values are float32 numbers (the
// result a float32 scalar). ValueError unless values has one element more
// than boundaries, or when boundaries is empty.
Hyperparameter piecewise_constant(Variable x, std::vector<double> boundaries,
                                  std::vector<double> values);

}  // namespace varstate
