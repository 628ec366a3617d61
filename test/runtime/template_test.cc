// make_template: the reference's two examples, create_scope_now,
// unique_name, and the error for trainable Variables created on later calls.
#include <catch2/catch.hpp>

#include "device_fixture.h"
#include "varstate/error.h"
#include "varstate/math_ops.h"
#include "varstate/template.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;
using Catch::Matchers::Contains;

namespace {
int g_calls = 0;

Tensor my_op(const Tensor& x, const std::string& scalar_name) {
  ++g_calls;
  Variable var1 =
      get_variable(scalar_name, {.shape = TensorShape{}, .initializer = constant_initializer(1)});
  return x * var1.initialized_value();
}

std::vector<std::string> names(const std::vector<Variable>& vars) {
  std::vector<std::string> out;
  for (const auto& v : vars) out.push_back(v.name());
  return out;
}
}  // namespace

TEST_CASE_METHOD(FreshSession, "make_template shares the variables of the first call",
                 "[template]") {
  auto scale_by_y = make_template("scale_by_y", my_op, {}, std::string("y"));
  CHECK_FALSE(scale_by_y.variable_scope());
  Variable y = get_variable("unrelated", {.shape = TensorShape{}});  // outside the template
  global_variables_initializer().run();
  g_calls = 0;
  Tensor z = scale_by_y(Tensor(2.f));
  Tensor w = scale_by_y(Tensor(5.f));
  CHECK(g_calls == 2);
  CHECK(z.scalar<float>() == 2.f);
  CHECK(w.scalar<float>() == 5.f);
  CHECK(names(global_variables()) == std::vector<std::string>{"unrelated:0", "scale_by_y/y:0"});
  REQUIRE(scale_by_y.variable_scope());
  CHECK(scale_by_y.variable_scope()->name() == "scale_by_y");
  // Both results scale by the same variable.
  global_variables_initializer().run();
  get_default_graph().find_variable("scale_by_y/y")->assign(Tensor(3.f));
  CHECK(scale_by_y(Tensor(2.f)).scalar<float>() == 6.f);
  // A second template of the same name gets its own scope.
  auto other = make_template("scale_by_y", my_op, {}, std::string("y"));
  (void)other(Tensor(1.f)).valid();
  CHECK(other.variable_scope()->name() == "scale_by_y_1");
}

TEST_CASE_METHOD(FreshSession,
                 "re-entering the template's scope with reuse shares across templates",
                 "[template]") {
  VariableScope vs;
  {
    auto scope = variable_scope("scope");
    vs = scope;
    auto scale_by_y = make_template("scale_by_y", my_op, {}, std::string("y"));
    scale_by_y(Tensor(1.f));
    scale_by_y(Tensor(2.f));
  }
  {
    auto scope = variable_scope(vs, {.reuse = true});
    auto scale_by_y2 = make_template("scale_by_y", my_op, {}, std::string("y"));
    scale_by_y2(Tensor(1.f));
    scale_by_y2(Tensor(2.f));
    CHECK(scale_by_y2.variable_scope()->name() == "scope/scale_by_y");
  }
  CHECK(names(global_variables()) == std::vector<std::string>{"scope/scale_by_y/y:0"});
}

TEST_CASE_METHOD(FreshSession, "a different variable name on a later call fails to reuse",
                 "[template]") {
  std::string name = "a";
  auto t = make_template("t", [&](const Tensor& x) { return my_op(x, name); });
  t(Tensor(1.f));
  name = "b";
  CHECK_THROWS_WITH(t(Tensor(1.f)), Contains("Variable t/b does not exist"));
}

TEST_CASE_METHOD(FreshSession, "trainable plain Variables on later calls raise ValueError",
                 "[template]") {
  auto bad = make_template("bad", [](const Tensor& x) {
    Variable v(Tensor(1.f), {.name = "v"});
    return x + v.initial_value();
  });
  bad(Tensor(1.f));  // first call: allowed
  CHECK_THROWS_MATCHES(
      bad(Tensor(1.f)), ValueError,
      Catch::Matchers::Message("Trainable variable created when calling a template after the "
                               "first time, perhaps you used tf.Variable when you meant "
                               "tf.get_variable: [bad_1/v:0]"));
  auto locals = make_template("locals", [](const Tensor& x) {
    Variable v(Tensor(1.f), {.trainable = false, .name = "counter"});
    return x + v.initial_value();
  });
  locals(Tensor(1.f));
  CHECK_NOTHROW(locals(Tensor(1.f)));
}

TEST_CASE_METHOD(FreshSession, "create_scope_now and unique_name", "[template]") {
  auto now = make_template("now", my_op, {.create_scope_now = true}, std::string("y"));
  REQUIRE(now.variable_scope());
  CHECK(now.variable_scope()->name() == "now");
  CHECK(get_default_graph().name_scope().empty());  // no name scope was left open
  now(Tensor(1.f));
  now(Tensor(1.f));
  CHECK(names(global_variables()) == std::vector<std::string>{"now/y:0"});

  auto fixed = make_template("ignored", my_op, {.unique_name = "exact"}, std::string("y"));
  fixed(Tensor(1.f));
  CHECK(fixed.variable_scope()->name() == "exact");
  auto clash = make_template("ignored", my_op, {.unique_name = "exact"}, std::string("y"));
  CHECK_THROWS_WITH(clash(Tensor(1.f)), Contains("Variable exact/y already exists"));
  CHECK_THROWS_MATCHES(make_template("", my_op), ValueError,
                       Catch::Matchers::Message("name cannot be None."));
}
