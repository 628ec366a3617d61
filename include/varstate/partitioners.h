// Partitioners: how get_variable splits a variable into shards
// (tf.fixed_size_partitioner, tf.variable_axis_size_partitioner,
// tf.min_max_variable_partitioner).
//
// A Partitioner receives the full, fully defined shape and the dtype of the
// variable to create and returns the number of partitions per axis (one
// entry per dimension; at most one entry above 1). get_variable
// (varstate/variable_scope.h) then creates the shards "NAME/part_0", ... of
// a PartitionedVariable (varstate/partitioned_variable.h). The results equal
// TensorFlow's for the same arguments:
//
//   fixed_size_partitioner(4)({10, 3}, kFloat)                 -> {4, 1}
//   variable_axis_size_partitioner(64 << 20)({1 << 20, 64}, kFloat)  -> {4, 1}
//   min_max_variable_partitioner({.max_partitions = 8})({1000, 100}, kFloat) -> {2, 1}
//
// The factories validate their arguments (ValueError naming the argument
// and its value); a partitioner throws ValueError when `axis` is not a
// dimension of the shape. Partitioners are immutable and thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "varstate/dtype.h"
#include "varstate/tensor_shape.h"

namespace varstate {

using Partitioner = std::function<std::vector<int64_t>(const TensorShape& shape, DType dtype)>;

// min(num_shards, shape[axis]) partitions along `axis`. ValueError for
// num_shards < 1 or axis < 0.
Partitioner fixed_size_partitioner(int64_t num_shards, int axis = 0);

struct VariableAxisSizeOptions {
  int axis = 0;
  // The size of one string element, for string variables (>= 1).
  int64_t bytes_per_string_element = 16;
  // At most this many shards (>= 1), taking precedence over max_shard_bytes.
  std::optional<int64_t> max_shards = std::nullopt;
};
// Shards along `axis` each at most max_shard_bytes when the axis allows it
// (otherwise one shard per slice of the axis): with
// bytes_per_slice = num_elements / shape[axis] * element size,
// slices_per_shard = max(1, floor(max_shard_bytes / bytes_per_slice)) and
// shards = ceil(shape[axis] / slices_per_shard), capped at max_shards.
// ValueError when max_shard_bytes or bytes_per_string_element is below 1,
// or max_shards is below 1. (64 << 20) - 1 keeps shards below protobuf's
// 64 MB limit.
Partitioner variable_axis_size_partitioner(int64_t max_shard_bytes,
                                           const VariableAxisSizeOptions& options = {});

struct MinMaxPartitionerOptions {
  int64_t max_partitions = 1;
  int axis = 0;
  // Bytes each partition holds at least (256 KiB).
  int64_t min_slice_size = 256 << 10;
  int64_t bytes_per_string_element = 16;
};
// max(1, min(shape[axis], max_partitions, ceil(bytes / min_slice_size)))
// partitions along `axis`, bytes = num_elements * element size. ValueError
// for min_slice_size or bytes_per_string_element below 1, and ("Can not
// partition variable along axis 2 when shape is only 2-D.") for an axis
// past the shape's rank.
Partitioner min_max_variable_partitioner(const MinMaxPartitionerOptions& options = {});

}  // namespace varstate
