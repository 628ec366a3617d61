// Slicing on the CPU: strided_slice against a naive index loop (negative
// indices and steps, clamping, integer indices), the reference doc's
// slice-assign example, and every error path (with the target unchanged).
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "tensor_util.h"
#include "varstate/error.h"
#include "varstate/slice.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

// Python's slice.indices(): the indices a begin:end:step selects.
std::vector<int64_t> python_indices(const SliceSpec& s, int64_t dim) {
  if (s.is_index) return {s.begin.value() < 0 ? s.begin.value() + dim : s.begin.value()};
  const int64_t step = s.step.value_or(1);
  std::vector<int64_t> out;
  auto norm = [&](int64_t v, int64_t lo, int64_t hi) {
    return std::clamp(v < 0 ? v + dim : v, lo, hi);
  };
  if (step > 0) {
    int64_t b = s.begin ? norm(*s.begin, 0, dim) : 0, e = s.end ? norm(*s.end, 0, dim) : dim;
    for (int64_t i = b; i < e; i += step) out.push_back(i);
  } else {
    int64_t b = s.begin ? norm(*s.begin, -1, dim - 1) : dim - 1;
    int64_t e = s.end ? norm(*s.end, -1, dim - 1) : -1;
    for (int64_t i = b; i > e; i += step) out.push_back(i);
  }
  return out;
}

// The naive reference for a rank-3 tensor.
template <typename T>
std::vector<T> naive_slice3(const Tensor& t, const std::vector<SliceSpec>& specs) {
  std::vector<T> v = t.to_vector<T>();
  std::vector<std::vector<int64_t>> idx(3);
  for (int d = 0; d < 3; ++d) {
    idx[d] = python_indices(d < static_cast<int>(specs.size()) ? specs[d] : Slice::all(),
                            t.shape().dim(d));
  }
  const int64_t d1 = t.shape().dim(1), d2 = t.shape().dim(2);
  std::vector<T> out;
  for (int64_t i : idx[0]) {
    for (int64_t j : idx[1]) {
      for (int64_t k : idx[2]) out.push_back(v[(i * d1 + j) * d2 + k]);
    }
  }
  return out;
}

std::vector<std::vector<SliceSpec>> slice_cases() {
  return {
      {},
      {Slice::all(), Slice::all(), Slice::all()},
      {Slice::range(1, 3)},
      {Slice::range({}, {}, -1)},
      {Slice::range(-2, {}), Slice::range({}, -1), Slice::range({}, {}, 2)},
      {Slice::range(10, -10, -2), Slice::range(-100, 100, 3)},
      {Slice::index(-1), Slice::range(1, 2), Slice::index(0)},
      {Slice::index(2)},
      {Slice::all(), Slice::index(-5)},
      {Slice::range(2, 2)},
      {Slice::range(3, 0, -1), Slice::range({}, {}, -3)},
  };
}

}  // namespace

TEST_CASE("strided_slice matches a naive loop", "[slice]") {
  for (DType dtype :
       {DType::kFloat, DType::kInt8, DType::kHalf, DType::kInt64, DType::kComplex128}) {
    Tensor t = random_tensor(dtype, {4, 5, 6}, kSeed);
    int c = 0;
    for (const auto& specs : slice_cases()) {
      CAPTURE(dtype_name(dtype), c++);
      Tensor s = strided_slice(t, specs);
      CHECK(s.shape() == slice_shape(t.shape(), specs));
      dispatch_numeric(dtype, "test", [&](auto tag) {
        using T = decltype(tag);
        CHECK(s.to_vector<T>() == naive_slice3<T>(t, specs));
        return 0;
      });
    }
  }
  // Index dims drop out of the shape.
  Tensor t = Tensor::zeros(DType::kFloat, {4, 5, 6});
  CHECK(slice_shape(t.shape(), {Slice::index(1)}) == TensorShape({5, 6}));
  CHECK(slice_shape(t.shape(), {Slice::index(1), Slice::index(2), Slice::index(3)}) ==
        TensorShape({}));
  CHECK(slice_shape(t.shape(), {Slice::range(1, 1)}) == TensorShape({0, 5, 6}));
  // Large enough for the thread pool.
  Tensor big = random_tensor(DType::kInt32, {300, 2, 500}, kSeed);
  CHECK(strided_slice(big, {Slice::range({}, {}, -2), Slice::index(1), Slice::range(3, -3, 7)})
            .to_vector<int32_t>() ==
        naive_slice3<int32_t>(
            big, {Slice::range({}, {}, -2), Slice::range(1, 2), Slice::range(3, -3, 7)}));
}

