// Update Ops: built once, they update every time a Session runs them.
#include <catch2/catch.hpp>

#include "device_fixture.h"
#include "varstate/error.h"
#include "varstate/math_ops.h"
#include "varstate/state_ops.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;

TEST_CASE_METHOD(FreshSession, "a train_op built once runs many times", "[state_ops]") {
  Variable v(Tensor(0.f), {.name = "v"});
  Variable emb(Tensor::zeros(DType::kFloat, {4, 2}), {.name = "emb"});
  Variable step(Tensor(int64_t{0}), {.trainable = false, .name = "global_step"});
  Op train_op =
      Op::group({assign_add_op(v, 1.5f), scatter_add_op(emb, Tensor({1, 3, 1}), Tensor(1.f)),
                 count_up_to_op(step, 100)},
                "train");
  CHECK(train_op.name() == "train");
  session.run(global_variables_initializer());
  for (int i = 0; i < 10; ++i) session.run(train_op);
  CHECK(v.eval().scalar<float>() == 15.f);
  CHECK(emb.eval().to_vector<float>() == std::vector<float>{0, 0, 20, 20, 0, 0, 10, 10});
  CHECK(step.eval().scalar<int64_t>() == 10);
}

TEST_CASE_METHOD(FreshSession, "values are read when the op runs", "[state_ops]") {
  Variable v(Tensor(10.f), {.name = "v"});
  Variable delta(Tensor(1.f), {.name = "delta"});
  float host_delta = 2.f;
  Op from_variable = assign_sub_op(v, delta);
  Op from_callable = assign_add_op(v, [&] { return Tensor(host_delta); });
  Op set = assign_op(v, Tensor(100.f));
  CHECK(from_variable.name() == "v/AssignSub");
  CHECK(from_variable.type() == "AssignSub");
  session.run(global_variables_initializer());
  session.run(from_variable);  // 9
  delta.assign(Tensor(4.f));
  session.run(from_variable);  // 5
  host_delta = 7.f;
  session.run(from_callable);  // 12
  CHECK(v.eval().scalar<float>() == 12.f);
  session.run(set);
  CHECK(v.eval().scalar<float>() == 100.f);
}

TEST_CASE_METHOD(FreshSession, "every scatter op; errors raise at run and change nothing",
                 "[state_ops]") {
  Variable t(Tensor({1.f, 2.f, 3.f, 4.f}), {.name = "t"});
  session.run(global_variables_initializer());
  session.run(scatter_update_op(t, Tensor({0}), Tensor({10.f})));
  session.run(scatter_sub_op(t, Tensor({1}), Tensor({1.f})));
  session.run(scatter_mul_op(t, Tensor({2}), Tensor({3.f})));
  session.run(scatter_div_op(t, Tensor({3}), Tensor({2.f})));
  session.run(scatter_min_op(t, Tensor({0}), Tensor({5.f})));
  session.run(scatter_max_op(t, Tensor({1}), Tensor({6.f})));
  CHECK(t.eval().to_vector<float>() == std::vector<float>{5, 6, 9, 2});
  Op bad =
      scatter_add_op(t, Tensor({0, 9}), Tensor({1.f, 1.f}), {.name = std::string("my_scatter")});
  CHECK_THROWS_WITH(session.run(bad), Catch::Matchers::Contains("indices[1] = 9"));
  CHECK(t.eval().to_vector<float>() == std::vector<float>{5, 6, 9, 2});
  Variable counter(Tensor(0), {.name = "counter"});
  counter.initializer().run();
  Op up = count_up_to_op(counter, 2);
  session.run(up);
  session.run(up);
  CHECK_THROWS_AS(session.run(up), OutOfRangeError);
  CHECK(counter.eval().scalar<int32_t>() == 2);
}

TEST_CASE_METHOD(FreshSession, "ops on a PartitionedVariable", "[state_ops]") {
  PartitionedVariable p = get_variable("p", {.shape = TensorShape{5, 2},
                                             .initializer = zeros_initializer(),
                                             .partitioner = fixed_size_partitioner(2)});
  Op step =
      Op::group({scatter_add_op(p, Tensor({0, 4}), Tensor(1.f)), assign_add_op(p, 0.5f)}, "step");
  session.run(p.initializer());
  session.run(step);
  session.run(step);
  CHECK(p.eval().to_vector<float>() == std::vector<float>{3, 3, 1, 1, 1, 1, 1, 1, 3, 3});
  session.run(assign_op(p, Tensor::zeros(DType::kFloat, {5, 2})));
  session.run(scatter_update_op(p, Tensor({2}), Tensor(8.f)));
  session.run(scatter_sub_op(p, Tensor({2}), Tensor(1.f)));
  session.run(assign_sub_op(p, 1.f));
  CHECK(p.eval().to_vector<float>() == std::vector<float>{-1, -1, -1, -1, 6, 6, -1, -1, -1, -1});
}

