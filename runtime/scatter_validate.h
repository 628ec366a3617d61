// Runtime-internal: the host-side checks of the scatter ops, shared by the
// scatter into one variable or tensor (runtime/scatter.cc) and the scatter
// into a partitioned variable (runtime/partitioned_variable.cc), so that the
// same mistake gets the same error whichever the target. Every message
// starts with `who`, the scatter's subject (scatter_subject).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kernels/common.h"
#include "varstate/dtype.h"
#include "varstate/indexed_slices.h"
#include "varstate/tensor.h"
#include "varstate/tensor_shape.h"

namespace varstate::internal {

// How errors name a scatter: `scatter_add`, `scatter_add "name"` (the
// update's options.name), then ` on "emb"` (the target variable, if any).
std::string scatter_subject(kernels::ScatterOp op, std::string_view name, std::string_view target);

// True for kDiv on an integer dtype, whose divisors must not be 0.
bool integer_division(kernels::ScatterOp op, DType dtype);

// Whether a scatter operand (the indices, or integer divisors) is checked
// on the host before the scatter runs: when it is on the host, or when the
// table is (the operand is copied there first, as the CPU kernel trusts its
// operands). Otherwise (a GPU table, the operand on a GPU) the table's
// device-side check does it.
inline bool check_on_host(bool operand_on_cpu, bool table_on_cpu) {
  return operand_on_cpu || table_on_cpu;
}

// A scatter's arguments, checked against a table of some dtype and shape.
struct ScatterArgs {
  Tensor indices;  // the caller's, where they were
  Tensor updates;  // converted to the table's dtype, where the caller's were
  int64_t rows = 0;
  int64_t row_width = 0;
  int64_t n = 0;  // number of indices
  bool updates_scalar = false;
};

// Checks all that does not need the index values or divisors: the handles,
// that `op` applies to `dtype`, int32/int64 indices, a table of rank >= 1,
// updates of shape indices.shape + shape[1:] or a scalar (converted to
// `dtype`). Throws ValueError for the shapes (TensorFlow's graph-time
// check), TypeError for the dtypes, InvalidArgumentError for an empty
// handle, a scalar table (as TensorFlow's kernel) or min/max of complex
// values.
ScatterArgs check_scatter_args(kernels::ScatterOp op, DType dtype, const TensorShape& shape,
                               const Tensor& indices, const Tensor& updates,
                               const std::string& who);

// A sparse update given as IndexedSlices: throws InvalidArgumentError when
// their dense_shape, if any, is not `shape`, the target's.
void check_dense_shape(const IndexedSlices& slices, const TensorShape& shape,
                       const std::string& who);

// Throws InvalidArgumentError naming the first index (by its position in
// the indices' shape) not in [0, rows). `indices`: int32/int64 on the host.
// With `marks` (a variable's dirty rows, runtime/dirty_rows.h),
// marks each index's row in the same pass.
void check_index_values(const Tensor& indices, int64_t rows, const std::string& who,
                        std::atomic<uint8_t>* marks = nullptr);
// The same marking each index's row in every one of `marks` (a variable's
// and its optimizer slots' dirty rows, which share the row count `rows`).
void check_index_values(const Tensor& indices, int64_t rows, const std::string& who,
                        std::span<std::atomic<uint8_t>* const> marks);
// The same for indices read as int64 (shape: the caller's indices' shape).
void check_index_values(std::span<const int64_t> indices, const TensorShape& shape, int64_t rows,
                        const std::string& who);

// Throws the InvalidArgumentError of check_index_values for the index at
// flat `position` of `indices` (int32/int64 on the host).
[[noreturn]] void throw_bad_index(const Tensor& indices, int64_t position, int64_t rows,
                                  const std::string& who);

// For integer division: throws InvalidArgumentError naming the first zero
// among `updates` (already of the table's dtype, on the host).
void check_divisors(kernels::ScatterOp op, const Tensor& updates, const std::string& who);

}  // namespace varstate::internal
