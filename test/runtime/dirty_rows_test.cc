// Dirty-row tracking (runtime/dirty_rows.h): which update paths
// mark which rows, how a take clears them, and the generation check that
// reports everything dirty to a saver whose marks another take consumed.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <tuple>

#include "device_fixture.h"
#include "runtime/dirty_rows.h"
#include "scatter_test_util.h"
#include "varstate/device_manager.h"
#include "varstate/optimizers.h"
#include "varstate/partitioned_variable.h"
#include "varstate/partitioners.h"
#include "varstate/scatter.h"
#include "varstate/variable_scope.h"

using namespace varstate;
using namespace varstate::testing;
using internal::dirty_rows;

namespace {

// A take after a first take that cleared the "all dirty" of initialization.
struct Tracked {
  Variable var;
  uint64_t generation;
};

Tracked tracked(const Variable& var) {
  return {var, dirty_rows(var).take(var.shape().dim(0), 0).generation};
}

internal::DirtyRows::Taken take(Tracked& t) {
  auto taken = dirty_rows(t.var).take(t.var.shape().dim(0), t.generation);
  t.generation = taken.generation;
  return taken;
}

using Rows = std::vector<int64_t>;

}  // namespace

TEST_CASE_METHOD(FreshGraph, "dirty rows: a new variable is all dirty, a take clears",
                 "[dirty_rows]") {
  Variable v = initialized_variable(Tensor({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}), "v");
  auto first = dirty_rows(v).take(3, 0);
  CHECK(first.all);
  auto second = dirty_rows(v).take(3, first.generation);
  CHECK_FALSE(second.all);
  CHECK(second.rows.empty());
}

TEST_CASE_METHOD(FreshGraph, "dirty rows: nothing marks before the first take, which is all dirty",
                 "[dirty_rows]") {
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {8, 2}), "v");
  // No saver has taken marks: a scatter keeps none (and pays nothing).
  CHECK_FALSE(dirty_rows(v).tracking());
  CHECK(dirty_rows(v).marks(8) == nullptr);
  scatter_update(v, Tensor::from_vector<int32_t>({3}), Tensor::zeros(DType::kFloat, {1, 2}));
  auto first = dirty_rows(v).take(8, 0);
  CHECK(first.all);
  // From the first take on, a scatter logs exactly its rows.
  REQUIRE(dirty_rows(v).tracking());
  scatter_add(v, Tensor::from_vector<int64_t>({6, 2}), Tensor::zeros(DType::kFloat, {2, 2}));
  auto second = dirty_rows(v).take(8, first.generation);
  CHECK_FALSE(second.all);
  CHECK(second.rows == Rows{2, 6});
}

TEST_CASE_METHOD(FreshGraph,
                 "dirty rows: a write in flight at the first take makes the next take all dirty",
                 "[dirty_rows]") {
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {4, 1}), "v");
  internal::DirtyRows& dirty = dirty_rows(v);
  uint64_t generation = 0;
  {
    // A scatter between its (null) marks and its write when the first
    // take runs: its rows are unknown to the marks.
    const internal::DirtyRows::Writing writing(dirty);
    CHECK(dirty.marks(4) == nullptr);
    auto first = dirty.take(4, 0);
    CHECK(first.all);
    generation = first.generation;
  }
  auto second = dirty.take(4, generation);
  CHECK(second.all);
  auto third = dirty.take(4, second.generation);
  CHECK_FALSE(third.all);
  CHECK(third.rows.empty());
}

TEST_CASE_METHOD(FreshGraph, "dirty rows: scatters mark the rows they index, every op",
                 "[dirty_rows]") {
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {8, 2}), "v");
  Tracked t = tracked(v);
  scatter_update(v, Tensor::from_vector<int32_t>({5, 1, 5}), Tensor::zeros(DType::kFloat, {3, 2}));
  scatter_add(v, Tensor(int64_t{7}), Tensor({1.f, 1.f}));
  scatter_max(v, Tensor::from_vector<int64_t>({1}), Tensor::zeros(DType::kFloat, {1, 2}));
  auto taken = take(t);
  CHECK_FALSE(taken.all);
  CHECK(taken.rows == Rows{1, 5, 7});
  CHECK(take(t).rows.empty());
}

