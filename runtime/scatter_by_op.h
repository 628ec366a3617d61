// Runtime-internal entries of the scatter family (kernels/common.h's
// VARSTATE_SCATTER_OPS) by op: for PartitionedVariable
// (runtime/partitioned_variable.cc), whose parts update in place from the
// caller's indices and updates, and for a remote owner combining rows
// (distributed/mpi_sparse.cc).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/common.h"
#include "varstate/scatter.h"
#include "varstate/tensor.h"
#include "varstate/variable.h"

namespace varstate::internal {

class LocalStorage;
class RemoteStorage;

// The scatter op `op` on `ref` held by this process (`storage`, its
// LocalStorage): the validation, the dirty rows, the lock and the CPU or
// CUDA kernel, on the live buffer, which it returns. Errors name `who`.
// With `scale` (a host scalar of ref's dtype; op kSub) the updates are
// multiplied by it first, each product rounded to the dtype: on the CPU, for
// float and double, in the kernel's one pass
// (kernels::cpu::scatter_sub_scaled), elsewhere by a multiply before the
// scatter. The result is bitwise the same.
Tensor scatter_local(kernels::ScatterOp op, Variable& ref, LocalStorage& storage,
                     const Tensor& indices, const Tensor& updates, const UpdateOptions& options,
                     const std::string& who, const Tensor* scale = nullptr);
// The scatter op `op` on `ref` held by another task (RemoteStorage):
// validated here exactly as a local one (indices and divisors checked on
// the host, so nothing is sent for a bad call), then one batched exchange
// with the owner.
void scatter_remote(kernels::ScatterOp op, Variable& ref, RemoteStorage& remote,
                    const Tensor& indices, const Tensor& updates, const std::string& who);

// The scatter op `op` on `ref`, as the free function of varstate/scatter.h
// (whatever its storage: runtime/variable_storage.h),
// except that errors name `who` (e.g. the partitioned variable `ref` is a
// part of) and nothing is read back.
void scatter_into(kernels::ScatterOp op, Variable& ref, const Tensor& indices,
                  const Tensor& updates, const UpdateOptions& options, const std::string& who);

// The scatter op `op` on a plain tensor, as the in-place free functions of
// varstate/scatter.h (scatter_add(Tensor&, ...)): the same validation and
// messages, a GPU bounds check waited for. With `indices_in_range` (rows
// the caller made: a keyed table's slots) indices in the GPU's memory are
// not checked there, and nothing is waited for.
void scatter_tensor(kernels::ScatterOp op, Tensor& target, const Tensor& indices,
                    const Tensor& updates, const UpdateOptions& options,
                    bool indices_in_range = false);

// Applies `op` to the parts, all on the CPU, in one kernel call: part k
// holds rows [offsets[k], offsets[k] + parts[k].shape().dim(0)) of the whole
// variable (offsets ascending from 0, the parts covering every row).
// `indices` (of shape `indices_shape`) are rows of the whole variable,
// checked by the kernel in its first pass: InvalidArgumentError (`who`, the
// partitioned variable's subject) naming the first bad one, nothing written. `updates` (the
// variable's dtype, on the CPU) has one row per index, or one element when `updates_scalar`. The
// caller has validated everything else (dtypes, shapes, initialization, integer divisors), so no
// part throws after another has changed. The parts' locks are taken in part order, as a scatter on
// each part would take them (options.use_locking), and every part is marked updated.
void scatter_cpu_parts(kernels::ScatterOp op, std::vector<Variable>& parts,
                       const std::vector<int64_t>& offsets, std::span<const int64_t> indices,
                       const TensorShape& indices_shape, const Tensor& updates, bool updates_scalar,
                       const UpdateOptions& options, const std::string& who);

}  // namespace varstate::internal
