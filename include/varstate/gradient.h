// Gradients as the optimizers take them: a (gradient, variable) pair per
// variable, the gradient dense or a set of rows. varstate computes no
// gradients (there is no autodiff): the caller does, or gather_gradients
// (varstate/gather.h) splits the gradient of a partitioned gather into one
// pair per part; Optimizer::apply_gradients (varstate/optimizer.h) applies
// them.
//
//   std::vector<GradientAndVariable> grads_and_vars = {
//       {grad_w, w},                            // dense: w's shape
//       {IndexedSlices(rows, ids), emb},        // rows `ids` of emb
//       {Tensor(), frozen}};                    // None: frozen is skipped
//   opt.apply_gradients(grads_and_vars, &global_step);
//
// Both hold handles (Tensor, IndexedSlices and Variable share their state
// when copied): a pair is cheap to copy, and applying it writes the
// variable the caller holds.
#pragma once

#include <variant>

#include "varstate/indexed_slices.h"
#include "varstate/tensor.h"
#include "varstate/variable.h"

namespace varstate {

// A gradient: dense (the variable's shape) or rows of it. An empty Tensor
// is TensorFlow's None: that variable is skipped.
using Gradient = std::variant<Tensor, IndexedSlices>;

// One (gradient, variable) pair of apply_gradients.
struct GradientAndVariable {
  Gradient grad;
  Variable var;
};

}  // namespace varstate
