// Training ops: the optimizer updates of TensorFlow's training_ops
// (tf.raw_ops.ApplyAdam, SparseApplyAdagrad, ...) on a variable and its
// slot variables, each one fused pass over memory, on the variable's
// device. The optimizers (varstate/optimizers.h) are built on them.
//
//   Variable w(Tensor::zeros(DType::kFloat, {1000, 64}), {.name = "w"});
//   Variable accum(Tensor::filled(DType::kFloat, {1000, 64}, 0.1f, w.device()), {.name = "acc"});
//   apply_adagrad(w, accum, 0.01f, grad);                       // grad: [1000, 64]
//   sparse_apply_adagrad(w, accum, 0.01f, IndexedSlices(rows, ids));
//
// Formulas are TensorFlow's, evaluated in the same order (see
// kernels/training_functors.h), so float32/float64 results on the CPU match
// TensorFlow 2.21's compat.v1 optimizers bit for bit (test/interop/
// test_optimizers.py), except Adagrad, Adadelta and proximal Adagrad, whose
// TensorFlow kernels use the CPU's approximate rsqrt (a few ulp), and Ftrl
// with lr_power != -0.5 (Eigen's vectorized pow). A GPU gives the CPU's
// bits (same functors, no FMA contraction), except Ftrl with lr_power !=
// -0.5. float16/bfloat16 compute in float32 and round once per stored value
// (TensorFlow rounds after every operation: results may differ in the last
// bit). Dtypes:
// float16, bfloat16, float32, float64 — TensorFlow 2.21's CPU kernels take
// these (but no bfloat16 SparseApplyRMSProp, and only float32 and float64
// for the proximal ops and AdagradDA) and also complex64/complex128 (not
// Ftrl), which varstate's training ops do not. AdagradDA matches
// TensorFlow's bits too (its dense and sparse kernels each in their own
// form); the sparse proximal ops and AdagradDA on rows of one element may
// differ in the last bit (TensorFlow's float64 path for those rows).
//
// Sparse forms take an IndexedSlices whose values have shape
// [n] + var.shape[1:]. Unlike the raw SparseApply* ops, and like every
// TensorFlow optimizer (_deduplicate_indexed_slices), duplicate indices are
// summed first (from zero, in their original order), then each row is
// updated once: results are bitwise identical run to run and for every
// thread count or GPU grid, with or without UpdateOptions::deterministic
// (there is no atomic path to opt out of). sparse_apply_gradient_descent is
// the exception, as in TensorFlow: a scatter_sub of grad * alpha, so
// duplicates are applied one by one.
//
// Hyperparameters (lr, beta1_power, ...) are scalar tensors — a C++ number,
// a Variable (read now) or a tensor of the variable's dtype — read on the
// host and rounded to the variable's dtype.
//
// Errors — all raised before anything is written, so a call that throws
// leaves the variable and every slot bit-identical:
//   FailedPreconditionError  the variable or a slot is uninitialized;
//   TypeError                a variable of another dtype than the four above,
//                            a slot, gradient or hyperparameter of another
//                            dtype than the variable's (a C++ number
//                            converts);
//   InvalidArgumentError     TensorFlow's kernel checks: a slot or gradient
//                            of another shape ("var and grad do not have the
//                            same shape: [3,2] vs [3,4]"), a hyperparameter
//                            that is not a scalar ("lr is not a scalar:
//                            [2]"), a slot on another device than the
//                            variable, an index out of range ("indices[3] =
//                            1000 is not in [0, 500)"), a scalar variable in
//                            a sparse op, a slot held by another task than
//                            its variable (or here while the variable is
//                            remote, or the reverse).
// Messages name the op and the variable: `SparseApplyAdagrad on "emb": ...`.
//
// Devices: the update runs on the variable's device; gradients on another
// device are copied there first. Sparse indices on the host are
// bounds-checked there, as above. Indices on the variable's GPU are checked
// on that GPU, as a GPU scatter checks them (varstate/scatter.h): the call
// returns without waiting, a bad index writes nothing to the variable or
// any slot, and its InvalidArgumentError ("... indices[1] = 3 is not in
// [0, 3); found by the device-side check after the call returned, nothing
// was written") is raised by the variable's next read (value(), ref(),
// read_value()) once the check has finished, by sync() and eval() always,
// or by the call itself with UpdateOptions::synchronous. An optimizer's
// apply_gradients with such indices applies its other variables.
//
// Parameter-server variables (varstate/cluster.h): a variable held by
// another task trains in place, with the same bits as here. Its slots are
// held by the same task; the op takes that task's exclusive lock on the
// variable and every slot (in an order every task agrees on: no deadlock),
// reads the batch's distinct rows (dense ops and sparse_apply_adam, which
// moves every row: the whole values), runs the CPU kernel, writes them
// back, marks them for incremental saves (DistributedSaver) and unlocks:
// atomic with respect to every other task's updates. Only those rows
// travel; a sparse op returns an empty Tensor (the value stays with its
// owner), a dense one the new value.
//
// Thread safety: with use_locking (default false, as TensorFlow's ops) the
// variable's and the slots' update locks are held, serializing the op with
// other locked updates of them; without, concurrent updates of one
// variable may interleave (TensorFlow's "Hogwild" behaviour).
#pragma once

