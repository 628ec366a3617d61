// IndexedSlices on the CPU: construction and its checks, negation, printing,
// to_dense (duplicates sum) and sparse_mask (the reference's example).
#include <catch2/catch.hpp>

#include <sstream>

#include "tensor_util.h"
#include "varstate/error.h"
#include "varstate/indexed_slices.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

// Values of shape [n, 10] whose row i holds 100 * i + column.
Tensor row_numbered(int64_t n) {
  std::vector<float> v(n * 10);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < 10; ++c) v[i * 10 + c] = static_cast<float>(100 * i + c);
  }
  return Tensor::from_vector<float>(v, {n, 10});
}

}  // namespace

TEST_CASE("sparse_mask keeps the slices whose index is not masked", "[indexed_slices]") {
  // a contains slices at indices [12, 26, 37, 45] from a tensor of shape [1000, 10].
  IndexedSlices a(row_numbered(4), Tensor({12, 26, 37, 45}), Tensor({1000, 10}));
  CHECK(a.values().shape() == TensorShape{4, 10});
  IndexedSlices b = sparse_mask(a, Tensor({12, 45}), "b");
  CHECK(b.indices().to_vector<int32_t>() == std::vector<int32_t>{26, 37});
  CHECK(b.values().shape() == TensorShape{2, 10});
  // The value rows that went with 26 and 37: rows 1 and 2 of a.values.
  const std::vector<float> all = a.values().to_vector<float>();
  CHECK(b.values().to_vector<float>() == std::vector<float>(all.begin() + 10, all.begin() + 30));
  CHECK(b.dense_shape().has_value());
  CHECK(b.dense_tensor_shape() == TensorShape{1000, 10});
  CHECK(b.name() == "b");
  CHECK(b.dtype() == DType::kFloat);
  CHECK(b.device().is_cpu());
}

TEST_CASE("sparse_mask with int64 indices, duplicates, nothing or everything masked",
          "[indexed_slices]") {
  IndexedSlices a(row_numbered(5), Tensor::from_vector<int64_t>({7, 3, 7, 9, 1}));
  IndexedSlices b = sparse_mask(a, Tensor::from_vector<int64_t>({7}));
  CHECK(b.indices().dtype() == DType::kInt64);
  CHECK(b.indices().to_vector<int64_t>() == std::vector<int64_t>{3, 9, 1});
  CHECK(b.values().to_vector<float>()[0] == 100.f);
  CHECK(b.values().to_vector<float>()[20] == 400.f);
  IndexedSlices none = sparse_mask(a, Tensor::from_vector<int32_t>({}));
  CHECK(none.indices().num_elements() == 5);
  CHECK(compare_tensors(none.values(), a.values()).empty());
  IndexedSlices all = sparse_mask(a, Tensor({1, 3, 7, 9}));
  CHECK(all.values().shape() == TensorShape{0, 10});
  CHECK_THROWS_AS(sparse_mask(a, Tensor({1.f})), TypeError);
}

TEST_CASE("IndexedSlices checks its parts", "[indexed_slices]") {
  CHECK_THROWS_AS(IndexedSlices(Tensor({1.f, 2.f}), Tensor({0.f, 1.f})), TypeError);
  CHECK_THROWS_AS(IndexedSlices(Tensor({1.f, 2.f}), Tensor({0, 1, 2})), InvalidArgumentError);
  CHECK_THROWS_AS(IndexedSlices(Tensor(1.f), Tensor(0)), InvalidArgumentError);
  CHECK_THROWS_AS(IndexedSlices(row_numbered(2), Tensor({0, 1}), Tensor({5, 9})),
                  InvalidArgumentError);
  CHECK_THROWS_AS(IndexedSlices(row_numbered(2), Tensor({0, 1}), Tensor({5})),
                  InvalidArgumentError);
  IndexedSlices ok(row_numbered(2), Tensor({0, 1}));
  CHECK_FALSE(ok.dense_shape().has_value());
  CHECK_THROWS_AS(ok.to_dense(), ValueError);
}

TEST_CASE("negation negates the values and keeps indices and dense_shape", "[indexed_slices]") {
  IndexedSlices a(Tensor({{1.f, -2.f}, {3.f, 0.f}}), Tensor({4, 1}), Tensor({6, 2}));
  IndexedSlices n = -a;
  CHECK(n.values().to_vector<float>() == std::vector<float>{-1.f, 2.f, -3.f, 0.f});
  CHECK(n.indices().to_vector<int32_t>() == std::vector<int32_t>{4, 1});
  CHECK(n.dense_tensor_shape() == TensorShape{6, 2});
  CHECK(a.values().to_vector<float>()[0] == 1.f);  // the operand is unchanged
  IndexedSlices i(Tensor({5, 6}), Tensor({0, 1}));
  CHECK((-i).values().to_vector<int32_t>() == std::vector<int32_t>{-5, -6});
  IndexedSlices flags(Tensor({true}), Tensor({0}));
  CHECK_THROWS_AS(-flags, TypeError);
}

TEST_CASE("to_dense sums duplicate indices", "[indexed_slices]") {
  IndexedSlices a(Tensor({{1, 2}, {3, 4}, {5, 6}}), Tensor({2, 0, 2}), Tensor({4, 2}));
  Tensor dense = a.to_dense();
  CHECK(dense.shape() == TensorShape{4, 2});
  CHECK(dense.to_vector<int32_t>() == std::vector<int32_t>{3, 4, 0, 0, 6, 8, 0, 0});
  IndexedSlices bad(Tensor({{1, 2}}), Tensor({4}), Tensor({4, 2}));
  CHECK_THROWS_AS(bad.to_dense(), InvalidArgumentError);
}

TEST_CASE("IndexedSlices prints like TensorFlow's", "[indexed_slices]") {
  IndexedSlices a(Tensor({{1.f, 2.f}, {3.f, 4.f}}), Tensor({26, 37}), Tensor({1000, 2}));
  const std::string expected = "IndexedSlices(indices=" + a.indices().to_string() +
                               ", values=" + a.values().to_string() +
                               ", dense_shape=" + Tensor({1000, 2}).to_string() + ")";
  CHECK(a.to_string() == expected);
  CHECK(a.to_string().rfind("IndexedSlices(indices=[26 37], values=", 0) == 0);
  std::ostringstream os;
  os << IndexedSlices(Tensor({1.f}), Tensor({3}));
  CHECK(os.str() == "IndexedSlices(indices=[3], values=[1.])");
}
