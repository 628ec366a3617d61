// gather on Tensors, Variables and PartitionedVariables (rows routed to
// their parts), compared with a row-by-row reference loop, and its errors;
// gather_gradients (the gradient of a partitioned gather) against a
// hand-routed reference and applied by an optimizer.
#include <catch2/catch.hpp>

#include <random>

#include "device_fixture.h"
#include "test_util.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/gather.h"
#include "varstate/optimizers.h"
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

TEST_CASE_METHOD(FreshSession,
                 "gather of rows of every copied size, batches shorter and longer than the "
                 "kernel's prefetch ring: the reference rows",
                 "[gather]") {
  // Rows of 32 to 256 bytes are copied with a constant size, each looked
  // up 16 or 32 rows ahead (a ring of sources); other sizes by memcpy. Batch
  // lengths around the ring's sizes and far past them, whole tables and
  // tables in 5 parts (the part found per row).
  const int64_t rows = 97;
  std::mt19937_64 rng(23);
  for (const int64_t width : {int64_t{3}, int64_t{8}, int64_t{16}, int64_t{32}, int64_t{64}}) {
    const std::vector<float> table = iota(rows * width);
    const Tensor params = Tensor::from_vector<float>(table, {rows, width});
    PartitionedVariable parts =
        get_variable("emb_" + std::to_string(width),
                     {.initializer = params, .partitioner = fixed_size_partitioner(5)});
    session.run(global_variables_initializer());
    for (const int64_t n : {1, 15, 16, 17, 31, 32, 33, 1000}) {
      CAPTURE(width, n);
      std::vector<int64_t> ids(static_cast<size_t>(n));
      for (int64_t& i : ids) i = static_cast<int64_t>(rng() % rows);
      const Tensor indices = Tensor::from_vector<int64_t>(ids);
      const std::vector<float> want = reference_rows(table, width, ids);
      CHECK(gather(params, indices).to_vector<float>() == want);
      CHECK(gather(parts, indices).to_vector<float>() == want);
    }
  }
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

TEST_CASE_METHOD(FreshSession,
                 "gather with indices on the params' device: the same rows, shapes and errors",
                 "[gather]") {
  // On a GPU the indices stay there: checked by a kernel, the rows gathered
  // by another, the check's record the one thing read back.
  Device& dev = test_device();
  const std::vector<float> table = iota(5 * 3);
  Tensor params = Tensor::from_vector<float>(table, {5, 3}).to(dev);
  std::mt19937_64 rng(11);
  std::vector<int64_t> ids(1000);
  for (int64_t& i : ids) i = static_cast<int64_t>(rng() % 5);
  for (DType index_dtype : {DType::kInt64, DType::kInt32}) {
    CAPTURE(dtype_name(index_dtype));
    const Tensor idx = Tensor::from_vector<int64_t>(ids, {10, 100}).cast(index_dtype).to(dev);
    Tensor rows = gather(params, idx);
    CHECK(rows.shape() == TensorShape{10, 100, 3});
    CHECK(&rows.device() == &dev);
    CHECK(rows.to_vector<float>() == reference_rows(table, 3, ids));
    // A scalar index; no indices.
    CHECK(gather(params, Tensor::from_vector<int64_t>({4}, {}).cast(index_dtype).to(dev))
              .to_vector<float>() == reference_rows(table, 3, {4}));
    CHECK(gather(params, Tensor::from_vector<int64_t>({}).cast(index_dtype).to(dev)).shape() ==
          TensorShape{0, 3});
    // The first bad position, named as the host check names it.
    std::vector<int64_t> bad = ids;
    bad[537] = 5;
    bad[901] = -3;
    CHECK_THROWS_MATCHES(
        gather(params, Tensor::from_vector<int64_t>(bad, {10, 100}).cast(index_dtype).to(dev)),
        InvalidArgumentError, Message("gather: indices[5,37] = 5 is not in [0, 5)"));
    // Rows of no bytes and a table of no rows still check every index.
    Tensor empty_rows = Tensor::zeros(DType::kFloat, {5, 0}, dev);
    CHECK(gather(empty_rows, Tensor::from_vector<int64_t>({4, 0}).cast(index_dtype).to(dev))
              .shape() == TensorShape{2, 0});
    CHECK_THROWS_MATCHES(
        gather(empty_rows, Tensor::from_vector<int64_t>({0, 5}).cast(index_dtype).to(dev)),
        InvalidArgumentError, Message("gather: indices[1] = 5 is not in [0, 5)"));
    CHECK_THROWS_MATCHES(gather(Tensor::zeros(DType::kFloat, {0, 3}, dev),
                                Tensor::from_vector<int64_t>({0}).cast(index_dtype).to(dev)),
                         InvalidArgumentError, Message("gather: indices[0] = 0 is not in [0, 0)"));
  }
  // A variable: its live value, its errors; non-integer indices on the device.
  Variable w(Tensor::from_vector<float>(table, {5, 3}), {.name = "w"});
  CHECK_THROWS_AS(gather(w, Tensor::from_vector<int64_t>({0}).to(dev)), FailedPreconditionError);
  session.run(global_variables_initializer());
  w.assign_add(Tensor(1.0f));
  std::vector<float> now = table;
  for (float& x : now) x += 1;
  const Tensor idx = Tensor::from_vector<int64_t>(ids).to(dev);
  CHECK(gather(w, idx).to_vector<float>() == reference_rows(now, 3, ids));
  CHECK_THROWS_MATCHES(gather(w, Tensor::from_vector<int32_t>({1, 7}).to(dev)),
                       InvalidArgumentError,
                       Message("gather on \"w\": indices[1] = 7 is not in [0, 5)"));
  CHECK_THROWS_AS(gather(w, Tensor::from_vector<float>({1.0f}).to(dev)), TypeError);
  CHECK_THROWS_AS(gather(params, Tensor::from_vector<float>({1.0f}).to(dev)), TypeError);
  // The variable is unchanged by the failed gathers.
  CHECK(w.value().to_vector<float>() == now);
}

namespace {

// The IndexedSlices of gather_gradients' pair `k`, as host vectors.
struct PartGradient {
  std::vector<int64_t> ids;
  std::vector<float> rows;
  std::vector<int64_t> dense_shape;
};

PartGradient part_gradient(const std::vector<GradientAndVariable>& grads, size_t k) {
  const IndexedSlices& g = std::get<IndexedSlices>(grads[k].grad);
  REQUIRE(g.dense_shape().has_value());
  return {g.indices().to_vector<int64_t>(), g.values().to_vector<float>(),
          g.dense_shape()->to_vector<int64_t>()};
}

}  // namespace

TEST_CASE_METHOD(FreshSession, "gather_gradients: one IndexedSlices per part, ids re-based",
                 "[gather]") {
  const int64_t width = 2;
  PartitionedVariable emb = get_variable(
      "emb", {.shape = TensorShape{10, width}, .partitioner = fixed_size_partitioner(3)});
  REQUIRE(emb.offsets() == std::vector<int64_t>{0, 4, 7, 10});  // parts of 4, 3, 3 rows
  // Row k of the gradient is {k, -k}; ids with a duplicate, none in part 1
  // but 4 and 5, every part hit.
  const std::vector<int64_t> ids = {9, 0, 4, 0, 5};
  std::vector<float> g;
  for (int k = 0; k < 5; ++k) g.insert(g.end(), {float(k), -float(k)});
  const Tensor grads = Tensor::from_vector<float>(g, {5, width}).to(test_device());
  const std::vector<GradientAndVariable> out =
      gather_gradients(emb, Tensor::from_vector<int64_t>(ids).to(test_device()), grads);
  REQUIRE(out.size() == 3);
  for (size_t k = 0; k < 3; ++k) {
    CHECK(out[k].var.same_as(emb[k]));
    CHECK(&std::get<IndexedSlices>(out[k].grad).device() == &emb[k].device());
  }
  const PartGradient p0 = part_gradient(out, 0), p1 = part_gradient(out, 1),
                     p2 = part_gradient(out, 2);
  CHECK(p0.ids == std::vector<int64_t>{0, 0});  // rows 0 and 0, in batch order
  CHECK(p0.rows == std::vector<float>{1, -1, 3, -3});
  CHECK(p0.dense_shape == std::vector<int64_t>{4, width});
  CHECK(p1.ids == std::vector<int64_t>{0, 1});  // rows 4 and 5
  CHECK(p1.rows == std::vector<float>{2, -2, 4, -4});
  CHECK(p1.dense_shape == std::vector<int64_t>{3, width});
  CHECK(p2.ids == std::vector<int64_t>{2});  // row 9
  CHECK(p2.rows == std::vector<float>{0, 0});
  // Ids of one part only: the other parts get empty IndexedSlices.
  const std::vector<GradientAndVariable> one = gather_gradients(
      emb, Tensor::from_vector<int32_t>({8, 7}), Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}));
  CHECK(part_gradient(one, 0).ids.empty());
  CHECK(std::get<IndexedSlices>(one[0].grad).values().shape() == TensorShape{0, width});
  CHECK(part_gradient(one, 2).ids == std::vector<int64_t>{1, 0});
  CHECK(part_gradient(one, 2).rows == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE_METHOD(FreshSession, "gather_gradients applied by SGD equal a scatter_sub of the table",
                 "[gather]") {
  const int64_t rows = 23, width = 4;
  const std::vector<float> table = iota(rows * width);
  auto make = [&](const std::string& name) {
    return PartitionedVariable(
        get_variable(name, {.initializer = Tensor::from_vector<float>(table, {rows, width}),
                            .partitioner = fixed_size_partitioner(5)}));
  };
  PartitionedVariable emb = make("emb"), ref = make("ref");
  session.run(global_variables_initializer());
  std::mt19937_64 rng(11);
  std::vector<int64_t> ids(64);
  for (int64_t& i : ids) i = static_cast<int64_t>(rng() % rows);  // duplicates, every part
  std::vector<float> g(ids.size() * width);
  for (float& x : g) x = static_cast<float>(rng() % 17) * 0.25f - 2.0f;
  const Tensor grads = Tensor::from_vector<float>(g, {8, 8, width});  // ids of rank 2
  const Tensor indices = Tensor::from_vector<int64_t>(ids, {8, 8});
  GradientDescentOptimizer sgd(0.5);
  sgd.apply_gradients(gather_gradients(emb, indices, grads));
  // SGD's sparse update is var[id] -= lr * g row by row, duplicates in turn.
  std::vector<float> scaled(g);
  for (float& x : scaled) x *= 0.5f;
  ref.scatter_sub(Tensor::from_vector<int64_t>(ids),
                  Tensor::from_vector<float>(scaled, {static_cast<int64_t>(ids.size()), width}));
  CHECK(emb.as_tensor().to_vector<float>() == ref.as_tensor().to_vector<float>());
  CHECK(emb.as_tensor().to_vector<float>() != table);
}

TEST_CASE_METHOD(FreshSession, "gather_gradients of one part copies nothing", "[gather]") {
  Variable w(Tensor::from_vector<float>(iota(6), {3, 2}), {.name = "w"});
  PartitionedVariable one("w", TensorShape{3, 2}, DType::kFloat, {w}, {1, 1});
  const Tensor grads = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}).to(w.device());
  const std::vector<GradientAndVariable> out =
      gather_gradients(one, Tensor::from_vector<int64_t>({2, 0}), grads);
  REQUIRE(out.size() == 1);
  CHECK(std::get<IndexedSlices>(out[0].grad).values().raw_data() == grads.raw_data());
  CHECK(part_gradient(out, 0).ids == std::vector<int64_t>{2, 0});
}

