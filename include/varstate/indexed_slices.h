// IndexedSlices: a sparse set of rows of a larger dense tensor (TensorFlow's
// tf.IndexedSlices), as produced by the gradient of a gather and consumed by
// the scatter ops (varstate/scatter.h, Variable::scatter_sub).
//
//   IndexedSlices g(values, Tensor({12, 26, 37, 45}), Tensor({1000, 10}));
//   // values: [4, 10]; the dense tensor has dense[g.indices[i], :] = values[i, :]
//   IndexedSlices b = sparse_mask(g, Tensor({12, 45}));  // rows 26 and 37
//   Tensor dense = g.to_dense();                          // [1000, 10]
//
// An IndexedSlices holds Tensor handles (sharing their buffers); it is
// immutable, cheap to copy and safe to share between threads.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "varstate/tensor.h"

namespace varstate {

class IndexedSlices {
 public:
  // `values` of shape [D0, D1, ..., Dn] (rank >= 1, any dtype), `indices` a
  // 1-D int32/int64 tensor of D0 row numbers, `dense_shape` (optional) a 1-D
  // int32/int64 tensor of rank n+1 naming the dense shape. Indices are moved
  // to the values' device. Throws TypeError for index dtypes and
  // InvalidArgumentError when the shapes disagree (both named).
  IndexedSlices(const Tensor& values, const Tensor& indices,
                std::optional<Tensor> dense_shape = std::nullopt, std::string name = {});

  const Tensor& values() const { return values_; }
  const Tensor& indices() const { return indices_; }
  const std::optional<Tensor>& dense_shape() const { return dense_shape_; }
  // The dtype of values().
  DType dtype() const { return values_.dtype(); }
  // The device holding values() (and indices()).
  Device& device() const { return values_.device(); }
  // The name given at construction ("" if none).
  const std::string& name() const { return name_; }

  // dense_shape() as a TensorShape; ValueError if there is none.
  TensorShape dense_tensor_shape() const;

  // The dense tensor, on device(): zeros of dense_shape with the values
  // added at their rows, so that duplicate indices sum. ValueError without
  // dense_shape; InvalidArgumentError for an index outside dense_shape[0];
  // TypeError for non-numeric values.
  Tensor to_dense() const;

  // "IndexedSlices(indices=[26 37], values=[[...]], dense_shape=[1000 10])"
  // (dense_shape left out when absent). Waits for GPU tensors.
  std::string to_string() const;

 private:
  Tensor values_;
  Tensor indices_;
  std::optional<Tensor> dense_shape_;
  std::string name_;
};

// The same slices with their values negated (the same indices and
// dense_shape). Integer values wrap around. TypeError for non-numeric values.
IndexedSlices operator-(const IndexedSlices& slices);

std::ostream& operator<<(std::ostream& os, const IndexedSlices& slices);

// The slices of `a` whose index is not in `mask_indices` (1-D int32/int64,
// any device), in their original order (tf.sparse_mask). The result lives on
// a's device. Waits for a GPU to read the indices; the kept rows are
// gathered on the device.
IndexedSlices sparse_mask(const IndexedSlices& a, const Tensor& mask_indices,
                          std::string_view name = {});

}  // namespace varstate