TEST_CASE_METHOD(FreshGraph, "dirty rows: a bad index logs nothing", "[dirty_rows]") {
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {4, 1}), "v");
  Tracked t = tracked(v);
  CHECK_THROWS_AS(scatter_update(v, Tensor::from_vector<int32_t>({2, 9}), Tensor({{1.f}, {2.f}})),
                  InvalidArgumentError);
  auto taken = take(t);
  CHECK_FALSE(taken.all);
  if (testing_on_gpu()) {
    // The device check marks rows it has checked before it meets the bad
    // one: over-marking, never a row the call did not index.
    for (int64_t r : taken.rows) CHECK(r == 2);
  } else {
    // The CPU kernel wrote nothing and the rows are logged only after it.
    CHECK(taken.rows.empty());
  }
  CHECK(v.value().to_host().data<float>()[2] == 0.f);
}

TEST_CASE_METHOD(FreshGraph, "dirty rows: dense updates and assign mark everything",
                 "[dirty_rows]") {
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {4, 1}), "v");
  Tracked t = tracked(v);
  v.assign_add(Tensor::zeros(DType::kFloat, {4, 1}));
  CHECK(take(t).all);
  v.assign(Tensor::zeros(DType::kFloat, {4, 1}));
  CHECK(take(t).all);
  v.assign(Tensor::zeros(DType::kFloat, {6, 1}), {.validate_shape = false});
  CHECK(dirty_rows(v).take(6, t.generation).all);
}

TEST_CASE_METHOD(FreshGraph, "dirty rows: slice assign marks its rows", "[dirty_rows]") {
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {6, 2}), "v");
  Tracked t = tracked(v);
  v.slice({Slice::range(1, 3)}).assign(Tensor::zeros(DType::kFloat, {2, 2}));
  CHECK(take(t).rows == Rows{1, 2});
  v.slice({Slice::index(-1), Slice::index(0)}).assign(Tensor(1.f));
  CHECK(take(t).rows == Rows{5});
  v.slice({Slice::ellipsis(), Slice::index(0)}).assign(Tensor::zeros(DType::kFloat, {6}));
  CHECK(take(t).all);
}

TEST_CASE_METHOD(FreshGraph, "dirty rows: another saver's take makes the next one all dirty",
                 "[dirty_rows]") {
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {4, 1}), "v");
  Tracked t = tracked(v);
  dirty_rows(v).take(4, 0);  // someone else
  scatter_update(v, Tensor(1), Tensor({1.f}));
  CHECK(take(t).all);
}

TEST_CASE_METHOD(FreshSession, "dirty rows: a partitioned scatter marks each part's own rows",
                 "[dirty_rows][partitioned]") {
  PartitionedVariable w =
      get_variable("w", {.shape = TensorShape{10, 3}, .partitioner = fixed_size_partitioner(3)});
  session.run(global_variables_initializer());
  std::vector<Tracked> parts;
  for (const Variable& p : w.variables()) parts.push_back(tracked(p));
  w.scatter_add(Tensor::from_vector<int64_t>({0, 9, 4, 3}), Tensor::zeros(DType::kFloat, {4, 3}));
  // fixed_size_partitioner(3) on 10 rows: [0,4), [4,7), [7,10).
  CHECK(take(parts[0]).rows == Rows{0, 3});
  CHECK(take(parts[1]).rows == Rows{0});
  CHECK(take(parts[2]).rows == Rows{2});
}

