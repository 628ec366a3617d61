// Initializers: the reference's constant_initializer examples, zeros/ones,
// TensorFlow's known values, fans and limits, seeds resolved per call (a new random op each time),
// dtype errors, use through a Variable, and partition-awareness: a [10,7]
// tensor generated whole equals, bit for bit, its row shards (1, 3, 7) and
// column shards put back together, for every random initializer and dtype.
// Each test case runs in a fresh default graph.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "device_fixture.h"
#include "initializer_cases.h"
#include "tensor_util.h"
#include "varstate/error.h"
#include "varstate/initializers.h"
#include "varstate/random_seed.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

std::vector<double> values(const Tensor& t) { return t.cast(DType::kDouble).to_vector<double>(); }

// Row sizes of `dim` split into n parts (TensorFlow's partitioning).
std::vector<int64_t> split(int64_t dim, int64_t n) {
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < n; ++i) sizes.push_back(dim / n + (i < dim % n ? 1 : 0));
  return sizes;
}

// The full tensor reassembled from `parts` shards of init along `axis` of a
// rank-2 shape, each generated with its PartitionInfo.
Tensor from_shards(const Initializer& init, const TensorShape& full, DType dtype, int axis,
                   int64_t parts) {
  Tensor out(dtype, full);
  const size_t elem = dtype_size(dtype);
  const int64_t rows = full.dim(0), cols = full.dim(1);
  int64_t offset = 0;
  for (int64_t size : split(full.dim(axis), parts)) {
    TensorShape shape = axis == 0 ? TensorShape{size, cols} : TensorShape{rows, size};
    PartitionInfo info{
        full, axis == 0 ? std::vector<int64_t>{offset, 0} : std::vector<int64_t>{0, offset}};
    Tensor shard = init(shape, dtype, &info).to_host();
    const char* src = static_cast<const char*>(shard.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
    for (int64_t r = 0; r < shape.dim(0); ++r) {
      const int64_t row = axis == 0 ? offset + r : r;
      const int64_t col = axis == 0 ? 0 : offset;
      std::memcpy(dst + (row * cols + col) * elem, src + r * shape.dim(1) * elem,
                  shape.dim(1) * elem);
    }
    offset += size;
  }
  return out;
}

}  // namespace

TEST_CASE_METHOD(FreshGraph, "constant_initializer reproduces the reference's examples",
                 "[initializers]") {
  Initializer init = constant_initializer({0, 1, 2, 3, 4, 5, 6, 7});
  SECTION("fitting shape") {
    Variable x(bind(init, {2, 4}, DType::kFloat),
               {.name = "x", .dtype = DType::kFloat, .expected_shape = TensorShape{2, 4}});
    Session sess;
    sess.run(x.initializer());
    CHECK(x.eval(sess).to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7});
    CHECK(x.eval(sess).to_string() == "[[0. 1. 2. 3.]\n [4. 5. 6. 7.]]");
  }
  SECTION("larger shape") {
    Tensor t = init({3, 4});
    CHECK(t.dtype() == DType::kFloat);
    CHECK(t.to_string() == "[[0. 1. 2. 3.]\n [4. 5. 6. 7.]\n [7. 7. 7. 7.]]");
  }
  SECTION("smaller shape") {
    Variable x(bind(init, {2, 3}, DType::kFloat),
               {.name = "x", .dtype = DType::kFloat, .expected_shape = TensorShape{2, 3}});
    Session sess;
    CHECK_THROWS_AS(sess.run(x.initializer()), ValueError);
    CHECK_THROWS_WITH(init({2, 3}), "Too many elements provided. Needed at most 6, but received 8");
    CHECK_FALSE(x.is_initialized());
  }
  SECTION("the same from an array reshaped to [2, 4]") {
    Tensor array = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4});
    CHECK(constant_initializer(array)({3, 4}).to_string() ==
          "[[0. 1. 2. 3.]\n [4. 5. 6. 7.]\n [7. 7. 7. 7.]]");
  }
}

