// random_uniform / random_normal / truncated_normal and get_seed: TensorFlow's
// seed rules, TensorFlow's known values, statistics with fixed seeds, every
// dtype, and the error paths (which must not consume an op seed). Each test
// case runs in a fresh default graph.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "device_fixture.h"
#include "tensor_util.h"
#include "varstate/error.h"
#include "varstate/random_ops.h"
#include "varstate/random_seed.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

struct Moments {
  double mean = 0, stddev = 0, min = 1e300, max = -1e300;
};

Moments moments(const Tensor& t) {
  Tensor d = t.cast(DType::kDouble);
  std::vector<double> v = d.to_vector<double>();
  Moments m;
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= double(v.size());
  for (double x : v) m.stddev += (x - m.mean) * (x - m.mean);
  m.stddev = std::sqrt(m.stddev / double(v.size()));
  return m;
}

const DType kFloatTypes[] = {DType::kHalf, DType::kBFloat16, DType::kFloat, DType::kDouble};

}  // namespace

TEST_CASE("get_seed follows TensorFlow's rules", "[random_ops][seed]") {
  Graph g;
  CHECK_FALSE(get_seed(g, std::nullopt).has_value());
  CHECK(get_seed(g, 7) == SeedPair{DEFAULT_GRAPH_SEED, 7});
  CHECK(get_seed(g, -1) == SeedPair{DEFAULT_GRAPH_SEED, 2147483646});  // Python modulo
  g.set_random_seed(5);
  CHECK(get_seed(g, 10) == SeedPair{5, 10});
  CHECK(get_seed(g, int64_t{1} << 31) == SeedPair{5, 1});
  // Only the graph seed: the op counter supplies the op seed.
  const SeedPair first = *get_seed(g, std::nullopt);
  const SeedPair second = *get_seed(g, std::nullopt);
  CHECK(first.seed == 5);
  CHECK(second.seed == 5);
  CHECK(first.seed2 != second.seed2);
  Graph fresh;
  fresh.set_random_seed(5);
  CHECK(*get_seed(fresh, std::nullopt) == first);
  CHECK(*get_seed(fresh, std::nullopt) == second);
  // (0, 0) means "unseeded" to the kernels: replaced.
  g.set_random_seed(0);
  CHECK(get_seed(g, 0) == SeedPair{0, 2147483647});
  g.set_random_seed(2147483647);
  CHECK(get_seed(g, 2147483647) == SeedPair{0, 2147483647});
  // Without seeds, resolve_seed draws a new pair each time.
  Graph none;
  CHECK_FALSE(resolve_seed(none, std::nullopt) == resolve_seed(none, std::nullopt));
}

TEST_CASE_METHOD(FreshGraph, "random ops give TensorFlow's values", "[random_ops]") {
  SECTION("op seed 1, no graph seed: float32 uniform, exact") {
    Tensor t = random_uniform({8}, {.seed = 1});
    const std::vector<float> expected = {0.239037395f, 0.920399547f,  0.0505124331f, 0.495744467f,
                                         0.835522294f, 0.0264704227f, 0.0881130695f, 0.45666039f};
    CHECK(t.to_vector<float>() == expected);
    CHECK(&t.device() == &test_device());  // generated where the device scope says
  }
  SECTION("graph seed 5, op seed 1: random_normal([2, 2]) (TensorFlow's documentation)") {
    set_random_seed(5);
    Tensor t = random_normal({2, 2}, {.seed = 1});
    const std::vector<float> expected = {-1.3768897f, -0.012583158f, -0.169515f, 1.0824056f};
    std::vector<float> got = t.to_vector<float>();
    for (int i = 0; i < 4; ++i) CHECK(got[i] == Approx(expected[i]).margin(1e-6));
  }
  SECTION("graph seed 5, op seed 10: random_uniform([], maxval=3, int32) is 2") {
    set_random_seed(5);
    CHECK(random_uniform({}, {.maxval = 3, .dtype = DType::kInt32, .seed = 10}).scalar<int32_t>() ==
          2);
  }
  SECTION("op seed 1: truncated normal keeps draws within 2") {
    std::vector<float> got = truncated_normal({8}, {.seed = 1}).to_vector<float>();
    const float expected[] = {-0.8113182f, 1.484599f, 0.06532937f, 0.0992484f,
                              0.6396971f,  1.610871f, 0.1635356f,  -1.515706f};
    for (int i = 0; i < 8; ++i) CHECK(got[i] == Approx(expected[i]).margin(1e-5));
  }
}

