#include "varstate/indexed_slices.h"

#include <sstream>
#include <unordered_set>
#include <vector>

#include "runtime/row_gather.h"
#include "varstate/dense_update.h"
#include "varstate/error.h"
#include "varstate/scatter.h"

namespace varstate {

using internal::is_index_dtype;

IndexedSlices::IndexedSlices(const Tensor& values, const Tensor& indices,
                             std::optional<Tensor> dense_shape, std::string name)
    : values_(values),
      indices_(indices),
      dense_shape_(std::move(dense_shape)),
      name_(std::move(name)) {
  const std::string who = "IndexedSlices" + (name_.empty() ? "" : " " + quoted(name_));
  if (!values_.valid()) throw InvalidArgumentError(who + ": values is an empty tensor handle");
  if (!indices_.valid()) throw InvalidArgumentError(who + ": indices is an empty tensor handle");
  if (!is_index_dtype(indices_.dtype())) {
    throw TypeError(who + ": indices must be int32 or int64, got " +
                    std::string(dtype_name(indices_.dtype())));
  }
  if (values_.rank() < 1 || indices_.rank() != 1 ||
      indices_.shape().dim(0) != values_.shape().dim(0)) {
    throw InvalidArgumentError(who +
                               ": indices must be a vector with one entry per row of "
                               "values; indices shape " +
                               indices_.shape().to_string() + ", values shape " +
                               values_.shape().to_string());
  }
  if (dense_shape_) {
    if (!dense_shape_->valid() || !is_index_dtype(dense_shape_->dtype())) {
      throw TypeError(who + ": dense_shape must be an int32 or int64 tensor");
    }
    if (dense_shape_->rank() != 1 || dense_shape_->num_elements() != values_.rank()) {
      throw InvalidArgumentError(
          who + ": dense_shape " + dense_shape_->to_string() +
          " must be a vector of rank(values) = " + std::to_string(values_.rank()) +
          " dimensions; values shape " + values_.shape().to_string());
    }
    TensorShape dense = dense_tensor_shape();
    if (dense.tail(1) != values_.shape().tail(1)) {
      throw InvalidArgumentError(who + ": dense_shape " + dense.to_string() +
                                 " does not match the row shape of values " +
                                 values_.shape().to_string());
    }
  }
  indices_ = indices_.on(values_.device());
}

TensorShape IndexedSlices::dense_tensor_shape() const {
  if (!dense_shape_) {
    throw ValueError("IndexedSlices" + (name_.empty() ? "" : " " + quoted(name_)) +
                     " has no dense_shape");
  }
  return TensorShape(internal::host_indices(*dense_shape_));
}

Tensor IndexedSlices::to_dense() const {
  if (!dtype_is_numeric(dtype())) {
    throw TypeError("IndexedSlices::to_dense: values of dtype " + std::string(dtype_name(dtype())) +
                    " cannot be summed");
  }
  Tensor dense = Tensor::zeros(dtype(), dense_tensor_shape(), device());
  scatter_add(dense, indices_, values_,
              {.deterministic = true, .synchronous = true, .name = "IndexedSlices::to_dense"});
  return dense;
}

std::string IndexedSlices::to_string() const {
  std::string s =
      "IndexedSlices(indices=" + indices_.to_string() + ", values=" + values_.to_string();
  if (dense_shape_) s += ", dense_shape=" + dense_shape_->to_string();
  return s + ")";
}

IndexedSlices operator-(const IndexedSlices& slices) {
  const Tensor& v = slices.values();
  if (!dtype_is_numeric(v.dtype())) {
    throw TypeError("negating IndexedSlices: values of dtype " +
                    std::string(dtype_name(v.dtype())) + " cannot be negated");
  }
  Tensor negated = Tensor::zeros(v.dtype(), v.shape(), v.device());
  assign_sub(negated, v, {.name = "IndexedSlices negation"});
  return IndexedSlices(negated, slices.indices(), slices.dense_shape(), slices.name());
}

std::ostream& operator<<(std::ostream& os, const IndexedSlices& slices) {
  return os << slices.to_string();
}

IndexedSlices sparse_mask(const IndexedSlices& a, const Tensor& mask_indices,
                          std::string_view name) {
  if (!mask_indices.valid() || !is_index_dtype(mask_indices.dtype())) {
    throw TypeError("sparse_mask: mask_indices must be an int32 or int64 tensor");
  }
  if (mask_indices.rank() > 1) {
    throw InvalidArgumentError("sparse_mask: mask_indices must be a scalar or vector, got shape " +
                               mask_indices.shape().to_string());
  }
  const std::vector<int64_t> indices = internal::host_indices(a.indices());
  const std::vector<int64_t> mask =
      internal::host_indices(mask_indices.reshaped({mask_indices.num_elements()}));
  const std::unordered_set<int64_t> masked(mask.begin(), mask.end());
  std::vector<int64_t> kept_positions;
  std::vector<int64_t> kept_indices;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (masked.count(indices[i]) != 0) continue;
    kept_positions.push_back(static_cast<int64_t>(i));
    kept_indices.push_back(indices[i]);
  }
  Tensor out_indices = Tensor::from_vector<int64_t>(kept_indices);
  if (a.indices().dtype() == DType::kInt32) out_indices = out_indices.cast(DType::kInt32);
  return IndexedSlices(internal::gather_rows(a.values(), kept_positions),
                       out_indices.on(a.device()), a.dense_shape(), std::string(name));
}

}  // namespace varstate