TEST_CASE_METHOD(FreshSession, "gather_gradients errors name the table and the mistake",
                 "[gather][errors]") {
  PartitionedVariable emb =
      get_variable("emb", {.shape = TensorShape{6, 2}, .partitioner = fixed_size_partitioner(2)});
  const Tensor grads = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  CHECK_THROWS_MATCHES(gather_gradients(emb, Tensor::from_vector<int64_t>({0, 6}), grads),
                       InvalidArgumentError,
                       Message("gather_gradients on \"emb\": indices[1] = 6 is not in [0, 6)"));
  CHECK_THROWS_MATCHES(
      gather_gradients(emb, Tensor::from_vector<int64_t>({0, 1, 2}), grads), InvalidArgumentError,
      Message("gather_gradients on \"emb\": grads must have shape [3,2] (the indices' shape, "
              "then a row's), got [2,2]"));
  CHECK_THROWS_MATCHES(
      gather_gradients(emb, Tensor::from_vector<int64_t>({0, 1}),
                       Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2})),
      TypeError,
      Message("gather_gradients on \"emb\": grads must be float32 as the table, got float64"));
  CHECK_THROWS_AS(gather_gradients(emb, Tensor::from_vector<float>({0, 1}), grads), TypeError);
  PartitionedVariable cols = get_variable(
      "cols", {.shape = TensorShape{2, 6}, .partitioner = fixed_size_partitioner(2, 1)});
  CHECK_THROWS_MATCHES(gather_gradients(cols, Tensor::from_vector<int64_t>({0, 1}),
                                        Tensor::from_vector<float>(iota(12), {2, 6})),
                       InvalidArgumentError,
                       Message("gather_gradients on \"cols\": the table must be partitioned along "
                               "axis 0, not axis 1"));
}