TEST_CASE_METHOD(FreshGraph, "seeds: same pair same values, otherwise different",
                 "[random_ops][seed]") {
  SECTION("same op seed, no graph seed") {
    CHECK(same_bits(random_normal({100}, {.seed = 3}), random_normal({100}, {.seed = 3})));
    CHECK(same_bits(truncated_normal({100}, {.seed = 3}), truncated_normal({100}, {.seed = 3})));
    CHECK(same_bits(random_uniform({100}, {.seed = 3}), random_uniform({100}, {.seed = 3})));
  }
  SECTION("different op seeds differ") {
    CHECK_FALSE(same_bits(random_normal({100}, {.seed = 3}), random_normal({100}, {.seed = 4})));
  }
  SECTION("the graph seed changes the values") {
    Tensor a = random_uniform({100}, {.seed = 3});
    set_random_seed(11);
    CHECK_FALSE(same_bits(a, random_uniform({100}, {.seed = 3})));
  }
  SECTION("only a graph seed: successive ops differ, a fresh graph repeats them") {
    set_random_seed(42);
    Tensor a = random_normal({50});
    Tensor b = random_normal({50});
    CHECK_FALSE(same_bits(a, b));
    reset_default_graph();
    set_random_seed(42);
    CHECK(same_bits(random_normal({50}), a));
    CHECK(same_bits(random_normal({50}), b));
  }
  SECTION("no seeds: every call differs") {
    CHECK_FALSE(same_bits(random_uniform({100}), random_uniform({100})));
    CHECK_FALSE(same_bits(random_normal({100}), random_normal({100})));
  }
}

TEST_CASE_METHOD(FreshGraph, "every dtype has its shape, dtype and range", "[random_ops]") {
  for (DType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    Tensor u = random_uniform({3, 5}, {.minval = -2, .maxval = 3, .dtype = dtype, .seed = 1});
    CHECK(u.dtype() == dtype);
    CHECK(u.shape() == TensorShape{3, 5});
    Moments m = moments(u);
    CHECK(m.min >= -2);
    CHECK(m.max <= 3);
    CHECK(random_normal({7}, {.dtype = dtype, .seed = 1}).dtype() == dtype);
    CHECK(truncated_normal({7}, {.dtype = dtype, .seed = 1}).dtype() == dtype);
  }
  CHECK(random_uniform({}, {.seed = 1}).shape() == TensorShape{});
  CHECK(random_normal({0, 4}, {.seed = 1}).num_elements() == 0);
  Tensor i64 = random_uniform({1000}, {.minval = int64_t{-5000000000},
                                       .maxval = int64_t{-4999999990},
                                       .dtype = DType::kInt64,
                                       .seed = 2});
  for (int64_t v : i64.to_vector<int64_t>()) {
    CHECK(v >= -5000000000);
    CHECK(v < -4999999990);
  }
}

