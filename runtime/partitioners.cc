#include "varstate/partitioners.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "varstate/error.h"

namespace varstate {
namespace {

void check_positive(const char* function, const char* argument, int64_t value) {
  if (value < 1) {
    throw ValueError(std::string(function) + ": " + argument + " must be positive, got " +
                     std::to_string(value));
  }
}

void check_axis(const char* function, const TensorShape& shape, int axis) {
  if (axis < 0 || axis >= shape.rank()) {
    throw ValueError(std::string(function) + ": axis " + std::to_string(axis) +
                     " is not a dimension of shape " + shape.to_string());
  }
  if (!shape.is_fully_defined()) {
    throw ValueError(std::string(function) + ": shape " + shape.to_string() +
                     " is not fully defined");
  }
}

int64_t element_bytes(DType dtype, int64_t bytes_per_string_element) {
  return dtype == DType::kString ? bytes_per_string_element
                                 : static_cast<int64_t>(dtype_size(dtype));
}

std::vector<int64_t> along_axis(const TensorShape& shape, int axis, int64_t parts) {
  std::vector<int64_t> out(static_cast<size_t>(shape.rank()), 1);
  out[static_cast<size_t>(axis)] = parts;
  return out;
}

}  // namespace

Partitioner fixed_size_partitioner(int64_t num_shards, int axis) {
  check_positive("fixed_size_partitioner", "num_shards", num_shards);
  if (axis < 0)
    throw ValueError("fixed_size_partitioner: axis must be >= 0, got " + std::to_string(axis));
  return [=](const TensorShape& shape, DType) {
    check_axis("fixed_size_partitioner", shape, axis);
    return along_axis(shape, axis, std::min(num_shards, shape.dim(axis)));
  };
}

Partitioner variable_axis_size_partitioner(int64_t max_shard_bytes,
                                           const VariableAxisSizeOptions& options) {
  const char* fn = "variable_axis_size_partitioner";
  check_positive(fn, "max_shard_bytes", max_shard_bytes);
  check_positive(fn, "bytes_per_string_element", options.bytes_per_string_element);
  if (options.max_shards) check_positive(fn, "max_shards", *options.max_shards);
  return [=](const TensorShape& shape, DType dtype) {
    check_axis(fn, shape, options.axis);
    const int64_t axis_dim = shape.dim(options.axis);
    if (axis_dim == 0) return along_axis(shape, options.axis, 1);
    // TensorFlow divides in floating point: (num_elements / dim) * bytes.
    const double bytes_per_slice =
        static_cast<double>(shape.num_elements()) / static_cast<double>(axis_dim) *
        static_cast<double>(element_bytes(dtype, options.bytes_per_string_element));
    int64_t slices_per_shard = 1;
    if (bytes_per_slice > 0) {
      slices_per_shard = std::max<int64_t>(
          1,
          static_cast<int64_t>(std::floor(static_cast<double>(max_shard_bytes) / bytes_per_slice)));
    } else {
      slices_per_shard = axis_dim;
    }
    int64_t shards = (axis_dim + slices_per_shard - 1) / slices_per_shard;
    if (options.max_shards) shards = std::min(shards, *options.max_shards);
    return along_axis(shape, options.axis, shards);
  };
}

Partitioner min_max_variable_partitioner(const MinMaxPartitionerOptions& options) {
  const char* fn = "min_max_variable_partitioner";
  check_positive(fn, "min_slice_size", options.min_slice_size);
  check_positive(fn, "bytes_per_string_element", options.bytes_per_string_element);
  return [=](const TensorShape& shape, DType dtype) {
    if (options.axis >= shape.rank()) {
      throw ValueError("Can not partition variable along axis " + std::to_string(options.axis) +
                       " when shape is only " + std::to_string(shape.rank()) + "-D.");
    }
    check_axis(fn, shape, options.axis);
    const int64_t bytes =
        shape.num_elements() * element_bytes(dtype, options.bytes_per_string_element);
    const int64_t by_size = (bytes + options.min_slice_size - 1) / options.min_slice_size;
    const int64_t parts =
        std::max<int64_t>(1, std::min({shape.dim(options.axis), options.max_partitions, by_size}));
    return along_axis(shape, options.axis, parts);
  };
}

}  // namespace varstate
