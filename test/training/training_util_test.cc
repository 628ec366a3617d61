// get_global_step and get_or_create_global_step (varstate/training_util.h)
// against TensorFlow's tf.compat.v1.train: the variable's name, dtype,
// shape, collections and initial value; finding it by collection or by
// name; its checks.
#include <catch2/catch.hpp>

#include <algorithm>

#include "device_fixture.h"
#include "varstate/error.h"
#include "varstate/graph.h"
#include "varstate/session.h"
#include "varstate/training_util.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

bool in_collection(const std::string& key, const Variable& v) {
  const std::vector<Variable> c = get_default_graph().get_collection_variables(key);
  return std::any_of(c.begin(), c.end(), [&](const Variable& x) { return x.same_as(v); });
}

}  // namespace

TEST_CASE_METHOD(FreshGraph, "get_or_create_global_step makes TensorFlow's global step",
                 "[global_step]") {
  CHECK_FALSE(get_global_step().has_value());
  Variable step = [] {
    NameScope scope("train");  // a name scope does not change its name
    return get_or_create_global_step();
  }();
  CHECK(step.name() == "global_step:0");
  CHECK(step.dtype() == DType::kInt64);
  CHECK(step.shape() == TensorShape{});
  CHECK_FALSE(step.trainable());
  CHECK(in_collection(GraphKeys::GLOBAL_VARIABLES, step));
  CHECK(in_collection(GraphKeys::GLOBAL_STEP, step));
  CHECK_FALSE(in_collection(GraphKeys::TRAINABLE_VARIABLES, step));
  CHECK_FALSE(step.is_initialized());
  Session sess;
  sess.run(global_variables_initializer());
  CHECK(step.value().to_vector<int64_t>() == std::vector<int64_t>{0});
  // Found again, not made twice.
  CHECK(get_or_create_global_step().same_as(step));
  CHECK(get_global_step()->same_as(step));
  CHECK(get_default_graph().variables().size() == 1);
}

TEST_CASE_METHOD(FreshGraph, "get_global_step finds a step by name, and checks it",
                 "[global_step]") {
  Graph other;
  CHECK_FALSE(get_global_step(&other).has_value());
  Variable made = get_or_create_global_step(&other);
  CHECK(&made.graph() == &other);
  CHECK(get_global_step(&other)->same_as(made));
  CHECK_FALSE(get_global_step().has_value());
  // A variable named "global_step" outside the collection, as programs
  // build it by hand.
  Variable by_hand(Tensor(int64_t{5}), {.trainable = false, .name = "global_step"});
  CHECK(get_global_step()->same_as(by_hand));
  CHECK(get_or_create_global_step().same_as(by_hand));
  {
    Graph g;
    auto guard = g.as_default();
    Variable floats(Tensor(1.f), {.name = "global_step"});
    CHECK_THROWS_AS(get_global_step(), TypeError);
    CHECK_THROWS_WITH(get_global_step(), Catch::Contains("does not have integer type: float32"));
    CHECK_THROWS_AS(get_or_create_global_step(), TypeError);
  }
  {
    Graph g;
    auto guard = g.as_default();
    Variable vector(Tensor::from_vector<int64_t>({1, 2}, {2}), {.name = "global_step"});
    CHECK_THROWS_AS(get_global_step(), TypeError);
    CHECK_THROWS_WITH(get_global_step(), Catch::Contains("is not scalar"));
  }
  // Several in the collection: none, as TensorFlow (which logs an error).
  Graph g;
  auto guard = g.as_default();
  Variable a(Tensor(int64_t{0}), {.collections = std::vector<std::string>{GraphKeys::GLOBAL_STEP}});
  Variable b(Tensor(int64_t{0}), {.collections = std::vector<std::string>{GraphKeys::GLOBAL_STEP}});
  CHECK_FALSE(get_global_step().has_value());
}
