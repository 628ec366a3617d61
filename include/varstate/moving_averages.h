// Moving averages of variables: TensorFlow 1.x's
// tf.compat.v1.train.ExponentialMovingAverage and
// tf.compat.v1.train.assign_moving_average.
//
//   ExponentialMovingAverage ema(0.999, {.num_updates = global_step});
//   Op maintain_averages = ema.apply({w, b});   // creates w/ExponentialMovingAverage, ...
//   global_variables_initializer().run();        // the averages start at w's, b's values
//   for (...) {
//     opt.apply_gradients(...);
//     maintain_averages.run();                   // avg -= (1 - decay) * (avg - w)
//   }
//   Saver({.var_list = ema.variables_to_restore()}).restore(session, path);  // evaluation:
//                                                // w takes the value of its average
//
// The arithmetic is TensorFlow's graph, op by op: the decay is a float32
// scalar (min(decay, (1 + n) / (10 + n)) with num_updates n), 1 - decay is
// computed in float32 and cast to the variable's dtype, then
// avg -= (avg - value) * (1 - decay) with each operation rounded to the
// dtype, in one pass over memory on the variable's device (no fused
// multiply-add, on the CPU or a GPU). The averages equal TensorFlow's bit
// for bit (the interop suite checks float32 and float64; the unit tests
// bfloat16 and float16 against the three ops), a GPU's the CPU's.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "varstate/optimizer.h"  // Hyperparameter
#include "varstate/session.h"
#include "varstate/tensor.h"
#include "varstate/variable.h"

namespace varstate {

struct ExponentialMovingAverageOptions {
  // The count of updates applied (usually the global step, an int32/int64
  // or float scalar variable), read at each run of apply()'s Op: the
  // decay used is then min(decay, (1 + n) / (10 + n)), so that the
  // averages move faster early in training.
  std::optional<Hyperparameter> num_updates;
  // The prefix of the averages' names ("w/ExponentialMovingAverage") and
  // the name of apply()'s Op.
  std::string name = "ExponentialMovingAverage";
};

// Shadow variables holding exponential moving averages of variables.
//
// apply(var_list) creates, for each variable it has not seen, its average:
// a variable named "<var>/<name>" (then "<var>/<name>_1", ... when taken),
// created outside any name scope as TensorFlow's slots are, on the
// variable's device (its task for a parameter-server variable: creation is
// then collective, as for optimizer slots), not trainable, in
// GLOBAL_VARIABLES, so a Saver built afterwards saves it. The variable
// joins MOVING_AVERAGE_VARIABLES. The average starts at the variable's
// initialized_value() when its initializer runs (global_variables_initializer
// or variables_initializer(ema.averages())): the variable's initial value,
// or its value if it was initialized already. The average of a partition
// ("emb/part_1") is a partition of the average of the whole variable
// ("emb/part_1/ExponentialMovingAverage" is a slice of
// "emb/ExponentialMovingAverage" in checkpoints), so checkpoints restore in
// TensorFlow and across repartitioning.
//
// TensorFlow's apply() also takes non-variable tensors (averages starting
// at zero, optionally zero-debiased); varstate's takes variables, whose
// averages TensorFlow never debiases, so there is no zero_debias option.
// Dynamic (hash-keyed) variables have no averages (InvalidArgumentError).
//
// Thread safety: the calls serialize on the object; each run of an Op
// updates the averages with assign_sub (use_locking off, as TensorFlow's),
// reading each variable once.
class ExponentialMovingAverage {
 public:
  explicit ExponentialMovingAverage(Hyperparameter decay,
                                    ExponentialMovingAverageOptions options = {});
  ~ExponentialMovingAverage();
  ExponentialMovingAverage(const ExponentialMovingAverage&) = delete;
  ExponentialMovingAverage& operator=(const ExponentialMovingAverage&) = delete;

  const std::string& name() const;

  // Creates the averages of `var_list` not yet averaged, and returns an Op
  // (a NoOp named after the object, unique in the graph) that updates the
  // average of every variable of `var_list`, in list order, each time it
  // runs. Without a list: trainable_variables() of the default graph, as
  // they are now.
  // Errors, raised before anything is created:
  //   TypeError             a variable is not bfloat16, float16, float32
  //                         or float64 ("The variables must be half, float,
  //                         or double: w:0", as TensorFlow);
  //   InvalidArgumentError  a dynamic variable.
  // Errors of a run, raised before any average changes:
  //   FailedPreconditionError  a variable or an average is uninitialized;
  //   InvalidArgumentError     decay or num_updates is not a real scalar.
  Op apply(const std::vector<Variable>& var_list);
  Op apply();

  // The average of `var`, if apply() created one (tf: average(var)).
  std::optional<Variable> average(const Variable& var) const;
  // Its op name, or for a variable without an average the name one would
  // get now ("<var>/<name>", made unique in the graph without taking it).
  std::string average_name(const Variable& var) const;
  // The averages created so far, in creation order.
  std::vector<Variable> averages() const;

  // A Saver var_list that restores each variable of `moving_avg_variables`
  // from its average's name and every other global variable from its own
  // name (TensorFlow's variables_to_restore: for evaluation with the
  // averages in place of the trained values). Default: trainable_variables()
  // followed by moving_average_variables() of the default graph.
  std::map<std::string, Variable> variables_to_restore() const;
  std::map<std::string, Variable> variables_to_restore(
      const std::vector<Variable>& moving_avg_variables) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// variable -= (variable - value) * (1 - decay), TensorFlow's
// assign_moving_average, now; returns the new value. `value` has the
// variable's shape (or is a scalar) and its dtype (a weakly typed literal
// converts); `decay` is read as float32 and 1 - decay cast to the dtype.
//
// With zero_debias (TensorFlow's default), the variable is taken to start
// at zero and is set to the debiased average instead: the biased average
// is kept in "<variable>/biased" and the count of updates in
// "<variable>/local_step" (created at the first call, zero, on the
// variable's device, not trainable, in GLOBAL_VARIABLES; found by name
// afterwards, so that every call continues the same average), then
//   biased -= (biased - value) * (1 - decay); local_step += 1;
//   variable = biased / (1 - (1 - (1 - decay)) ** local_step).
// (TensorFlow creates those two variables when the graph is built, and a
// second build for the same variable gets "biased_1"; an eager call here
// continues the first.)
//
// Errors (nothing changes): TypeError for a variable that is not bfloat16,
// float16, float32 or float64, or a value of another dtype; ValueError for
// a value of another shape, or a "<variable>/biased" or
// "<variable>/local_step" in the graph of the wrong dtype or shape;
// FailedPreconditionError for an uninitialized variable;
// InvalidArgumentError for a dynamic variable or a decay that is not a real
// scalar.
Tensor assign_moving_average(Variable& variable, const Tensor& value, const Hyperparameter& decay,
                             bool zero_debias = true);

}  // namespace varstate
