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

}  // namespace varstate::interop