TEST_CASE("the reference example: A[:2, :2].assign(22 * ones(2, 2))", "[slice]") {
  Tensor a({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}, {7.f, 8.f, 9.f}});
  a = a.strongly_typed();
  const std::vector<SliceSpec> top_left = {Slice::range({}, 2), Slice::range({}, 2)};
  CHECK(strided_slice(a, top_left).to_vector<float>() == std::vector<float>{1, 2, 4, 5});
  Tensor alias = a;  // shares the buffer: sees the in-place write
  strided_slice_assign(a, top_left, Tensor({{22.f, 22.f}, {22.f, 22.f}}));
  CHECK(a.to_vector<float>() == std::vector<float>{22, 22, 3, 22, 22, 6, 7, 8, 9});
  CHECK(alias.to_vector<float>() == a.to_vector<float>());
  // Reversed, strided and index-dropped regions.
  strided_slice_assign(a, {Slice::index(2), Slice::range({}, {}, -2)}, Tensor({70, 90}));
  CHECK(a.to_vector<float>() == std::vector<float>{22, 22, 3, 22, 22, 6, 90, 8, 70});
  strided_slice_assign(a, {Slice::all(), Slice::index(-1)}, Tensor({-1.f, -2.f, -3.f}));
  CHECK(a.to_vector<float>() == std::vector<float>{22, 22, -1, 22, 22, -2, 90, 8, -3});
}

TEST_CASE("string tensors slice and assign", "[slice]") {
  Tensor s = Tensor::from_vector<std::string>({"a", "b", "c", "d"});
  CHECK(strided_slice(s, {Slice::range({}, {}, -2)}).to_vector<std::string>() ==
        std::vector<std::string>{"d", "b"});
  strided_slice_assign(s, {Slice::range(1, 3)}, Tensor::from_vector<std::string>({"x", "y"}));
  CHECK(s.to_vector<std::string>() == std::vector<std::string>{"a", "x", "y", "d"});
}

TEST_CASE("bad slices raise the documented errors and change nothing", "[slice]") {
  Tensor a = Tensor({{1, 2, 3}, {4, 5, 6}}).strongly_typed();
  const std::vector<int32_t> before = a.to_vector<int32_t>();
  CHECK_THROWS_AS(strided_slice(a, {Slice::range(2, 1)}), ValueError);  // negative size
  CHECK_THROWS_AS(strided_slice(a, {Slice::all(), Slice::range(0, 2, -1)}), ValueError);
  CHECK_THROWS_AS(strided_slice(a, {Slice::range({}, {}, 0)}), ValueError);    // step 0
  CHECK_THROWS_AS(strided_slice(a, {Slice::index(2)}), InvalidArgumentError);  // out of range
  CHECK_THROWS_AS(strided_slice(a, {Slice::index(-3)}), InvalidArgumentError);
  CHECK_THROWS_AS(strided_slice(a, {Slice::all(), Slice::all(), Slice::all()}),
                  InvalidArgumentError);
  CHECK_THROWS_AS(strided_slice(Tensor(), {}), InvalidArgumentError);

  const std::vector<SliceSpec> row = {Slice::index(0)};
  // No broadcasting: a scalar or a [1,3] value does not fill a [3] slice.
  CHECK_THROWS_AS(strided_slice_assign(a, row, Tensor(7)), InvalidArgumentError);
  CHECK_THROWS_AS(strided_slice_assign(a, row, Tensor({{7, 8, 9}})), InvalidArgumentError);
  CHECK_THROWS_WITH(strided_slice_assign(a, row, Tensor({7, 8}), "v:0"),
                    Catch::Contains("v:0") && Catch::Contains("[3]") && Catch::Contains("[2]"));
  CHECK_THROWS_AS(strided_slice_assign(a, row, Tensor({1.f, 2.f, 3.f}).strongly_typed()),
                  TypeError);
  CHECK_THROWS_AS(
      strided_slice_assign(a, {Slice::range(1, 0)}, Tensor::zeros(DType::kInt32, {0, 3})),
      ValueError);
  CHECK(a.to_vector<int32_t>() == before);
  strided_slice_assign(a, row, Tensor({7, 8, 9}));  // a weak literal converts
  CHECK(a.to_vector<int32_t>() == std::vector<int32_t>{7, 8, 9, 4, 5, 6});
}