#include "varstate/indexed_slices.h"
#include "varstate/tensor.h"
#include "varstate/update_options.h"
#include "varstate/variable.h"

namespace varstate {

// var -= alpha * delta.
Tensor apply_gradient_descent(Variable& var, const Tensor& alpha, const Tensor& delta,
                              const UpdateOptions& options = {});
// var[i] -= alpha * delta.values[k] for each k with delta.indices[k] = i,
// one duplicate at a time (TensorFlow's GradientDescentOptimizer): bitwise
// scatter_sub(var, delta.indices, delta.values * alpha), alpha cast to
// var's dtype. On the CPU (float and double) the products are taken in the
// scatter's pass, without the scaled copy.
Tensor sparse_apply_gradient_descent(Variable& var, const Tensor& alpha, const IndexedSlices& delta,
                                     const UpdateOptions& options = {});

// accum = accum * momentum + grad;
// var -= use_nesterov ? grad * lr + accum * momentum * lr : accum * lr.
Tensor apply_momentum(Variable& var, Variable& accum, const Tensor& lr, const Tensor& grad,
                      const Tensor& momentum, bool use_nesterov = false,
                      const UpdateOptions& options = {});
Tensor sparse_apply_momentum(Variable& var, Variable& accum, const Tensor& lr,
                             const IndexedSlices& grad, const Tensor& momentum,
                             bool use_nesterov = false, const UpdateOptions& options = {});

// accum += grad^2; var -= lr * grad / sqrt(accum).
Tensor apply_adagrad(Variable& var, Variable& accum, const Tensor& lr, const Tensor& grad,
                     const UpdateOptions& options = {});
Tensor sparse_apply_adagrad(Variable& var, Variable& accum, const Tensor& lr,
                            const IndexedSlices& grad, const UpdateOptions& options = {});

// alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power);
// m += (grad - m) * (1 - beta1); v += (grad^2 - v) * (1 - beta2);
// var -= alpha * m / (sqrt(v) + epsilon)   (use_nesterov: m replaced by
// grad * (1 - beta1) + beta1 * m).
Tensor apply_adam(Variable& var, Variable& m, Variable& v, const Tensor& beta1_power,
                  const Tensor& beta2_power, const Tensor& lr, const Tensor& beta1,
                  const Tensor& beta2, const Tensor& epsilon, const Tensor& grad,
                  bool use_nesterov = false, const UpdateOptions& options = {});
// TensorFlow has no SparseApplyAdam op; this is what its compat.v1
// AdamOptimizer does for an IndexedSlices gradient, in one pass: every row
// of m and v decays (m *= beta1, v *= beta2), the rows in the batch add
// grad * (1 - beta1) and grad^2 * (1 - beta2), and every row of var moves.
Tensor sparse_apply_adam(Variable& var, Variable& m, Variable& v, const Tensor& beta1_power,
                         const Tensor& beta2_power, const Tensor& lr, const Tensor& beta1,
                         const Tensor& beta2, const Tensor& epsilon, const IndexedSlices& grad,
                         const UpdateOptions& options = {});
// Not TensorFlow's (TensorFlow Addons' LazyAdam): only the rows in the
// batch are touched, m = beta1 * m + (1 - beta1) * grad, v likewise, and
// var -= alpha * m / (sqrt(v) + epsilon) on those rows.
Tensor sparse_apply_lazy_adam(Variable& var, Variable& m, Variable& v, const Tensor& beta1_power,
                              const Tensor& beta2_power, const Tensor& lr, const Tensor& beta1,
                              const Tensor& beta2, const Tensor& epsilon, const IndexedSlices& grad,
                              const UpdateOptions& options = {});

// ms += (grad^2 - ms) * (1 - rho);
// mom = mom * momentum + lr * grad / sqrt(ms + epsilon); var -= mom.
Tensor apply_rms_prop(Variable& var, Variable& ms, Variable& mom, const Tensor& lr,
                      const Tensor& rho, const Tensor& momentum, const Tensor& epsilon,
                      const Tensor& grad, const UpdateOptions& options = {});
Tensor sparse_apply_rms_prop(Variable& var, Variable& ms, Variable& mom, const Tensor& lr,
                             const Tensor& rho, const Tensor& momentum, const Tensor& epsilon,
                             const IndexedSlices& grad, const UpdateOptions& options = {});
// As apply_rms_prop with mg += (grad - mg) * (1 - rho) and the denominator
// sqrt(ms - mg^2 + epsilon).
Tensor apply_centered_rms_prop(Variable& var, Variable& mg, Variable& ms, Variable& mom,
                               const Tensor& lr, const Tensor& rho, const Tensor& momentum,
                               const Tensor& epsilon, const Tensor& grad,
                               const UpdateOptions& options = {});
Tensor sparse_apply_centered_rms_prop(Variable& var, Variable& mg, Variable& ms, Variable& mom,
                                      const Tensor& lr, const Tensor& rho, const Tensor& momentum,
                                      const Tensor& epsilon, const IndexedSlices& grad,
                                      const UpdateOptions& options = {});

// FTRL-proximal (TensorFlow's ApplyFtrl): accum_new = accum + grad^2;
// linear += grad - (accum_new^-lr_power - accum^-lr_power) / lr * var;
// var = (clamp(linear, -l1, l1) - linear) / (accum_new^-lr_power / lr + 2 * l2);
// accum = accum_new.
Tensor apply_ftrl(Variable& var, Variable& accum, Variable& linear, const Tensor& grad,
                  const Tensor& lr, const Tensor& l1, const Tensor& l2, const Tensor& lr_power,
                  const UpdateOptions& options = {});
Tensor sparse_apply_ftrl(Variable& var, Variable& accum, Variable& linear,
                         const IndexedSlices& grad, const Tensor& lr, const Tensor& l1,
                         const Tensor& l2, const Tensor& lr_power,
                         const UpdateOptions& options = {});
// ApplyFtrlV2: linear sees grad + 2 * l2_shrinkage * var instead of grad.
Tensor apply_ftrl_v2(Variable& var, Variable& accum, Variable& linear, const Tensor& grad,
                     const Tensor& lr, const Tensor& l1, const Tensor& l2,
                     const Tensor& l2_shrinkage, const Tensor& lr_power,
                     const UpdateOptions& options = {});
Tensor sparse_apply_ftrl_v2(Variable& var, Variable& accum, Variable& linear,
                            const IndexedSlices& grad, const Tensor& lr, const Tensor& l1,
                            const Tensor& l2, const Tensor& l2_shrinkage, const Tensor& lr_power,
                            const UpdateOptions& options = {});

// Adadelta (TensorFlow's ApplyAdadelta): accum = accum * rho + grad^2 * (1 - rho);
// update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad;
// var -= update * lr; accum_update = accum_update * rho + update^2 * (1 - rho).
Tensor apply_adadelta(Variable& var, Variable& accum, Variable& accum_update, const Tensor& lr,
                      const Tensor& rho, const Tensor& epsilon, const Tensor& grad,
                      const UpdateOptions& options = {});
Tensor sparse_apply_adadelta(Variable& var, Variable& accum, Variable& accum_update,
                             const Tensor& lr, const Tensor& rho, const Tensor& epsilon,
                             const IndexedSlices& grad, const UpdateOptions& options = {});

// Proximal gradient descent (TensorFlow's ApplyProximalGradientDescent, the
// Fobos update): prox = var - alpha * delta; with l1 > 0
// var = sign(prox) * max(|prox| - alpha * l1, 0) / (1 + l2 * alpha), else
// var = prox / (1 + l2 * alpha). Unlike sparse_apply_gradient_descent, the
// sparse form sums duplicate indices first, as every other sparse op here.
Tensor apply_proximal_gradient_descent(Variable& var, const Tensor& alpha, const Tensor& l1,
                                       const Tensor& l2, const Tensor& delta,
                                       const UpdateOptions& options = {});
Tensor sparse_apply_proximal_gradient_descent(Variable& var, const Tensor& alpha, const Tensor& l1,
                                              const Tensor& l2, const IndexedSlices& delta,
                                              const UpdateOptions& options = {});

// Proximal Adagrad (TensorFlow's ApplyProximalAdagrad): accum += grad^2, then
// the proximal gradient descent step with each element's learning rate
// lr / sqrt(accum). InvalidArgumentError unless lr > 0, l1 >= 0 and l2 >= 0
// (the checks of TensorFlow's CPU kernel).
Tensor apply_proximal_adagrad(Variable& var, Variable& accum, const Tensor& lr, const Tensor& l1,
                              const Tensor& l2, const Tensor& grad,
                              const UpdateOptions& options = {});
Tensor sparse_apply_proximal_adagrad(Variable& var, Variable& accum, const Tensor& lr,
                                     const Tensor& l1, const Tensor& l2, const IndexedSlices& grad,
                                     const UpdateOptions& options = {});

// AdagradDA (TensorFlow's ApplyAdagradDA, dual averaging): g_acc += grad;
// gg_acc += grad^2; then, with T = global_step (an integer scalar: the step
// this update is for, counted from 1), var is computed from the
// accumulators alone: with l1 > 0
// var = -lr * sign(g_acc) * max(|g_acc| - T * l1, 0) / (l2 * T * lr + sqrt(gg_acc)),
// else var = -lr * g_acc / (l2 * T * lr + sqrt(gg_acc)). The sparse form
// evaluates it as TensorFlow's sparse kernel does (divided through by T * lr).
Tensor apply_adagrad_da(Variable& var, Variable& gradient_accumulator,
                        Variable& gradient_squared_accumulator, const Tensor& grad,
                        const Tensor& lr, const Tensor& l1, const Tensor& l2,
                        const Tensor& global_step, const UpdateOptions& options = {});
Tensor sparse_apply_adagrad_da(Variable& var, Variable& gradient_accumulator,
                               Variable& gradient_squared_accumulator, const IndexedSlices& grad,
                               const Tensor& lr, const Tensor& l1, const Tensor& l2,
                               const Tensor& global_step, const UpdateOptions& options = {});

// Not TensorFlow's: row-wise Adagrad, one accumulator per row of a
// variable of rank >= 1 (accum has shape [var.shape[0]]), as recommender
// systems use for embedding tables: accum[r] += mean over the row of
// grad^2; var[r] -= lr * grad[r] / sqrt(accum[r]).
Tensor apply_rowwise_adagrad(Variable& var, Variable& accum, const Tensor& lr, const Tensor& grad,
                             const UpdateOptions& options = {});
Tensor sparse_apply_rowwise_adagrad(Variable& var, Variable& accum, const Tensor& lr,
                                    const IndexedSlices& grad, const UpdateOptions& options = {});

}  // namespace varstate