TEST_CASE_METHOD(FreshGraph, "constant, zeros and ones", "[initializers]") {
  CHECK(constant_initializer(2.5)({2, 2}).to_vector<float>() == std::vector<float>(4, 2.5f));
  CHECK(constant_initializer()({3}).to_vector<float>() == std::vector<float>(3, 0.f));
  CHECK(constant_initializer(7, DType::kInt64)({2}).to_vector<int64_t>() ==
        std::vector<int64_t>{7, 7});
  CHECK(constant_initializer({1, 2}, DType::kInt32)({2}, DType::kDouble).to_vector<double>() ==
        std::vector<double>{1, 2});
  CHECK(constant_initializer(Tensor::from_vector<float>({}))({2}).to_vector<float>() ==
        std::vector<float>{0, 0});
  CHECK(constant_initializer({1, 2, 3})({0, 2}).num_elements() == 0);
  CHECK_THROWS_AS(constant_initializer(1.5, DType::kInt32)({2}), TypeError);
  // partition_info is ignored: each part starts from the first value.
  PartitionInfo info{{4, 2}, {2, 0}};
  CHECK(constant_initializer({1, 2, 3})({2, 2}, DType::kFloat, &info).to_vector<float>() ==
        std::vector<float>{1, 2, 3, 3});
  for (DType dtype : {DType::kFloat, DType::kHalf, DType::kBFloat16, DType::kDouble, DType::kInt8,
                      DType::kInt32, DType::kInt64, DType::kUInt16, DType::kBool}) {
    CAPTURE(dtype_name(dtype));
    Tensor z = zeros_initializer(dtype)({3, 2});
    Tensor o = ones_initializer(dtype)({3, 2});
    CHECK(z.dtype() == dtype);
    CHECK(o.dtype() == dtype);
    CHECK(values(z) == std::vector<double>(6, 0.0));
    CHECK(values(o) == std::vector<double>(6, 1.0));
  }
  CHECK(ones_initializer()({}).scalar<float>() == 1.f);
}

TEST_CASE_METHOD(FreshGraph, "random initializers give TensorFlow's values", "[initializers]") {
  // Seed pair (87654321, 1): op seed 1, no graph seed.
  SECTION("glorot_uniform [2, 3]: limit sqrt(6 / 5)") {
    std::vector<float> got = glorot_uniform_initializer({.seed = 1})({2, 3}).to_vector<float>();
    const float expected[] = {-0.5717404f, 0.9210494f, -0.9847779f,
                              -0.0093234f, 0.7350925f, -1.0374514f};
    for (int i = 0; i < 6; ++i) CHECK(got[i] == Approx(expected[i]).margin(1e-6));
  }
  SECTION("random_uniform_initializer equals random_uniform") {
    std::vector<float> got = random_uniform_initializer({.seed = 1})({8}).to_vector<float>();
    CHECK(got[0] == 0.239037395f);
    CHECK(got[7] == 0.45666039f);
  }
  SECTION("random_normal_initializer, graph seed 5 and op seed 1") {
    set_random_seed(5);
    std::vector<float> got = random_normal_initializer({.seed = 1})({2, 2}).to_vector<float>();
    CHECK(got[0] == Approx(-1.3768897f).margin(1e-6));
    CHECK(got[3] == Approx(1.0824056f).margin(1e-6));
  }
}

TEST_CASE_METHOD(FreshGraph, "fans, limits and scales", "[initializers][stats]") {
  auto max_abs = [](const Tensor& t) {
    double m = 0;
    for (double v : values(t)) m = std::max(m, std::abs(v));
    return m;
  };
  auto stddev = [](const Tensor& t) {
    std::vector<double> v = values(t);
    double mean = 0, var = 0;
    for (double x : v) mean += x;
    mean /= double(v.size());
    for (double x : v) var += (x - mean) * (x - mean);
    return std::sqrt(var / double(v.size()));
  };
  SECTION("glorot_uniform: limit sqrt(6 / (fan_in + fan_out)), 2-D and convolution shapes") {
    for (TensorShape shape : {TensorShape{200, 300}, TensorShape{3, 3, 16, 32}, TensorShape{500}}) {
      CAPTURE(shape.to_string());
      const auto& d = shape.dims();
      double fan_in, fan_out;
      if (d.size() == 1) {
        fan_in = fan_out = double(d[0]);
      } else {
        double receptive = d.size() == 4 ? double(d[0] * d[1]) : 1.0;
        fan_in = double(d[d.size() - 2]) * receptive;
        fan_out = double(d[d.size() - 1]) * receptive;
      }
      const double limit = std::sqrt(6 / (fan_in + fan_out));
      Tensor t = glorot_uniform_initializer({.seed = 11})(shape);
      CHECK(max_abs(t) <= limit * (1 + 1e-6));
      CHECK(max_abs(t) > 0.98 * limit);
      CHECK(stddev(t) == Approx(limit / std::sqrt(3.0)).epsilon(0.03));
    }
  }
  SECTION("glorot_normal: variance 2 / (fan_in + fan_out), truncated at 2 stddev") {
    Tensor t = glorot_normal_initializer({.seed = 11})({400, 600});
    const double sd = std::sqrt(2.0 / 1000);
    CHECK(stddev(t) == Approx(sd).epsilon(0.02));
    CHECK(max_abs(t) < 2 * sd / 0.87962566103423978);
  }
  SECTION("variance_scaling modes and distributions") {
    const TensorShape shape{300, 100};
    auto make = [&](const char* mode, const char* dist) {
      return variance_scaling_initializer(
          {.scale = 2.0, .mode = mode, .distribution = dist, .seed = 5, .dtype = DType::kDouble})(
          shape);
    };
    CHECK(stddev(make("fan_in", "untruncated_normal")) ==
          Approx(std::sqrt(2.0 / 300)).epsilon(0.02));
    CHECK(stddev(make("fan_out", "Normal")) == Approx(std::sqrt(2.0 / 100)).epsilon(0.02));
    CHECK(stddev(make("fan_avg", "truncated_normal")) ==
          Approx(std::sqrt(2.0 / 200)).epsilon(0.02));
    CHECK(max_abs(make("fan_in", "uniform")) <= std::sqrt(3 * 2.0 / 300));
    CHECK(stddev(make("fan_in", "uniform")) == Approx(std::sqrt(2.0 / 300)).epsilon(0.02));
    // A scalar shape has fans (1, 1).
    CHECK(std::abs(variance_scaling_initializer({.distribution = "uniform", .seed = 1})({})
                       .scalar<float>()) <= std::sqrt(3.f));
  }
  SECTION("uniform_unit_scaling: factor * sqrt(3 / product of all dims but the last)") {
    Tensor t = uniform_unit_scaling_initializer({.factor = 1.15, .seed = 2})({4, 5, 60});
    const double limit = 1.15 * std::sqrt(3.0 / 20);
    CHECK(max_abs(t) <= limit * (1 + 1e-6));
    CHECK(max_abs(t) > 0.97 * limit);
    Tensor v = uniform_unit_scaling_initializer({.seed = 2})({50});  // input size 1
    CHECK(max_abs(v) <= std::sqrt(3.0) * (1 + 1e-6));
    CHECK(max_abs(v) > 1.5);
  }
  SECTION("fans come from the full shape of a partitioned variable") {
    PartitionInfo info{{1000, 10}, {0, 0}};
    Tensor part = glorot_uniform_initializer({.seed = 4})({10, 10}, DType::kFloat, &info);
    CHECK(max_abs(part) <= std::sqrt(6.0 / 1010) * (1 + 1e-6));
  }
}