TEST_CASE("extreme steps take one element, as TensorFlow (no overflow)", "[slice]") {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const Tensor r = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  // TensorFlow 2.21: r[::INT64_MIN] == [9], r[::INT64_MAX] == [0], r[0:10:INT64_MAX] == [0].
  CHECK(strided_slice(r, {Slice::range(std::nullopt, std::nullopt, kMin)}).to_vector<int64_t>() ==
        std::vector<int64_t>{9});
  CHECK(strided_slice(r, {Slice::range(std::nullopt, std::nullopt, kMax)}).to_vector<int64_t>() ==
        std::vector<int64_t>{0});
  CHECK(strided_slice(r, {Slice::range(0, 10, kMax)}).to_vector<int64_t>() ==
        std::vector<int64_t>{0});
  CHECK(strided_slice(r, {Slice::range(kMin, kMax)}).num_elements() == 10);
  CHECK(strided_slice(r, {Slice::range(-1, kMin, kMin)}).to_vector<int64_t>() ==
        std::vector<int64_t>{9});
  Tensor target = r.clone();
  strided_slice_assign(target, {Slice::range(std::nullopt, std::nullopt, kMin)},
                       Tensor::from_vector(std::vector<int64_t>{-1}));
  CHECK(target.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, -1});
}

namespace {
// 0, 1, ..., n-1 as int64 of `shape`: element (i, j, k) of [2,3,4] is 12i + 4j + k.
Tensor iota(const TensorShape& shape) {
  std::vector<int64_t> v(shape.num_elements());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i);
  return Tensor::from_vector(v, shape);
}
using I64 = std::vector<int64_t>;
}  // namespace

TEST_CASE("ellipsis and newaxis, as tf.strided_slice's masks", "[slice]") {
  const Tensor t = iota({2, 3, 4});
  struct Case {
    const char* python;
    std::vector<SliceSpec> specs;
    TensorShape shape;
    I64 values;
  };
  const auto all = Slice::all();
  const auto ell = Slice::ellipsis();
  const auto na = Slice::newaxis();
  const I64 whole = iota({24}).to_vector<int64_t>();
  const std::vector<Case> cases = {
      {"t[..., 1]", {ell, Slice::index(1)}, {2, 3}, {1, 5, 9, 13, 17, 21}},
      {"t[1, ..., ::2]",
       {Slice::index(1), ell, Slice::range({}, {}, 2)},
       {3, 2},
       {12, 14, 16, 18, 20, 22}},
      {"t[..., ::-1, 0]",
       {ell, Slice::range({}, {}, -1), Slice::index(0)},
       {2, 3},
       {8, 4, 0, 20, 16, 12}},
      {"t[...]", {ell}, {2, 3, 4}, whole},
      {"t[0, 1, 2, ...]", {Slice::index(0), Slice::index(1), Slice::index(2), ell}, {}, {6}},
      {"t[:, newaxis]", {all, na}, {2, 1, 3, 4}, whole},
      {"t[newaxis]", {na}, {1, 2, 3, 4}, whole},
      {"t[..., newaxis]", {ell, na}, {2, 3, 4, 1}, whole},
      {"t[newaxis, ..., 0, newaxis]",
       {na, ell, Slice::index(0), na},
       {1, 2, 3, 1},
       {0, 4, 8, 12, 16, 20}},
      {"t[1, newaxis, 2]", {Slice::index(1), na, Slice::index(2)}, {1, 4}, {20, 21, 22, 23}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.python);
    CHECK(slice_shape(t.shape(), c.specs) == c.shape);
    const Tensor s = strided_slice(t, c.specs);
    CHECK(s.shape() == c.shape);
    CHECK(s.to_vector<int64_t>() == c.values);
  }
  // A scalar: the ellipsis stands for no dimension, newaxis makes a vector.
  const Tensor scalar = Tensor::from_vector(I64{5}, TensorShape({}));
  CHECK(strided_slice(scalar, {ell}).shape() == TensorShape({}));
  CHECK(strided_slice(scalar, {na, na}).shape() == TensorShape({1, 1}));
  CHECK(strided_slice(scalar, {na}).to_vector<int64_t>() == I64{5});
}