TEST_CASE_METHOD(FreshSession,
                 "dirty rows: a partitioned scatter with only some parts tracked marks their rows",
                 "[dirty_rows][partitioned]") {
  PartitionedVariable w =
      get_variable("w", {.shape = TensorShape{10, 3}, .partitioner = fixed_size_partitioner(3)});
  session.run(global_variables_initializer());
  Tracked first = tracked(w.variables()[0]);  // parts 1 and 2 never taken
  w.scatter_add(Tensor::from_vector<int64_t>({0, 9}), Tensor::zeros(DType::kFloat, {2, 3}));
  // The tracked part's own rows, exactly: on the CPU from the parts' group
  // log, on a GPU from the part's own marks (parts are scattered one by one).
  const auto taken = take(first);
  CHECK_FALSE(taken.all);
  CHECK(taken.rows == Rows{0});
  CHECK(dirty_rows(w.variables()[1]).take(3, 0).all);
  // Every part tracked: exact rows again.
  std::vector<Tracked> parts;
  for (const Variable& p : w.variables()) parts.push_back(tracked(p));
  w.scatter_add(Tensor::from_vector<int64_t>({5}), Tensor::zeros(DType::kFloat, {1, 3}));
  CHECK(take(parts[0]).rows.empty());
  CHECK(take(parts[1]).rows == Rows{1});
  CHECK(take(parts[2]).rows.empty());
}

TEST_CASE_METHOD(FreshSession,
                 "dirty rows: sparse training ops mark the batch's rows in every slot",
                 "[dirty_rows][optimizer]") {
  using Factory = std::function<std::unique_ptr<Optimizer>()>;
  // compat.v1 sparse Adam decays m and v of every row: it marks everything.
  const std::vector<std::tuple<std::string, Factory, bool>> optimizers = {
      {"sgd", [] { return std::make_unique<GradientDescentOptimizer>(0.1); }, false},
      {"momentum", [] { return std::make_unique<MomentumOptimizer>(0.1, 0.9); }, false},
      {"adagrad", [] { return std::make_unique<AdagradOptimizer>(0.1); }, false},
      {"rowwise-adagrad", [] { return std::make_unique<RowwiseAdagradOptimizer>(0.1); }, false},
      {"adam", [] { return std::make_unique<AdamOptimizer>(); }, true},
      {"lazy-adam", [] { return std::make_unique<LazyAdamOptimizer>(); }, false},
      {"rmsprop", [] { return std::make_unique<RMSPropOptimizer>(0.01); }, false},
      {"centered-rmsprop",
       [] { return std::make_unique<RMSPropOptimizer>(0.01, RMSPropOptions{.centered = true}); },
       false},
      {"ftrl", [] { return std::make_unique<FtrlOptimizer>(0.1); }, false},
      {"adadelta", [] { return std::make_unique<AdadeltaOptimizer>(); }, false},
      {"proximal-sgd", [] { return std::make_unique<ProximalGradientDescentOptimizer>(0.1); },
       false},
      {"proximal-adagrad", [] { return std::make_unique<ProximalAdagradOptimizer>(0.1); }, false},
  };
  Device& cpu = DeviceManager::instance().cpu();
  auto ones = [&](const TensorShape& shape) {
    return Tensor::filled(DType::kFloat, shape, Tensor(1.f), cpu);
  };
  for (const auto& [name, make, every_row] : optimizers) {
    CAPTURE(name);
    Variable v = initialized_variable(ones({10, 3}), "v_" + name);
    auto opt = make();
    opt->create_slots({v});
    std::vector<Tracked> tracked_vars = {tracked(v)};
    for (const std::string& slot : opt->get_slot_names()) {
      tracked_vars.push_back(tracked(*opt->get_slot(v, slot)));
    }
    const IndexedSlices grad(ones({3, 3}), Tensor::from_vector<int64_t>({7, 2, 7}));
    opt->apply_gradients({GradientAndVariable{grad, v}});
    for (Tracked& t : tracked_vars) {
      CAPTURE(t.var.op_name());
      const internal::DirtyRows::Taken taken = take(t);
      CHECK(taken.all == every_row);
      if (!every_row) CHECK(taken.rows == Rows{2, 7});
    }
    // A dense gradient moves every row of the variable and its slots.
    opt->apply_gradients({GradientAndVariable{ones({10, 3}), v}});
    for (Tracked& t : tracked_vars) CHECK(take(t).all);
  }
}
