// Sparse updates of a variable's rows: scatter_update, scatter_add,
// scatter_sub, scatter_mul, scatter_div, scatter_min and scatter_max.
//
//   Variable emb(Tensor::zeros(DType::kFloat, {500, 64}), {.name = "emb"});
//   scatter_add(emb, Tensor({3, 7, 3}), grads);  // grads: [3, 64]; row 3 gets both
//   emb.scatter_sub(IndexedSlices(grads, Tensor({3, 7, 3})));
//
// For each position p of `indices` (a scalar, a vector or any higher rank
// of int32 or int64), ref[indices[p], ...] (op)= updates[p, ...]. Requires
// updates.shape == indices.shape + ref.shape[1:], or a scalar update, which
// is applied to every element of every selected row. Duplicate indices all
// take effect: add/sub/mul/div/min/max combine every contribution;
// scatter_update with duplicates writes, per element, the value of one of
// them — on a GPU's atomic path not necessarily the same duplicate for every
// element of the row; the last one on the CPU and in deterministic mode.
// Every call returns the variable's live value.
//
// Dtypes: scatter_update takes any dtype but string (bool included);
// the arithmetic ops every numeric dtype (float16, bfloat16, float32/64,
// int8/16/32/64, uint8/16/32/64, complex64/128, and the quantized types as
// their storage integers); min/max no complex dtype. Integer +, -, * wrap
// around.
//
// Errors — all raised before anything is written, so a call that throws
// leaves the variable bit-identical:
//   FailedPreconditionError  the variable is uninitialized;
//   TypeError                indices not int32/int64, updates of another
//                            dtype (a weakly typed literal converts), string
//                            variables, or arithmetic on bool;
//   ValueError               updates whose shape is neither
//                            indices.shape + ref.shape[1:] nor a scalar (all
//                            three shapes named): TensorFlow's graph builder
//                            raises it, a call's shapes being known;
//   InvalidArgumentError     what TensorFlow's kernels find: a scalar
//                            variable, an integer division by zero
//                            ("updates[5] is 0"), an index outside the
//                            table (scatter_add on "emb": indices[3] = 1000
//                            is not in [0, 500)); and min/max on complex.
//
// Devices: the update runs on the variable's device; indices and updates
// on another device are copied there first. Indices that are on the CPU are
// bounds-checked on the CPU, and the error is raised at once. Indices that
// already live on a GPU are checked on that GPU by a kernel that gates the
// update kernel (an out-of-range index leaves the table untouched) without
// stopping the host: with UpdateOptions::synchronous the call waits for the
// check and raises; otherwise the call returns at once and the error is
// raised by the next scatter on that variable or the next read of it whose
// check has finished — and always by Variable::eval() / Variable::sync(),
// which wait. Integer scatter_div on a GPU checks for zero divisors the same
// way. Each variable keeps at most kMaxPendingChecks checks in flight; a
// further scatter waits for the oldest.
//
// Determinism: results on the CPU never depend on thread scheduling. On a
// GPU the default (atomic) path combines duplicates in an unspecified order
// (float rounding may differ run to run); deterministic mode
// (UpdateOptions::deterministic, or the global default set_deterministic_ops
// / TF_DETERMINISTIC_OPS) sorts the indices and gives bitwise-identical
// results run to run.
//
// CPU == GPU: where the order of combination is fixed — deterministic mode,
// or unique indices — a GPU's result is bit-identical to the CPU's for every
// op and dtype, except:
//   - NaN payloads and signs: a NaN computed on an x86 CPU is 0xFFC00000
//     (float32), on a GPU the canonical 0x7FFFFFFF; both are NaN;
//   - subnormal results of the hardware float atomics on the atomic path
//     (float32/float16/bfloat16 add and sub): a GPU may flush them to zero
//     (1e-40f -> 0), the CPU and deterministic mode keep them;
//   - complex mul/div, which device and host arithmetic round differently
//     (a few ulp).
//
// Thread safety: scatters on one variable are serialized by a per-variable
// lock (the CPU kernel writes rows without atomics; on a GPU the lock covers
// only enqueueing the check and the kernels), so concurrent scatter_adds
// lose nothing whatever use_locking says. use_locking=true also takes the
// variable's update lock, serializing the scatter with assign(...,
// {.use_locking = true}) and other locked updates.
#pragma once