TEST_CASE("slice assign through an ellipsis or a newaxis", "[slice]") {
  Tensor a = iota({2, 3});
  strided_slice_assign(a, {Slice::ellipsis(), Slice::index(0)}, Tensor::from_vector(I64{10, 20}));
  CHECK(a.to_vector<int64_t>() == I64{10, 1, 2, 20, 4, 5});
  // The value carries the newaxis dimension: v[:, tf.newaxis, 1] is [2, 1].
  const std::vector<SliceSpec> column = {Slice::all(), Slice::newaxis(), Slice::index(1)};
  strided_slice_assign(a, column, Tensor::from_vector(I64{-1, -2}, TensorShape({2, 1})));
  CHECK(a.to_vector<int64_t>() == I64{10, -1, 2, 20, -2, 5});
  strided_slice_assign(a, {Slice::newaxis(), Slice::ellipsis(), Slice::range(1, 0, -1)},
                       Tensor::from_vector(I64{7, 8}, TensorShape({1, 2, 1})));
  CHECK(a.to_vector<int64_t>() == I64{10, 7, 2, 20, 8, 5});
}

TEST_CASE("bad ellipses and newaxes raise and change nothing", "[slice]") {
  Tensor a = iota({2, 3});
  const I64 before = a.to_vector<int64_t>();
  const auto ell = Slice::ellipsis();
  CHECK_THROWS_AS(strided_slice(a, {ell, Slice::index(0), ell}), ValueError);
  CHECK_THROWS_WITH(strided_slice(a, {ell, ell}),
                    Catch::Contains("Multiple ellipses in slice spec not allowed"));
  CHECK_THROWS_AS(slice_shape(a.shape(), {ell, ell}), ValueError);
  // Three dims consumed by a rank-2 tensor, with or without an ellipsis;
  // newaxis consumes none.
  CHECK_THROWS_WITH(strided_slice(a, {Slice::index(0), ell, Slice::index(0), Slice::index(0)}),
                    Catch::Contains("too many indices: 3") && Catch::Contains("[2,3]"));
  CHECK_NOTHROW(strided_slice(
      a, {Slice::newaxis(), Slice::index(0), Slice::newaxis(), Slice::index(0), Slice::newaxis()}));
  SliceSpec both = Slice::index(0);
  both.is_newaxis = true;
  CHECK_THROWS_WITH(strided_slice(a, {Slice::all(), both}),
                    Catch::Contains("slice spec 1") && Catch::Contains("more than one"));

  const std::vector<SliceSpec> column = {Slice::all(), Slice::newaxis(), Slice::index(1)};
  CHECK_THROWS_WITH(strided_slice_assign(a, column, Tensor::from_vector(I64{1, 2}), "v"),
                    Catch::Contains("\"v\"") && Catch::Contains("[2,1]") && Catch::Contains("[2]"));
  CHECK_THROWS_AS(strided_slice_assign(a, {ell, ell}, a.clone()), ValueError);
  CHECK_THROWS_AS(strided_slice_assign(a, {ell, Slice::index(3)}, Tensor::from_vector(I64{1, 2})),
                  InvalidArgumentError);
  CHECK(a.to_vector<int64_t>() == before);
}
