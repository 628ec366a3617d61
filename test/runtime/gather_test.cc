// gather on Tensors, Variables and PartitionedVariables (rows routed to
// their parts), compared with a row-by-row reference loop, and its errors.
#include <catch2/catch.hpp>

#include <random>

#include "device_fixture.h"
#include "test_util.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/gather.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;
using Catch::Matchers::Contains;
using Catch::Matchers::Message;

namespace {

std::vector<float> iota(int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i);
  return out;
}

// Rows `indices` of a row-major [rows, width] table, one after another.
std::vector<float> reference_rows(const std::vector<float>& table, int64_t width,
                                  const std::vector<int64_t>& indices) {
  std::vector<float> out;
  for (int64_t i : indices) {
    out.insert(out.end(), table.begin() + i * width, table.begin() + (i + 1) * width);
  }
  return out;
}

}  // namespace

TEST_CASE_METHOD(FreshSession, "gather on a tensor: rows in index order, shape indices + row",
                 "[gather]") {
  const std::vector<float> table = iota(5 * 3);
  Tensor params = Tensor::from_vector<float>(table, {5, 3}).to(test_device());
  Tensor rows = gather(params, Tensor::from_vector<int64_t>({4, 0, 2, 2}, {2, 2}));
  CHECK(rows.shape() == TensorShape{2, 2, 3});
  CHECK(&rows.device() == &test_device());
  CHECK(rows.to_vector<float>() == reference_rows(table, 3, {4, 0, 2, 2}));
  // int32 indices; a scalar index gives one row of shape params.shape[1:].
  Tensor one = gather(params, Tensor(int32_t{3}));
  CHECK(one.shape() == TensorShape{3});
  CHECK(one.to_vector<float>() == reference_rows(table, 3, {3}));
  // A vector of scalars; no indices at all.
  Tensor v = Tensor::from_vector<int64_t>({10, 20, 30}).to(test_device());
  CHECK(gather(v, Tensor::from_vector<int32_t>({2, 0})).to_vector<int64_t>() ==
        std::vector<int64_t>{30, 10});
  Tensor none = gather(params, Tensor::from_vector<int64_t>({}));
  CHECK(none.shape() == TensorShape{0, 3});
}

TEST_CASE_METHOD(FreshSession, "gather on a variable reads its current value", "[gather]") {
  Variable w(Tensor::from_vector<float>(iota(8), {4, 2}), {.name = "w"});
  session.run(global_variables_initializer());
  w.assign_add(Tensor(1.0f));
  std::vector<float> now = iota(8);
  for (float& x : now) x += 1;
  Tensor rows = gather(w, Tensor::from_vector<int64_t>({3, 1, 3}));
  CHECK(&rows.device() == &w.device());
  CHECK(rows.to_vector<float>() == reference_rows(now, 2, {3, 1, 3}));
}

TEST_CASE_METHOD(FreshSession, "gather on a partitioned variable routes rows to their parts",
                 "[gather]") {
  const int64_t rows = 23, width = 4;
  const std::vector<float> table = iota(rows * width);
  PartitionedVariable emb =
      get_variable("emb", {.initializer = Tensor::from_vector<float>(table, {rows, width}),
                           .partitioner = fixed_size_partitioner(5)});
  PartitionedVariable cols =
      get_variable("cols", {.initializer = Tensor::from_vector<float>(table, {rows, width}),
                            .partitioner = fixed_size_partitioner(2, 1)});
  session.run(global_variables_initializer());
  REQUIRE(emb.size() == 5);
  std::mt19937_64 rng(7);
  std::vector<int64_t> ids(300);
  for (int64_t& i : ids) i = static_cast<int64_t>(rng() % rows);  // duplicates, every part
  const Tensor indices = Tensor::from_vector<int64_t>(ids, {3, 100});
  Tensor got = gather(emb, indices);
  CHECK(got.shape() == TensorShape{3, 100, width});
  CHECK(got.to_vector<float>() == reference_rows(table, width, ids));
  // Along another axis the rows span every part: same values.
  CHECK(gather(cols, indices).to_vector<float>() == reference_rows(table, width, ids));
  // Indices of one part only; the result on a chosen device.
  Tensor first = gather(emb, Tensor::from_vector<int32_t>({4, 0, 2}), {.device = "/cpu:0"});
  CHECK(first.device().is_cpu());
  CHECK(first.to_vector<float>() == reference_rows(table, width, {4, 0, 2}));
}

TEST_CASE_METHOD(FreshSession, "gather errors name the op, the position and the bound",
                 "[gather][errors]") {
  Tensor params = Tensor::from_vector<float>(iota(10), {5, 2}).to(test_device());
  CHECK_THROWS_MATCHES(gather(params, Tensor::from_vector<int64_t>({1, 5})), InvalidArgumentError,
                       Message("gather: indices[1] = 5 is not in [0, 5)"));
  CHECK_THROWS_MATCHES(gather(params, Tensor::from_vector<int32_t>({-1}), {.name = "lookup"}),
                       InvalidArgumentError, Message("lookup: indices[0] = -1 is not in [0, 5)"));
  // Indices of rank 2: the bad one named by its coordinates, as TensorFlow does.
  CHECK_THROWS_MATCHES(gather(params, Tensor::from_vector<int64_t>({0, 1, 4, 7}, {2, 2})),
                       InvalidArgumentError, Message("gather: indices[1,1] = 7 is not in [0, 5)"));
  CHECK_THROWS_AS(gather(params, Tensor::from_vector<float>({1.0f})), TypeError);
  CHECK_THROWS_WITH(gather(Tensor(1.0f), Tensor(int64_t{0})),
                    Contains("params must be at least 1-D, got shape []"));
  Variable w(Tensor::from_vector<float>(iota(4), {2, 2}), {.name = "w"});
  CHECK_THROWS_MATCHES(gather(w, Tensor::from_vector<int64_t>({2})), InvalidArgumentError,
                       Message("gather on \"w\": indices[0] = 2 is not in [0, 2)"));
  CHECK_THROWS_AS(gather(w, Tensor::from_vector<int64_t>({0})), FailedPreconditionError);
  PartitionedVariable emb =
      get_variable("emb", {.shape = TensorShape{6, 2}, .partitioner = fixed_size_partitioner(2)});
  CHECK_THROWS_AS(gather(emb, Tensor::from_vector<int64_t>({0})), FailedPreconditionError);
  session.run(global_variables_initializer());
  CHECK_THROWS_MATCHES(gather(emb, Tensor::from_vector<int64_t>({0, 6})), InvalidArgumentError,
                       Message("gather on \"emb\": indices[1] = 6 is not in [0, 6)"));
}
