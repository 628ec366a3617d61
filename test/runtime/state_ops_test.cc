// Update Ops: built once, they update every time a Session runs them.
#include <catch2/catch.hpp>

#include "device_fixture.h"
#include "varstate/base/error.h"
#include "varstate/runtime/math_ops.h"
#include "varstate/runtime/state_ops.h"
#include "varstate/runtime/variable_scope.h"
#include "varstate/runtime/variables.h"

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