#include <optional>
#include <string_view>

#include "varstate/indexed_slices.h"
#include "varstate/tensor.h"
#include "varstate/update_options.h"
#include "varstate/variable.h"

namespace varstate {

// Options (varstate/update_options.h): use_locking (unset: true for
// scatter_update, false for the others, as tf.scatter_update and
// tf.scatter_add), deterministic, synchronous and name (names the operation
// in error messages; the variable is always named); validate_shape is unused.

// Checks in flight per variable before a scatter waits for the oldest.
inline constexpr int kMaxPendingChecks = 64;

Tensor scatter_update(Variable& ref, const Tensor& indices, const Tensor& updates,
                      const UpdateOptions& options = {});
Tensor scatter_add(Variable& ref, const Tensor& indices, const Tensor& updates,
                   const UpdateOptions& options = {});
Tensor scatter_sub(Variable& ref, const Tensor& indices, const Tensor& updates,
                   const UpdateOptions& options = {});
Tensor scatter_mul(Variable& ref, const Tensor& indices, const Tensor& updates,
                   const UpdateOptions& options = {});
Tensor scatter_div(Variable& ref, const Tensor& indices, const Tensor& updates,
                   const UpdateOptions& options = {});
Tensor scatter_min(Variable& ref, const Tensor& indices, const Tensor& updates,
                   const UpdateOptions& options = {});
Tensor scatter_max(Variable& ref, const Tensor& indices, const Tensor& updates,
                   const UpdateOptions& options = {});

// The same with the rows and values of an IndexedSlices (its dense_shape,
// when given, must equal the variable's shape: InvalidArgumentError).
Tensor scatter_update(Variable& ref, const IndexedSlices& sparse_delta,
                      const UpdateOptions& options = {});
Tensor scatter_add(Variable& ref, const IndexedSlices& sparse_delta,
                   const UpdateOptions& options = {});
Tensor scatter_sub(Variable& ref, const IndexedSlices& sparse_delta,
                   const UpdateOptions& options = {});
Tensor scatter_mul(Variable& ref, const IndexedSlices& sparse_delta,
                   const UpdateOptions& options = {});
Tensor scatter_div(Variable& ref, const IndexedSlices& sparse_delta,
                   const UpdateOptions& options = {});
Tensor scatter_min(Variable& ref, const IndexedSlices& sparse_delta,
                   const UpdateOptions& options = {});
Tensor scatter_max(Variable& ref, const IndexedSlices& sparse_delta,
                   const UpdateOptions& options = {});

// In-place forms on a plain tensor (as assign_add is for dense updates):
// the same validation; a GPU bounds check is always waited for, since no
// variable carries a deferred error. Not serialized: the caller owns
// `target`.
void scatter_update(Tensor& target, const Tensor& indices, const Tensor& updates,
                    const UpdateOptions& options = {});
void scatter_add(Tensor& target, const Tensor& indices, const Tensor& updates,
                 const UpdateOptions& options = {});
void scatter_sub(Tensor& target, const Tensor& indices, const Tensor& updates,
                 const UpdateOptions& options = {});
void scatter_mul(Tensor& target, const Tensor& indices, const Tensor& updates,
                 const UpdateOptions& options = {});
void scatter_div(Tensor& target, const Tensor& indices, const Tensor& updates,
                 const UpdateOptions& options = {});
void scatter_min(Tensor& target, const Tensor& indices, const Tensor& updates,
                 const UpdateOptions& options = {});
void scatter_max(Tensor& target, const Tensor& indices, const Tensor& updates,
                 const UpdateOptions& options = {});

// Process-wide default of UpdateOptions::deterministic (like
// tf.config.experimental.enable_op_determinism). Initially true when the
// environment variable VARSTATE_DETERMINISTIC_OPS or TF_DETERMINISTIC_OPS is
// "1" or "true" (read once). Thread-safe.
void set_deterministic_ops(bool enabled);
bool deterministic_ops();

// Process-wide default of UpdateOptions::synchronous. Initially true when
// VARSTATE_SYNCHRONOUS_SCATTER_CHECKS is "1" or "true" (read once).
// Thread-safe.
void set_synchronous_scatter_checks(bool enabled);
bool synchronous_scatter_checks();

}  // namespace varstate
