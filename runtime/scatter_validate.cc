#include "runtime/scatter_validate.h"

#include <atomic>
#include <cstring>
#include <string>

#include "kernels/cpu/scatter.h"
#include "kernels/scatter_ops.h"
#include "runtime/row_gather.h"
#include "runtime/scatter_check_internal.h"
#include "varstate/error.h"

namespace varstate::internal {
namespace {

using kernels::ScatterOp;

const char* op_name(ScatterOp op) { return kernels::scatter_op_info(op).function; }

// Throws unless `op` applies to elements of `dtype`.
void check_dtype(ScatterOp op, DType dtype, const std::string& who) {
  const kernels::ScatterOpInfo info = kernels::scatter_op_info(op);
  if (dtype == DType::kString || (info.arithmetic && !dtype_is_numeric(dtype))) {
    throw TypeError(who + ": dtype " + std::string(dtype_name(dtype)) + " is not supported" +
                    (info.arithmetic ? " (no arithmetic)" : ""));
  }
  if (info.ordered && dtype_is_complex(dtype)) {
    throw InvalidArgumentError(who + ": complex values (" + std::string(dtype_name(dtype)) +
                               ") are not ordered");
  }
}

template <typename Index>
void check_values(const Index* indices, int64_t n, const TensorShape& shape, int64_t rows,
                  const std::string& who) {
  const int64_t bad = kernels::cpu::validate_indices(indices, n, rows);
  if (bad >= 0) throw InvalidArgumentError(bad_index_message(who, bad, shape, indices[bad], rows));
}

// check_values that also marks each index's row, calling mark(row), in the
// same pass (a bad index leaves the rows before it marked, which is
// harmless).
template <typename Index, typename Mark>
void check_and_mark(const Index* indices, int64_t n, const TensorShape& shape, int64_t rows,
                    const std::string& who, Mark&& mark) {
  for (int64_t i = 0; i < n; ++i) {
    const auto v = static_cast<int64_t>(indices[i]);
    if (static_cast<uint64_t>(v) >= static_cast<uint64_t>(rows)) {
      throw InvalidArgumentError(bad_index_message(who, i, shape, v, rows));
    }
    mark(v);
  }
}

template <typename Mark>
void check_and_mark(const Tensor& indices, int64_t rows, const std::string& who, Mark&& mark) {
  const int64_t n = indices.num_elements();
  if (indices.dtype() == DType::kInt32) {
    check_and_mark(indices.data<int32_t>(), n, indices.shape(), rows, who, mark);
  } else {
    check_and_mark(indices.data<int64_t>(), n, indices.shape(), rows, who, mark);
  }
}

// Position of the first zero among the n elements of `bytes`-sized
// integers at p, or -1.
int64_t first_zero(const void* p, int64_t n, size_t bytes) {
  const auto* c = static_cast<const unsigned char*>(p);
  static const unsigned char kZero[16] = {};
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(c + i * bytes, kZero, bytes) == 0) return i;
  }
  return -1;
}

}  // namespace

std::string scatter_subject(ScatterOp op, std::string_view name, std::string_view target) {
  std::string s = op_name(op);
  if (!name.empty()) s += " " + quoted(name);
  if (!target.empty()) s += " on " + quoted(target);
  return s;
}

bool integer_division(ScatterOp op, DType dtype) {
  return op == ScatterOp::kDiv && dtype_is_integer(dtype);
}

ScatterArgs check_scatter_args(ScatterOp op, DType dtype, const TensorShape& shape,
                               const Tensor& indices, const Tensor& updates,
                               const std::string& who) {
  if (!indices.valid()) throw InvalidArgumentError(who + ": indices is an empty tensor handle");
  if (!updates.valid()) throw InvalidArgumentError(who + ": updates is an empty tensor handle");
  check_dtype(op, dtype, who);
  if (!internal::is_index_dtype(indices.dtype())) {
    throw TypeError(who + ": indices must be int32 or int64, got " +
                    std::string(dtype_name(indices.dtype())));
  }
  if (shape.rank() < 1) {
    // TensorFlow's kernel finds this one, not its graph builder.
    throw InvalidArgumentError(who + ": cannot scatter into a scalar (shape " + shape.to_string() +
                               ")");
  }
  ScatterArgs a;
  a.updates = convert_to_dtype(updates, dtype, who);
  const TensorShape row_shape = shape.tail(1);
  const TensorShape expected = indices.shape().concatenate(row_shape);
  if (a.updates.shape() != expected && !a.updates.shape().is_scalar()) {
    throw ValueError(who + ": updates shape " + a.updates.shape().to_string() +
                     " must equal indices.shape + ref.shape[1:] = " + expected.to_string() +
                     " (indices shape " + indices.shape().to_string() + ", ref shape " +
                     shape.to_string() + ") or be a scalar");
  }
  a.indices = indices;
  a.rows = shape.dim(0);
  a.row_width = row_shape.num_elements();
  a.n = indices.num_elements();
  a.updates_scalar = a.updates.num_elements() == 1 && expected.num_elements() != 1;
  return a;
}

void check_dense_shape(const IndexedSlices& slices, const TensorShape& shape,
                       const std::string& who) {
  if (!slices.dense_shape()) return;
  const TensorShape dense = slices.dense_tensor_shape();
  if (dense != shape) {
    throw InvalidArgumentError(who + ": the IndexedSlices' dense_shape " + dense.to_string() +
                               " differs from the variable's shape " + shape.to_string());
  }
}

void check_index_values(const Tensor& indices, int64_t rows, const std::string& who,
                        std::atomic<uint8_t>* marks) {
  const int64_t n = indices.num_elements();
  if (n == 0) return;
  if (marks != nullptr) {
    check_and_mark(indices, rows, who,
                   [marks](int64_t r) { marks[r].store(1, std::memory_order_release); });
    return;
  }
  if (indices.dtype() == DType::kInt32) {
    check_values(indices.data<int32_t>(), n, indices.shape(), rows, who);
  } else {
    check_values(indices.data<int64_t>(), n, indices.shape(), rows, who);
  }
}

void check_index_values(const Tensor& indices, int64_t rows, const std::string& who,
                        std::span<std::atomic<uint8_t>* const> marks) {
  if (marks.empty()) return check_index_values(indices, rows, who);
  if (indices.num_elements() == 0) return;
  check_and_mark(indices, rows, who, [marks](int64_t r) {
    for (std::atomic<uint8_t>* m : marks) m[r].store(1, std::memory_order_release);
  });
}

void check_index_values(std::span<const int64_t> indices, const TensorShape& shape, int64_t rows,
                        const std::string& who) {
  check_values(indices.data(), static_cast<int64_t>(indices.size()), shape, rows, who);
}

void throw_bad_index(const Tensor& indices, int64_t position, int64_t rows,
                     const std::string& who) {
  const int64_t value = indices.dtype() == DType::kInt32
                            ? int64_t{indices.data<int32_t>()[position]}
                            : indices.data<int64_t>()[position];
  throw InvalidArgumentError(bad_index_message(who, position, indices.shape(), value, rows));
}

void check_divisors(ScatterOp op, const Tensor& updates, const std::string& who) {
  if (!integer_division(op, updates.dtype())) return;
  const int64_t zero =
      first_zero(updates.raw_data(), updates.num_elements(), dtype_size(updates.dtype()));
  if (zero >= 0) throw InvalidArgumentError(zero_divisor_message(who, zero, updates.shape()));
}

}  // namespace varstate::internal