TEST_CASE_METHOD(FreshGraph, "statistics with fixed seeds", "[random_ops][stats]") {
  const int64_t n = 200000;
  for (DType dtype : {DType::kFloat, DType::kDouble}) {
    CAPTURE(dtype_name(dtype), kSeed);
    Moments normal =
        moments(random_normal({n}, {.mean = 2, .stddev = 3, .dtype = dtype, .seed = 17}));
    CHECK(normal.mean == Approx(2).margin(0.03));
    CHECK(normal.stddev == Approx(3).epsilon(0.01));
    Moments trunc =
        moments(truncated_normal({n}, {.mean = 2, .stddev = 3, .dtype = dtype, .seed = 17}));
    CHECK(trunc.min > 2 - 2 * 3);
    CHECK(trunc.max < 2 + 2 * 3);
    CHECK(trunc.mean == Approx(2).margin(0.03));
    CHECK(trunc.stddev == Approx(3 * 0.87962566103423978).epsilon(0.01));
    Moments uni =
        moments(random_uniform({n}, {.minval = -1, .maxval = 5, .dtype = dtype, .seed = 17}));
    CHECK(uni.min >= -1);
    CHECK(uni.max < 5);
    CHECK(uni.mean == Approx(2).margin(0.03));
    CHECK(uni.stddev == Approx(6 / std::sqrt(12.0)).epsilon(0.01));
  }
  std::vector<int32_t> ints =
      random_uniform({n}, {.minval = -3, .maxval = 4, .dtype = DType::kInt32, .seed = 5})
          .to_vector<int32_t>();
  std::vector<int64_t> count(7, 0);
  for (int32_t v : ints) {
    REQUIRE(v >= -3);
    REQUIRE(v < 4);
    ++count[v + 3];
  }
  for (int64_t c : count) CHECK(double(c) == Approx(n / 7.0).epsilon(0.03));
}

TEST_CASE_METHOD(FreshGraph, "bad arguments throw before anything happens",
                 "[random_ops][errors]") {
  CHECK_THROWS_AS(random_normal({2}, {.dtype = DType::kInt32}), TypeError);  // as TensorFlow
  CHECK_THROWS_AS(truncated_normal({2}, {.dtype = DType::kInt64}), TypeError);
  CHECK_THROWS_WITH(truncated_normal({2}, {.dtype = DType::kInt64}),
                    Catch::Contains("DataType int64 not in list of allowed values"));
  CHECK_THROWS_WITH(random_uniform({2}, {.dtype = DType::kInt32}),
                    Catch::Contains("Must specify maxval for integer dtype int32"));
  CHECK_THROWS_AS(random_uniform({2}, {.maxval = 3, .dtype = DType::kInt8}), ValueError);
  CHECK_THROWS_AS(random_uniform({2}, {.maxval = 3, .dtype = DType::kString}), ValueError);
  CHECK_THROWS_WITH(random_uniform({2}, {.minval = 5, .maxval = 3, .dtype = DType::kInt32}),
                    Catch::Contains("Need minval < maxval, got 5 >= 3"));
  CHECK_THROWS_AS(random_uniform({2}, {.minval = 3, .maxval = 3, .dtype = DType::kInt64}),
                  InvalidArgumentError);
  CHECK_THROWS_AS(random_uniform({2}, {.maxval = 2.5, .dtype = DType::kInt32}), TypeError);
  CHECK_THROWS_AS(random_normal({2}, {.stddev = Tensor({1.f, 2.f})}), InvalidArgumentError);
  CHECK_THROWS_AS(random_normal({2}, {.mean = Tensor(int64_t{1}).strongly_typed()}), TypeError);
  CHECK_THROWS_AS(random_normal(TensorShape{TensorShape::kUnknownDim, 2}), ValueError);
  // A negative stddev is not an error in TensorFlow: values are mirrored.
  Tensor pos = random_normal({16}, {.stddev = 2, .seed = 9});
  Tensor neg = random_normal({16}, {.stddev = -2, .seed = 9});
  std::vector<float> p = pos.to_vector<float>(), q = neg.to_vector<float>();
  for (int i = 0; i < 16; ++i) CHECK(p[i] == -q[i]);
  // Failed calls did not consume an op seed from the graph's counter.
  set_random_seed(3);
  CHECK_THROWS(random_normal({2}, {.dtype = DType::kInt32}));
  Tensor after_failure = random_normal({8});
  reset_default_graph();
  set_random_seed(3);
  CHECK(same_bits(random_normal({8}), after_failure));
}
