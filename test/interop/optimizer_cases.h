// interop_tool's `optimize` command: the optimizers of test_optimizers.py
// run on varstate, with the same hyperparameters and gradients as
// TensorFlow's tf.compat.v1.train optimizers there.
#pragma once

#include <string>
#include <vector>

namespace varstate::interop {

// interop_tool optimize OPT IN FIRST LAST OUT [RESTORE|-] [SAVE|-]
// IN holds the initial values of "w" and the float64 "d" (dense gradients)
// and "emb" (sparse gradients) and, for each step s in [FIRST, LAST), "s/w",
// "s/d", "s/emb/values" and "s/emb/indices". The tool creates w, emb, d,
// global_step and the
// optimizer OPT (sgd, momentum, nesterov, adagrad, adam, rmsprop,
// rmsprop_centered, ftrl, ftrl_shrinkage, ftrl_power), creates its slots,
// restores from checkpoint RESTORE, runs the steps, writes every global
// variable (op name -> value) to OUT and saves to SAVE.
int cmd_optimize(const std::vector<std::string>& args);

// interop_tool moving_average MODE IN FIRST LAST OUT [RESTORE|-] [SAVE|-]
// The moving averages of test_moving_averages.py. MODE "ema": "w", "emb"
// and the float64 "d" trained by gradient descent (0.1; gradients "s/w",
// "s/emb/values" + "s/emb/indices", "s/d"), their ExponentialMovingAverage
// (decay 0.99, num_updates global_step) run after each step; "ema_plain":
// decay 0.9 without num_updates; "ema_restore": the "ema" graph restored
// from RESTORE through ema.variables_to_restore() (no steps). "assign" /
// "assign_nodebias": assign_moving_average(v, s/w, 0.9) with and without
// zero_debias on the variable "v". Restores RESTORE first, writes every
// global variable to OUT, saves to SAVE.
int cmd_moving_average(const std::vector<std::string>& args);

// interop_tool lr_schedule STEPS OUT
// The learning rate schedules of test_lr_schedules.py
// (varstate/learning_rate_decay.h) at global steps 0 .. STEPS - 1: one
// line per schedule, the rates in a vector.
int cmd_lr_schedule(const std::vector<std::string>& args);

// interop_tool init_from_checkpoint CKPT OUT
// test_checkpoint_utils.py's graph ("enc/w" [2,3], "enc/b" [3], "enc/emb"
// [10,2] in 2 parts, "extra" [4], "kept" [2] of ones) initialized from
// CKPT with {"pre/": "enc/", "other": "extra"}; every global variable to
// OUT.
int cmd_init_from_checkpoint(const std::vector<std::string>& args);

}  // namespace varstate::interop