TEST_CASE_METHOD(FreshGraph, "each call is a new random op, seeded as TensorFlow seeds it",
                 "[initializers][seed]") {
  SECTION("an op seed: every call repeats the values") {
    for (const NamedInitializer& n : random_initializers()) {
      CAPTURE(n.name);
      Initializer init = n.make(DType::kFloat);
      CHECK(same_bits(init({6, 5}), init({6, 5})));
    }
    CHECK(same_bits(truncated_normal_initializer({.seed = 8})({50}),
                    truncated_normal_initializer({.seed = 8})({50})));
    CHECK_FALSE(same_bits(truncated_normal_initializer({.seed = 8})({50}),
                          truncated_normal_initializer({.seed = 9})({50})));
  }
  SECTION("no seed: one initializer used twice gives different values") {
    for (const Initializer& init :
         {variance_scaling_initializer(), glorot_uniform_initializer(), random_normal_initializer(),
          truncated_normal_initializer(), random_uniform_initializer(),
          uniform_unit_scaling_initializer()}) {
      CHECK_FALSE(same_bits(init({50}), init({50})));
    }
    CHECK_FALSE(same_bits(random_normal_initializer()({50}), random_normal_initializer()({50})));
  }
  SECTION("only a graph seed: calls differ, and a fresh graph repeats them") {
    set_random_seed(77);
    Initializer init = glorot_uniform_initializer();
    Tensor a = init({20, 20});
    Tensor b = init({20, 20});
    Tensor c = glorot_uniform_initializer()({20, 20});
    CHECK_FALSE(same_bits(a, b));
    CHECK_FALSE(same_bits(b, c));
    reset_default_graph();
    set_random_seed(77);
    Initializer again = glorot_uniform_initializer();
    CHECK(same_bits(again({20, 20}), a));
    CHECK(same_bits(again({20, 20}), b));
    CHECK(same_bits(glorot_uniform_initializer()({20, 20}), c));
  }
  SECTION("two variables from one unseeded initializer are not symmetric") {
    Initializer init = glorot_uniform_initializer();
    Variable w1(bind(init, {8, 8}, DType::kFloat),
                {.name = "w1", .dtype = DType::kFloat, .expected_shape = TensorShape{8, 8}});
    Variable w2(bind(init, {8, 8}, DType::kFloat),
                {.name = "w2", .dtype = DType::kFloat, .expected_shape = TensorShape{8, 8}});
    Session sess;
    sess.run(global_variables_initializer());
    CHECK_FALSE(same_bits(w1.eval(sess), w2.eval(sess)));
  }
}

