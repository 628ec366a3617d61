// The partitioners against the shard counts of TensorFlow's formulas
// (reference/formats.md section 7), worked out by hand below.
#include <catch2/catch.hpp>

#include "varstate/error.h"
#include "varstate/partitioners.h"

using namespace varstate;
using V = std::vector<int64_t>;

TEST_CASE("fixed_size_partitioner", "[partitioners]") {
  CHECK(fixed_size_partitioner(4)({10, 3}, DType::kFloat) == V{4, 1});
  CHECK(fixed_size_partitioner(20)({10, 3}, DType::kFloat) == V{10, 1});  // at most one per row
  CHECK(fixed_size_partitioner(2, 1)({10, 3}, DType::kFloat) == V{1, 2});
  CHECK(fixed_size_partitioner(3)({7}, DType::kString) == V{3});
  CHECK_THROWS_AS(fixed_size_partitioner(0), ValueError);
  CHECK_THROWS_AS(fixed_size_partitioner(2, 2)({10, 3}, DType::kFloat), ValueError);
}

TEST_CASE("variable_axis_size_partitioner", "[partitioners]") {
  // 256 bytes a row: 64 MiB holds 262144 rows -> 4 shards of 2^20 rows.
  CHECK(variable_axis_size_partitioner(64 << 20)({1 << 20, 64}, DType::kFloat) == V{4, 1});
  // (64 << 20) - 1 holds 262143 rows -> ceil(1048576 / 262143) = 5.
  CHECK(variable_axis_size_partitioner((64 << 20) - 1)({1 << 20, 64}, DType::kFloat) == V{5, 1});
  CHECK(variable_axis_size_partitioner((64 << 20) - 1, {.max_shards = 3})(
            {1 << 20, 64}, DType::kFloat) == V{3, 1});
  // Strings: 2 elements * 10 bytes = 20 bytes a row, 5 rows a shard -> 6 shards of 30 rows.
  CHECK(variable_axis_size_partitioner(100, {.bytes_per_string_element = 10})(
            {30, 2}, DType::kString) == V{6, 1});
  // A row larger than a shard: one row per shard.
  CHECK(variable_axis_size_partitioner(1)({7, 100}, DType::kFloat) == V{7, 1});
  // Axis 1 of [8, 1000] float64: a column is 64 bytes; 1000 bytes hold 15 -> ceil(1000/15) = 67.
  CHECK(variable_axis_size_partitioner(1000, {.axis = 1})({8, 1000}, DType::kDouble) == V{1, 67});
  // Real division: [3, 5] float: bytes_per_slice = 5 * 4 = 20; 50 bytes -> 2 rows -> 2 shards.
  CHECK(variable_axis_size_partitioner(50)({3, 5}, DType::kFloat) == V{2, 1});
  CHECK_THROWS_WITH(variable_axis_size_partitioner(0),
                    Catch::Matchers::Contains("max_shard_bytes must be positive, got 0"));
  CHECK_THROWS_AS(variable_axis_size_partitioner(-5), ValueError);
  CHECK_THROWS_WITH(variable_axis_size_partitioner(10, {.bytes_per_string_element = 0}),
                    Catch::Matchers::Contains("bytes_per_string_element must be positive, got 0"));
  CHECK_THROWS_AS(variable_axis_size_partitioner(10, {.max_shards = 0}), ValueError);
}

TEST_CASE("min_max_variable_partitioner", "[partitioners]") {
  // Defaults: at most one partition.
  CHECK(min_max_variable_partitioner()({1000, 100}, DType::kFloat) == V{1, 1});
  // 400000 bytes / 262144 -> ceil 2.
  CHECK(min_max_variable_partitioner({.max_partitions = 8})({1000, 100}, DType::kFloat) == V{2, 1});
  // 256 MiB -> 1024 by size, capped by max_partitions.
  CHECK(min_max_variable_partitioner({.max_partitions = 8})({1 << 20, 64}, DType::kFloat) ==
        V{8, 1});
  // Capped by the dimension.
  CHECK(min_max_variable_partitioner({.max_partitions = 8})({3, 1 << 20}, DType::kFloat) ==
        V{3, 1});
  // Strings at 16 bytes: 100 elements = 1600 bytes / 1000 -> 2.
  CHECK(min_max_variable_partitioner({.max_partitions = 5, .min_slice_size = 1000})(
            {10, 10}, DType::kString) == V{2, 1});
  CHECK(min_max_variable_partitioner({.max_partitions = 4, .axis = 1, .min_slice_size = 8})(
            {2, 6}, DType::kInt64) == V{1, 4});
  // Tiny variables still get one partition.
  CHECK(min_max_variable_partitioner({.max_partitions = 4})({1}, DType::kFloat) == V{1});
  CHECK_THROWS_MATCHES(
      min_max_variable_partitioner({.axis = 2})({4, 4}, DType::kFloat), ValueError,
      Catch::Matchers::Message("Can not partition variable along axis 2 when shape is only 2-D."));
  CHECK_THROWS_AS(min_max_variable_partitioner({.min_slice_size = 0}), ValueError);
}