// The scatter ops of the family a PartitionedVariable's op forms lacked
// before the one table (kernels/common.h): each run routes to the parts.
TEST_CASE_METHOD(FreshSession, "mul, div, min and max ops on a PartitionedVariable",
                 "[state_ops]") {
  PartitionedVariable p = get_variable("p", {.shape = TensorShape{4, 1},
                                             .initializer = constant_initializer(6.f),
                                             .partitioner = fixed_size_partitioner(2)});
  session.run(p.initializer());
  session.run(scatter_mul_op(p, Tensor({0, 3}), Tensor({{2.f}, {3.f}})));  // 12, 6, 6, 18
  session.run(scatter_div_op(p, Tensor({1, 3}), Tensor({{4.f}, {2.f}})));  // 12, 1.5, 6, 9
  session.run(scatter_min_op(p, Tensor({0, 2}), Tensor({{5.f}, {7.f}})));  // 5, 1.5, 6, 9
  session.run(scatter_max_op(p, Tensor({1, 3}), Tensor({{2.f}, {8.f}})));  // 5, 2, 6, 9
  CHECK(p.eval().to_vector<float>() == std::vector<float>{5, 2, 6, 9});
  CHECK_THROWS_AS(session.run(scatter_max_op(p, Tensor({4}), Tensor({{1.f}}))),
                  InvalidArgumentError);
  CHECK(p.eval().to_vector<float>() == std::vector<float>{5, 2, 6, 9});
}

TEST_CASE_METHOD(FreshSession, "placeholders are fed to each run", "[state_ops][placeholder]") {
  Variable emb(Tensor::zeros(DType::kFloat, {4, 2}), {.name = "emb"});
  Variable v(Tensor(0.f), {.name = "v"});
  Placeholder ids = placeholder(DType::kInt32, TensorShape{-1}, "ids");
  Placeholder grads = placeholder(DType::kFloat, TensorShape{-1, 2}, "grads");
  Placeholder rate = placeholder(DType::kFloat, TensorShape{}, "rate");
  CHECK(ids.name() == "ids");
  CHECK(grads.shape().to_string() == "[?,2]");
  Op train = Op::group({scatter_add_op(emb, ids, grads), assign_add_op(v, rate)}, "train");
  REQUIRE(train.placeholders().size() == 3);
  session.run(global_variables_initializer());
  // The same Op, two batches of different sizes; fed by object and by name.
  session.run(train, {{ids, Tensor({1, 3})},
                      {grads, Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2})},
                      {rate, Tensor(0.5f)}});
  session.run(train, {{"ids:0", Tensor({0, 1, 1})},
                      {"grads", Tensor::from_vector<float>({10, 20, 30, 40, 50, 60}, {3, 2})},
                      {"rate", Tensor(2.f)}});
  CHECK(emb.eval().to_vector<float>() == std::vector<float>{10, 20, 81, 102, 0, 0, 3, 4});
  CHECK(v.eval().scalar<float>() == 2.5f);
}

// TensorFlow (tf.compat.v1): a shape the graph builder knows fails there
// with ValueError; fed through a placeholder of partial shape it is found
// by the kernel at run time, InvalidArgumentError.
TEST_CASE_METHOD(FreshSession, "a shape known only from a feed fails as at run time",
                 "[state_ops][placeholder][errors]") {
  Variable emb(Tensor::zeros(DType::kFloat, {4, 2}), {.name = "emb"});
  Variable v(Tensor::zeros(DType::kFloat, {2}), {.name = "v"});
  Placeholder ids = placeholder(DType::kInt32, TensorShape{-1}, "ids");
  Placeholder rows = placeholder(DType::kFloat, TensorShape{-1, -1}, "rows");
  Placeholder delta = placeholder(DType::kFloat, TensorShape{-1}, "delta");
  session.run(global_variables_initializer());
  CHECK_THROWS_AS(
      session.run(scatter_add_op(emb, ids, rows),
                  {{ids, Tensor({1, 3})}, {rows, Tensor::zeros(DType::kFloat, {2, 3})}}),
      InvalidArgumentError);
  CHECK_THROWS_AS(session.run(assign_add_op(v, delta), {{delta, Tensor({1.f, 2.f, 3.f})}}),
                  InvalidArgumentError);
  // The same mistakes with static shapes are the graph builder's ValueError.
  CHECK_THROWS_AS(
      session.run(scatter_add_op(emb, Tensor({1, 3}), Tensor::zeros(DType::kFloat, {2, 3}))),
      ValueError);
  CHECK_THROWS_AS(session.run(assign_add_op(v, Tensor({1.f, 2.f, 3.f}))), ValueError);
  CHECK(emb.eval().to_vector<float>() == std::vector<float>(8, 0.f));
  CHECK(v.eval().to_vector<float>() == std::vector<float>(2, 0.f));
}