TEST_CASE_METHOD(FreshGraph, "initializer errors", "[initializers][errors]") {
  const auto expected = Catch::Contains("Expected floating point type, got int32.");
  CHECK_THROWS_WITH(random_normal_initializer({.dtype = DType::kInt32}), expected);
  CHECK_THROWS_WITH(truncated_normal_initializer({.dtype = DType::kInt32}), expected);
  CHECK_THROWS_WITH(uniform_unit_scaling_initializer({.dtype = DType::kInt32}), expected);
  CHECK_THROWS_WITH(glorot_uniform_initializer({.dtype = DType::kInt32}), expected);
  CHECK_THROWS_WITH(glorot_normal_initializer({.dtype = DType::kInt32}), expected);
  CHECK_THROWS_WITH(variance_scaling_initializer({.dtype = DType::kInt32}), expected);
  // ... and at call time.
  CHECK_THROWS_WITH(glorot_uniform_initializer()({2, 2}, DType::kInt32), expected);
  CHECK_THROWS_WITH(random_normal_initializer()({2}, DType::kInt32), expected);
  CHECK_THROWS_AS(random_uniform_initializer({.dtype = DType::kInt32}), ValueError);
  CHECK_THROWS_AS(random_uniform_initializer()({2}, DType::kInt64), ValueError);
  CHECK_THROWS_AS(random_uniform_initializer({.minval = 4, .maxval = 4, .dtype = DType::kInt32}),
                  InvalidArgumentError);
  CHECK(
      random_uniform_initializer({.minval = 4, .maxval = 6, .seed = 1, .dtype = DType::kInt32})({3})
          .dtype() == DType::kInt32);
  CHECK_THROWS_WITH(variance_scaling_initializer({.scale = 0}),
                    Catch::Contains("`scale` must be positive float."));
  CHECK_THROWS_WITH(variance_scaling_initializer({.mode = "fan_sum"}),
                    Catch::Contains("Invalid `mode` argument: fan_sum"));
  CHECK_THROWS_WITH(variance_scaling_initializer({.distribution = "cauchy"}),
                    Catch::Contains("Invalid `distribution` argument: cauchy"));
  CHECK_THROWS_AS(Initializer()({2}), ValueError);
  CHECK_THROWS_AS(zeros_initializer()(TensorShape{TensorShape::kUnknownDim}), ValueError);
  PartitionInfo too_far{{10, 7}, {8, 0}};
  CHECK_THROWS_AS(glorot_uniform_initializer()({3, 7}, DType::kFloat, &too_far), ValueError);
  PartitionInfo wrong_rank{{10}, {0}};
  CHECK_THROWS_AS(random_normal_initializer()({3, 7}, DType::kFloat, &wrong_rank), ValueError);
}

TEST_CASE_METHOD(FreshGraph, "shards hold exactly their slice of the whole tensor",
                 "[initializers][partition]") {
  const TensorShape full{10, 7};
  for (const NamedInitializer& n : random_initializers()) {
    std::vector<DType> dtypes = {DType::kHalf, DType::kBFloat16, DType::kFloat, DType::kDouble};
    if (n.integers) dtypes.insert(dtypes.end(), {DType::kInt32, DType::kInt64});
    for (DType dtype : dtypes) {
      Initializer init = n.make(dtype);
      Tensor whole = init(full);
      CHECK(whole.dtype() == dtype);
      for (int axis : {0, 1}) {
        for (int64_t parts : {1, 3, 7}) {
          CAPTURE(n.name, dtype_name(dtype), axis, parts);
          CHECK(same_bits(from_shards(init, full, dtype, axis, parts), whole));
        }
      }
    }
  }
}

TEST_CASE_METHOD(FreshGraph, "slices of rank-3 tensors along each axis",
                 "[initializers][partition]") {
  const TensorShape full{4, 5, 6};
  Initializer init = truncated_normal_initializer({.seed = 12});
  Tensor whole = init(full).to_host();
  const float* w = whole.data<float>();
  const std::vector<std::pair<std::vector<int64_t>, TensorShape>> slices = {{{1, 0, 0}, {2, 5, 6}},
                                                                            {{0, 2, 0}, {4, 2, 6}},
                                                                            {{0, 0, 3}, {4, 5, 2}},
                                                                            {{1, 1, 1}, {2, 3, 4}}};
  for (const auto& [offset, shape] : slices) {
    CAPTURE(shape.to_string());
    PartitionInfo info{full, offset};
    Tensor part = init(shape, DType::kFloat, &info).to_host();
    const float* p = part.data<float>();
    int64_t i = 0;
    for (int64_t a = 0; a < shape.dim(0); ++a) {
      for (int64_t b = 0; b < shape.dim(1); ++b) {
        for (int64_t c = 0; c < shape.dim(2); ++c, ++i) {
          const int64_t f = ((offset[0] + a) * 5 + offset[1] + b) * 6 + offset[2] + c;
          REQUIRE(std::memcmp(&p[i], &w[f], sizeof(float)) == 0);
        }
      }
    }
  }
}
