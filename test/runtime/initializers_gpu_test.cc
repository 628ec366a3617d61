// Random ops and initializers on the GPU: every initializer and dtype gives
// the CPU's values bit for bit, shards generated on the GPU equal their
// slices of the whole tensor generated on the CPU, and a variable placed on
// the GPU is initialized there.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "initializer_cases.h"
#include "tensor_util.h"
#include "varstate/device_manager.h"
#include "varstate/initializers.h"
#include "varstate/placement.h"
#include "varstate/random_ops.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

std::vector<DType> dtypes_for(const NamedInitializer& n) {
  std::vector<DType> d = {DType::kHalf, DType::kBFloat16, DType::kFloat, DType::kDouble};
  if (n.integers) d.insert(d.end(), {DType::kInt32, DType::kInt64});
  return d;
}

}  // namespace

TEST_CASE("initializers on the GPU equal the CPU's bit for bit", "[gpu][initializers]") {
  reset_default_graph();
  Device& gpu = DeviceManager::instance().gpu(0);
  for (const NamedInitializer& n : all_initializers()) {
    for (DType dtype : dtypes_for(n)) {
      for (TensorShape shape :
           {TensorShape{1}, TensorShape{7}, TensorShape{33, 129}, TensorShape{3, 3, 64, 128}}) {
        CAPTURE(n.name, dtype_name(dtype), shape.to_string());
        Initializer init = n.make(dtype);
        if (n.name == std::string("constant") && shape.num_elements() < 3) {
          // More values than elements: refused on either device, as TensorFlow does.
          DeviceScope scope("/gpu:0");
          CHECK_THROWS_AS(init(shape), ValueError);
          continue;
        }
        Tensor on_gpu, on_cpu;
        {
          DeviceScope scope("/gpu:0");
          on_gpu = init(shape);
        }
        {
          DeviceScope scope("/cpu:0");
          on_cpu = init(shape);
        }
        CHECK(&on_gpu.device() == &gpu);
        CHECK(on_cpu.on_cpu());
        CHECK(same_bits(on_gpu, on_cpu));
      }
    }
  }
}

TEST_CASE("random ops on the GPU equal the CPU's bit for bit", "[gpu][random_ops]") {
  reset_default_graph();
  const TensorShape shape{1 << 20};
  for (DType dtype : {DType::kHalf, DType::kBFloat16, DType::kFloat, DType::kDouble}) {
    CAPTURE(dtype_name(dtype));
    Tensor gu, gn, gt;
    {
      DeviceScope scope("/gpu:0");
      gu = random_uniform(shape, {.minval = -1, .maxval = 2, .dtype = dtype, .seed = 5});
      gn = random_normal(shape, {.mean = 1, .stddev = 3, .dtype = dtype, .seed = 5});
      gt = truncated_normal(shape, {.dtype = dtype, .seed = 5});
      CHECK_FALSE(gu.on_cpu());
    }
    DeviceScope scope("/cpu:0");
    CHECK(same_bits(gu,
                    random_uniform(shape, {.minval = -1, .maxval = 2, .dtype = dtype, .seed = 5})));
    CHECK(same_bits(gn, random_normal(shape, {.mean = 1, .stddev = 3, .dtype = dtype, .seed = 5})));
    CHECK(same_bits(gt, truncated_normal(shape, {.dtype = dtype, .seed = 5})));
  }
  DeviceScope gpu_scope("/gpu:0");
  Tensor ints =
      random_uniform({1000}, {.minval = -7, .maxval = 7, .dtype = DType::kInt64, .seed = 5});
  DeviceScope cpu_scope("/cpu:0");
  CHECK(same_bits(
      ints,
      random_uniform({1000}, {.minval = -7, .maxval = 7, .dtype = DType::kInt64, .seed = 5})));
}

TEST_CASE("shards generated on the GPU equal the whole tensor generated on the CPU",
          "[gpu][initializers][partition]") {
  reset_default_graph();
  const TensorShape full{10, 7};
  for (const NamedInitializer& n : all_initializers()) {
    for (DType dtype : dtypes_for(n)) {
      if (n.name == "constant") continue;  // ignores partition_info by design
      Initializer init = n.make(dtype);
      Tensor whole;
      {
        DeviceScope scope("/cpu:0");
        whole = init(full);
      }
      const size_t elem = dtype_size(dtype);
      for (int axis : {0, 1}) {
        for (int64_t parts : {1, 3, 7}) {
          CAPTURE(n.name, dtype_name(dtype), axis, parts);
          Tensor joined(dtype, full);
          int64_t offset = 0;
          for (int64_t i = 0; i < parts; ++i) {
            const int64_t size = full.dim(axis) / parts + (i < full.dim(axis) % parts ? 1 : 0);
            TensorShape shape = axis == 0 ? TensorShape{size, 7} : TensorShape{10, size};
            PartitionInfo info{full, axis == 0 ? std::vector<int64_t>{offset, 0}
                                               : std::vector<int64_t>{0, offset}};
            Tensor shard;
            {
              DeviceScope scope("/gpu:0");
              shard = init(shape, dtype, &info);
              CHECK_FALSE(shard.on_cpu());
            }
            Tensor host = shard.to_host();
            for (int64_t r = 0; r < shape.dim(0); ++r) {
              const int64_t row = axis == 0 ? offset + r : r;
              const int64_t col = axis == 0 ? 0 : offset;
              std::memcpy(static_cast<char*>(joined.raw_data()) + (row * 7 + col) * elem,
                          static_cast<const char*>(host.raw_data()) + r * shape.dim(1) * elem,
                          shape.dim(1) * elem);
            }
            offset += size;
          }
          CHECK(same_bits(joined, whole));
        }
      }
    }
  }
}

TEST_CASE("a GPU variable's initializer runs on the GPU", "[gpu][initializers][variable]") {
  reset_default_graph();
  Device& gpu = DeviceManager::instance().gpu(0);
  Initializer init = glorot_uniform_initializer({.seed = 1});
  Tensor expected;
  {
    DeviceScope scope("/cpu:0");
    expected = init({64, 32});
  }
  DeviceScope scope("/gpu:0");
  Variable w(bind(init, {64, 32}, DType::kFloat),
             {.name = "w", .dtype = DType::kFloat, .expected_shape = TensorShape{64, 32}});
  Session sess;
  sess.run(global_variables_initializer());
  CHECK(&w.value().device() == &gpu);
  CHECK(same_bits(w.value(), expected));
}