TEST_CASE_METHOD(FreshSession, "feeds are checked before anything runs",
                 "[state_ops][placeholder]") {
  Variable a(Tensor(1.f), {.name = "a"});
  Variable b(Tensor({1.f, 2.f}), {.name = "b"});
  Placeholder x = placeholder(DType::kFloat, TensorShape{2}, "x");
  // The first member reads no placeholder: a check after it ran would leave `a` changed.
  Op step = Op::group({assign_add_op(a, 1.f), assign_add_op(b, x)}, "step");
  session.run(global_variables_initializer());
  auto unchanged = [&] {
    CHECK(a.eval().scalar<float>() == 1.f);
    CHECK(b.eval().to_vector<float>() == std::vector<float>{1, 2});
  };
  CHECK_THROWS_MATCHES(
      session.run(step), InvalidArgumentError,
      Catch::Matchers::Message(
          "You must feed a value for placeholder tensor \"x\" with dtype float32 and shape [2]"));
  unchanged();
  CHECK_THROWS_MATCHES(session.run(step, {{x, Tensor({1, 2})}}), InvalidArgumentError,
                       Catch::Matchers::Message("placeholder \"x\" has dtype float32; the value "
                                                "fed has dtype int32"));
  unchanged();
  CHECK_THROWS_MATCHES(
      session.run(step, {{x, Tensor({1.f, 2.f, 3.f})}}), ValueError,
      Catch::Matchers::Message(
          "Cannot feed value of shape [3] for Tensor \"x:0\", which has shape [2]"));
  unchanged();
  CHECK_THROWS_MATCHES(
      session.run(step, {{x, Tensor({1.f, 2.f})}, {"y", Tensor(1.f)}}), InvalidArgumentError,
      Catch::Matchers::Message("feed \"y\": the graph has no placeholder of that name"));
  unchanged();
  // A list of Ops: every Op's feeds are checked before the first runs.
  CHECK_THROWS_AS(session.run({assign_add_op(a, 1.f), assign_add_op(b, x)}), InvalidArgumentError);
  unchanged();
  // Outside a run a placeholder has no value.
  CHECK_THROWS_AS(UpdateValue(x).get(), InvalidArgumentError);
  session.run(step, {{x, Tensor({1.f, 2.f})}});
  CHECK(a.eval().scalar<float>() == 2.f);
  CHECK(b.eval().to_vector<float>() == std::vector<float>{2, 4});
}

TEST_CASE_METHOD(FreshSession, "placeholder names are unique in the graph and scoped",
                 "[state_ops][placeholder]") {
  Placeholder p1 = placeholder(DType::kFloat);
  Placeholder p2 = placeholder(DType::kFloat);
  CHECK(p1.name() == "Placeholder");
  CHECK(p2.name() == "Placeholder_1");
  CHECK(p1.shape().unknown_rank());
  {
    NameScope scope("layer");
    CHECK(placeholder(DType::kInt64, TensorShape{3}, "ids").name() == "layer/ids");
  }
  std::optional<Placeholder> found = find_placeholder("layer/ids:0");
  REQUIRE(found);
  CHECK(found->dtype() == DType::kInt64);
  CHECK(found->graph().name_scope().empty());
  CHECK_FALSE(find_placeholder("ids"));
  CHECK_THROWS_AS(placeholder(static_cast<DType>(999)), InvalidArgumentError);
  // A value fed under a name the Op does not read, but which the graph has, is accepted.
  Variable v(Tensor(0.f), {.name = "v"});
  v.initializer().run();
  session.run(assign_add_op(v, 1.f), {{p1, Tensor(3.f)}});
  CHECK(v.eval().scalar<float>() == 1.f);
}
