// variable_scope, VariableScope, get_variable, get_local_variable,
// regularizers and custom getters: the reference's and the guide's examples.
#include <catch2/catch.hpp>

#include <cmath>

#include "device_fixture.h"
#include "varstate/error.h"
#include "varstate/math_ops.h"
#include "varstate/placement.h"
#include "varstate/random_seed.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

namespace {
std::vector<std::string> names(const std::vector<Variable>& vars) {
  std::vector<std::string> out;
  for (const auto& v : vars) out.push_back(v.name());
  return out;
}

// The guide's conv_relu: two variables under short names (the convolution
// itself is beside the point: the names and sharing are what is tested).
std::pair<Variable, Variable> conv_relu(const std::vector<int64_t>& kernel_shape,
                                        const std::vector<int64_t>& bias_shape) {
  Variable weights = get_variable(
      "weights", {.shape = TensorShape(kernel_shape), .initializer = random_normal_initializer()});
  Variable biases = get_variable(
      "biases", {.shape = TensorShape(bias_shape), .initializer = constant_initializer(0.0)});
  return {weights, biases};
}

std::vector<Variable> my_image_filter() {
  std::vector<Variable> out;
  {
    auto conv1 = variable_scope("conv1");
    auto [w, b] = conv_relu({5, 5, 32, 32}, {32});
    out.push_back(w);
    out.push_back(b);
  }
  {
    auto conv2 = variable_scope("conv2");
    auto [w, b] = conv_relu({5, 5, 32, 32}, {32});
    out.push_back(w);
    out.push_back(b);
  }
  return out;
}

bool same(const std::vector<Variable>& a, const std::vector<Variable>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].same_as(b[i])) return false;
  }
  return true;
}
}  // namespace

TEST_CASE_METHOD(FreshGraph, "get_variable names by the variable scope", "[variable_scope]") {
  {
    auto foo = variable_scope("foo");
    Variable v = get_variable("v", {.shape = TensorShape{1}});
    Variable w = get_variable("w", {.shape = TensorShape{1}});
    CHECK(v.name() == "foo/v:0");
    CHECK(w.name() == "foo/w:0");
    CHECK(v.dtype() == DType::kFloat);  // default dtype
  }
  {
    auto foo = variable_scope("foo", {.reuse = true});
    Variable v1 = get_variable("v");
    CHECK(v1.name() == "foo/v:0");
    CHECK(v1.same_as(*get_default_graph().find_variable("foo/v")));
  }
  {
    auto foo = variable_scope("foo");
    auto bar = variable_scope("bar");
    Variable v = get_variable("v", {.shape = TensorShape{1}});
    CHECK(v.name() == "foo/bar/v:0");
  }
}

TEST_CASE_METHOD(FreshGraph, "reuse: by flag, by reuse_variables(), by a captured scope",
                 "[variable_scope]") {
  SECTION("flag") {
    Variable v = [] {
      auto s = variable_scope("foo");
      return Variable(get_variable("v", {.shape = TensorShape{1}}));
    }();
    auto s = variable_scope("foo", {.reuse = true});
    Variable v1 = get_variable("v", {.shape = TensorShape{1}});
    CHECK(v1.same_as(v));
  }
  SECTION("reuse_variables") {
    auto scope = variable_scope("foo");
    Variable v = get_variable("v", {.shape = TensorShape{1}});
    CHECK_FALSE(scope->reuse());
    scope->reuse_variables();
    CHECK(scope->reuse());
    CHECK(get_variable_scope().reuse());
    Variable v1 = get_variable("v", {.shape = TensorShape{1}});
    CHECK(v1.same_as(v));
  }
  SECTION("captured scope object") {
    VariableScope captured;
    Variable v = [&] {
      auto s = variable_scope("foo");
      captured = s;
      return Variable(get_variable("v", {.shape = TensorShape{1}}));
    }();
    auto other = variable_scope("other");  // re-entering ignores the enclosing scope's name
    auto s = variable_scope(captured, {.reuse = true});
    CHECK(s->name() == "foo");
    CHECK(s->original_name_scope() == "foo/");
    Variable v1 = get_variable("v", {.shape = TensorShape{1}});
    CHECK(v1.same_as(v));
    CHECK_FALSE(captured.reuse());  // the captured scope itself is unchanged
  }
}

TEST_CASE_METHOD(FreshGraph, "reuse errors carry TensorFlow's messages", "[variable_scope]") {
  SECTION("creating an existing name") {
    auto foo = variable_scope("foo");
    Variable v = get_variable("v", {.shape = TensorShape{1}});
    const size_t before = global_variables().size();
    CHECK_THROWS_MATCHES(
        get_variable("v", {.shape = TensorShape{1}}), ValueError,
        Catch::Matchers::Message("Variable foo/v already exists, disallowed. Did you mean to set "
                                 "reuse=True in VarScope?"));
    CHECK(global_variables().size() == before);
  }
  SECTION("reusing a missing name") {
    auto foo = variable_scope("foo", {.reuse = true});
    CHECK_THROWS_MATCHES(
        get_variable("v", {.shape = TensorShape{1}}), ValueError,
        Catch::Matchers::Message("Variable foo/v does not exist, or was not created with "
                                 "tf.get_variable(). Did you mean to set reuse=None in VarScope?"));
    CHECK(global_variables().empty());
  }
  SECTION("a plain Variable is not get_variable's") {
    Variable plain(Tensor({1.f}), {.name = "p"});
    auto s = variable_scope("top", {.reuse = true});
    auto root = variable_scope(VariableScope({.reuse = true}));
    CHECK_THROWS_WITH(
        get_variable("p"),
        Contains("Variable p does not exist, or was not created with tf.get_variable()"));
  }
  SECTION("shape and dtype mismatch on reuse") {
    {
      auto foo = variable_scope("foo");
      get_variable("v", {.shape = TensorShape{1}});
    }
    auto foo = variable_scope("foo", {.reuse = true});
    CHECK_THROWS_MATCHES(
        get_variable("v", {.shape = TensorShape{2}}), ValueError,
        Catch::Matchers::Message(
            "Trying to share variable foo/v, but specified shape [2] and found shape [1]."));
    CHECK_THROWS_MATCHES(
        get_variable("v", {.shape = TensorShape{1}, .dtype = DType::kInt32}), ValueError,
        Catch::Matchers::Message(
            "Trying to share variable foo/v, but specified dtype int32 and found dtype float32."));
  }
  SECTION("reuse is inherited by sub-scopes") {
    {
      auto a = variable_scope("a");
      auto b = variable_scope("b");
      get_variable("v", {.shape = TensorShape{1}});
    }
    auto a = variable_scope("a", {.reuse = true});
    auto b = variable_scope("b");
    CHECK(b->reuse());
    CHECK(get_variable("v").name() == "a/b/v:0");
  }
  SECTION("reuse=false inherits, as TensorFlow treats False like None") {
    // TensorFlow 2.21: variable_scope("b", reuse=False) inside reuse=True has
    // reuse True; at the top level it creates.
    {
      auto foo = variable_scope("foo", {.reuse = false});
      CHECK_FALSE(foo->reuse());
      get_variable("v", {.shape = TensorShape{1}});
    }
    auto foo = variable_scope("foo", {.reuse = true});
    auto inner = variable_scope("inner", {.reuse = false});
    CHECK(inner->reuse() == Reuse(true));
    auto again = variable_scope(foo.scope(), {.reuse = false});
    CHECK(get_variable("v").name() == "foo/v:0");
  }
}

TEST_CASE_METHOD(FreshGraph, "the guide's conv_relu / my_image_filter", "[variable_scope]") {
  // Calling conv_relu twice in one scope fails: "weights" exists.
  Tensor input = Tensor::zeros(DType::kFloat, {1, 10, 10, 32});
  conv_relu({5, 5, 32, 32}, {32});
  CHECK_THROWS_WITH(conv_relu({5, 5, 32, 32}, {32}), Contains("Variable weights already exists"));
  reset_default_graph();

  std::vector<Variable> first;
  {
    auto model = variable_scope("model");
    first = my_image_filter();
  }
  CHECK(names(first) == std::vector<std::string>{"model/conv1/weights:0", "model/conv1/biases:0",
                                                 "model/conv2/weights:0", "model/conv2/biases:0"});
  SECTION("reuse=true") {
    auto model = variable_scope("model", {.reuse = true});
    CHECK(same(my_image_filter(), first));
  }
  SECTION("scope.reuse_variables()") {
    reset_default_graph();
    auto model = variable_scope("model");
    std::vector<Variable> out1 = my_image_filter();
    model->reuse_variables();
    CHECK(same(my_image_filter(), out1));
  }
  SECTION("a scope object") {
    reset_default_graph();
    VariableScope scope;
    std::vector<Variable> out1;
    {
      auto model = variable_scope("model");
      scope = model;
      out1 = my_image_filter();
    }
    auto again = variable_scope(scope, {.reuse = true});
    CHECK(same(my_image_filter(), out1));
  }
  SECTION("without reuse the second call fails") {
    auto model = variable_scope("model");
    CHECK_THROWS_WITH(my_image_filter(), Contains("Variable model/conv1/weights already exists"));
  }
}

TEST_CASE_METHOD(FreshGraph, "name scopes open alongside and do not change get_variable names",
                 "[variable_scope]") {
  {
    auto foo = variable_scope("foo");
    CHECK(foo->original_name_scope() == "foo/");
    CHECK(get_default_graph().name_scope() == "foo/");
    Variable plain(Tensor(1.f), {.name = "x"});
    CHECK(plain.name() == "foo/x:0");
  }
  {
    auto foo = variable_scope("foo");
    CHECK(get_default_graph().name_scope() == "foo_1/");  // re-entered: new name scope
    Variable plain(Tensor(1.f), {.name = "x"});
    CHECK(plain.name() == "foo_1/x:0");
    NameScope inner("ops");
    CHECK(get_variable("v", {.shape = TensorShape{1}}).name() == "foo/v:0");
  }
  CHECK(get_default_graph().name_scope().empty());
}

TEST_CASE_METHOD(FreshGraph, "default_name is made unique; the callable form", "[variable_scope]") {
  std::vector<std::string> opened;
  for (int i = 0; i < 3; ++i) {
    auto s = variable_scope("", {.default_name = "layer"});
    opened.push_back(s->name());
  }
  CHECK(opened == std::vector<std::string>{"layer", "layer_1", "layer_2"});
  {
    // Re-opening "outer" restarts default names inside it.
    {
      auto o = variable_scope("outer");
      auto l = variable_scope("", {.default_name = "layer"});
      CHECK(l->name() == "outer/layer");
    }
    {
      auto o = variable_scope("outer");
      auto l = variable_scope("", {.default_name = "layer"});
      CHECK(l->name() == "outer/layer");
    }
  }
  CHECK_THROWS_AS(variable_scope(""), TypeError);
  CHECK_THROWS_MATCHES(
      variable_scope("", {.default_name = "x", .reuse = true}), ValueError,
      Catch::Matchers::Message("reuse=True cannot be used without a name_or_scope"));
  std::string name = variable_scope("cb", {}, [](VariableScope& s) {
    return Variable(get_variable("v", {.shape = TensorShape{2}})).name() + "|" + s.name();
  });
  CHECK(name == "cb/v:0|cb");
  auto op = variable_op_scope({Tensor(1.f)}, "", {.default_name = "op"});
  CHECK(op->name() == "op");
}

TEST_CASE_METHOD(FreshGraph, "scope defaults and setters reach get_variable", "[variable_scope]") {
  auto s = variable_scope("s", {.initializer = constant_initializer(3.0), .dtype = DType::kDouble});
  CHECK(s->dtype() == DType::kDouble);
  Variable a = get_variable("a", {.shape = TensorShape{2}});
  CHECK(a.dtype() == DType::kDouble);
  CHECK(a.initial_value().to_vector<double>() == std::vector<double>{3, 3});
  s->set_initializer(ones_initializer());
  s->set_dtype(DType::kInt32);
  Variable b = get_variable("b", {.shape = TensorShape{2}});
  CHECK(b.dtype() == DType::kInt32);
  CHECK(b.initial_value().to_vector<int32_t>() == std::vector<int32_t>{1, 1});
  // Sub-scopes inherit, explicit arguments win.
  auto inner = variable_scope("inner");
  CHECK(inner->dtype() == DType::kInt32);
  Variable c = get_variable(
      "c",
      {.shape = TensorShape{1}, .dtype = DType::kFloat, .initializer = constant_initializer(7.0)});
  CHECK(c.initial_value().to_vector<float>() == std::vector<float>{7});
  inner->set_caching_device("/cpu:0");
  CHECK(inner->caching_device() == "/cpu:0");
  inner->set_partitioner(fixed_size_partitioner(2));
  CHECK(get_variable("p", {.shape = TensorShape{4}, .dtype = DType::kFloat}).is_partitioned());
}

TEST_CASE_METHOD(FreshGraph,
                 "default initializer is glorot_uniform; integers and strings get zeros",
                 "[variable_scope]") {
  set_random_seed(3);
  Variable w = get_variable("w", {.shape = TensorShape{20, 30}});
  Tensor v = w.initial_value().to_host();
  const double limit = std::sqrt(6.0 / (20 + 30));
  double max_abs = 0;
  for (float x : v.to_vector<float>())
    max_abs = std::max(max_abs, std::abs(static_cast<double>(x)));
  CHECK(max_abs <= limit);
  CHECK(max_abs > 0.8 * limit);  // uniform over the whole range, not a narrower one
  Variable i = get_variable("i", {.shape = TensorShape{3}, .dtype = DType::kInt64});
  CHECK(i.initial_value().to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});
  // TensorFlow 2.21: get_variable("s", [2], dtype=tf.string) is [b'', b''].
  Variable s = get_variable("s", {.shape = TensorShape{2}, .dtype = DType::kString});
  CHECK(s.initial_value().to_host().to_vector<std::string>() == std::vector<std::string>{"", ""});
  CHECK_THROWS_MATCHES(
      get_variable("c", {.shape = TensorShape{1}, .dtype = DType::kComplex64}), ValueError,
      Catch::Matchers::Message("An initializer for variable c of complex64 is required"));
  CHECK_THROWS_MATCHES(
      get_variable("u"), ValueError,
      Catch::Matchers::Message(
          "Shape of a new variable (u) must be fully defined, but instead was <unknown>."));
}

TEST_CASE_METHOD(FreshGraph, "shapes read like the docs: {784, 256}, {} is a scalar",
                 "[variable_scope]") {
  Variable w =
      get_variable("w", {.shape = {784, 256}, .initializer = glorot_uniform_initializer()});
  Variable s = get_variable("s", {.shape = {}});
  Variable v = get_variable("v", {.shape = {3}});
  CHECK(w.shape() == TensorShape{784, 256});
  CHECK(s.shape().rank() == 0);
  CHECK(v.shape() == TensorShape{3});
  CHECK_THROWS_WITH(
      get_variable("p", {.shape = {2, TensorShape::kUnknownDim}}),
      Contains("Shape of a new variable (p) must be fully defined, but instead was [2,?]."));
}

TEST_CASE_METHOD(FreshGraph, "a Tensor initializer sets value and shape", "[variable_scope]") {
  Variable v = get_variable("v", {.initializer = Tensor({{1.f, 2.f}, {3.f, 4.f}})});
  CHECK(v.shape() == TensorShape{2, 2});
  CHECK(v.initial_value().to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  Variable ints = get_variable("ints", {.initializer = Tensor::from_vector<int32_t>({5, 6})});
  CHECK(ints.dtype() == DType::kInt32);
  CHECK_THROWS_MATCHES(
      get_variable("x", {.shape = TensorShape{2}, .initializer = Tensor({1.f, 2.f})}), ValueError,
      Catch::Matchers::Message("If initializer is a constant, do not specify shape."));
  CHECK_THROWS_MATCHES(
      get_variable("y", {.dtype = DType::kFloat, .initializer = Tensor::from_vector<int32_t>({1})}),
      ValueError,
      Catch::Matchers::Message(
          "Initializer type 'int32' and explicit dtype 'float32' don't match."));
  CHECK_FALSE(get_default_graph().find_variable("x"));
  CHECK_FALSE(get_default_graph().find_variable("y"));
}

TEST_CASE_METHOD(FreshGraph, "collections, trainable and get_local_variable", "[variable_scope]") {
  Variable my_local = get_variable(
      "my_local", {.shape = TensorShape{},
                   .collections = std::vector<std::string>{GraphKeys::LOCAL_VARIABLES}});
  Variable my_non_trainable =
      get_variable("my_non_trainable", {.shape = TensorShape{}, .trainable = false});
  Variable local2 = get_local_variable("local2", {.shape = TensorShape{2}});
  CHECK(names(local_variables()) == std::vector<std::string>{"my_local:0", "local2:0"});
  CHECK(names(global_variables()) == std::vector<std::string>{"my_non_trainable:0"});
  CHECK(names(trainable_variables()) == std::vector<std::string>{"my_local:0"});
  add_to_collection("my_collection_name", my_local);
  CHECK(get_collection_variables("my_collection_name")[0].same_as(my_local));
}

TEST_CASE_METHOD(FreshGraph, "regularizers feed REGULARIZATION_LOSSES; no_regularizer opts out",
                 "[variable_scope]") {
  Regularizer twice = make_regularizer([](const Tensor& w) { return w * 2.f; });
  auto s = variable_scope("r", {.regularizer = twice});
  Variable a = get_variable("a", {.initializer = Tensor({1.f, 2.f})});
  Variable b = get_variable("b", {.initializer = Tensor({5.f}), .regularizer = no_regularizer});
  Variable c =
      get_variable("c", {.initializer = Tensor({3.f}),
                         .regularizer = make_regularizer([](const Tensor& w) { return w + 1.f; })});
  Session sess;
  sess.run(global_variables_initializer());
  std::vector<Tensor> losses = get_regularization_losses();
  REQUIRE(losses.size() == 2);
  CHECK(losses[0].to_vector<float>() == std::vector<float>{2, 4});
  CHECK(losses[1].to_vector<float>() == std::vector<float>{4});
  a.assign(Tensor({10.f, 20.f}));  // the loss follows the variable's value
  CHECK(get_regularization_losses()[0].to_vector<float>() == std::vector<float>{20, 40});
  // Reuse does not add a loss twice.
  s->reuse_variables();
  get_variable("a");
  CHECK(get_regularization_losses().size() == 2);
}

TEST_CASE_METHOD(FreshGraph, "custom getters receive the true getter and chain through scopes",
                 "[variable_scope]") {
  std::vector<std::string> calls;
  CustomGetter suffix = [&](const Getter& getter, const std::string& name,
                            const GetVariableOptions& o) {
    calls.push_back("suffix:" + name);
    return getter(name + "_suffix", o);
  };
  CustomGetter outer = [&](const Getter& getter, const std::string& name,
                           const GetVariableOptions& o) {
    calls.push_back("outer:" + name);
    return getter(name, o);
  };
  auto a = variable_scope("a", {.custom_getter = outer});
  auto b = variable_scope("b", {.custom_getter = suffix});
  Variable v = get_variable("v", {.shape = TensorShape{1}});
  CHECK(v.name() == "a/b/v_suffix:0");
  CHECK(calls == std::vector<std::string>{"suffix:a/b/v", "outer:a/b/v_suffix"});
  calls.clear();
  CustomGetter explicit_getter = [&](const Getter& getter, const std::string& name,
                                     const GetVariableOptions& o) {
    calls.push_back("explicit:" + name);
    GetVariableOptions changed = o;
    changed.trainable = false;
    return getter(name, changed);
  };
  // A call's getter replaces the scopes' (TensorFlow 2.21 calls only it).
  Variable w = get_variable("w", {.shape = TensorShape{1}, .custom_getter = explicit_getter});
  CHECK(calls == std::vector<std::string>{"explicit:a/b/w"});
  CHECK(w.name() == "a/b/w:0");
  CHECK_FALSE(w.trainable());
  CHECK(b->custom_getter());
}

TEST_CASE_METHOD(FreshGraph, "get_variable lookups use the graph's store", "[variable_scope]") {
  std::vector<Variable> created;
  {
    auto s = variable_scope("many");
    for (int i = 0; i < 1000; ++i) {
      created.push_back(get_variable("v" + std::to_string(i), {.shape = TensorShape{1}}));
    }
  }
  auto s = variable_scope("many", {.reuse = true});
  for (int i = 999; i >= 0; --i) {
    CHECK(Variable(get_variable("v" + std::to_string(i))).same_as(created[static_cast<size_t>(i)]));
  }
  // Another graph has its own store.
  Graph other;
  auto guard = other.as_default();
  auto s2 = variable_scope("many", {.reuse = true});
  CHECK_THROWS_AS(get_variable("v0"), ValueError);
}

TEST_CASE_METHOD(FreshGraph, "get_variable honours device scopes", "[variable_scope]") {
  DeviceScope cpu("/cpu:0");
  Variable v = get_variable("v", {.shape = TensorShape{1}});
  CHECK(v.device().is_cpu());
  Variable cached =
      get_variable("c", {.shape = TensorShape{1}, .caching_device = std::string("/cpu:0")});
  Session sess;
  sess.run(global_variables_initializer());
  CHECK(cached.value().device().is_cpu());
}

// The expectations below are what TensorFlow 2.21 (tf.compat.v1, graph
// mode) returns for the same calls.

TEST_CASE_METHOD(FreshGraph, "AUTO_REUSE creates what is missing and is inherited",
                 "[variable_scope]") {
  // with variable_scope("a", reuse=AUTO_REUSE): get_variable("v") twice is
  // one variable; nested "b" has reuse AUTO_REUSE; "c" with reuse=True
  // inside it has True; reuse_variables() makes it True.
  auto a = variable_scope("a", {.reuse = AUTO_REUSE});
  CHECK(a->reuse() == AUTO_REUSE);
  Variable v = get_variable("v", {.shape = TensorShape{1}});
  CHECK(Variable(get_variable("v", {.shape = TensorShape{1}})).same_as(v));
  CHECK_THROWS_MATCHES(
      get_variable("v", {.shape = TensorShape{2}}), ValueError,
      Catch::Matchers::Message("Trying to share variable a/v, but specified shape [2] and found "
                               "shape [1]."));
  {
    auto b = variable_scope("b");
    CHECK(b->reuse() == AUTO_REUSE);
    Variable x = get_variable("x", {.shape = TensorShape{1}});
    CHECK(Variable(get_variable("x")).same_as(x));
    auto c = variable_scope("c", {.reuse = true});
    CHECK(c->reuse() == Reuse(true));
  }
  auto p =
      get_variable("p", {.shape = TensorShape{4, 1}, .partitioner = fixed_size_partitioner(2)});
  CHECK(get_variable("p", {.shape = TensorShape{4, 1}, .partitioner = fixed_size_partitioner(2)})
            .partitioned_variable()
            .name() == p.name());
  // AUTO_REUSE inside reuse=True stays AUTO_REUSE and creates.
  {
    auto r = variable_scope("r", {.reuse = true});
    auto auto_scope = variable_scope("s", {.reuse = AUTO_REUSE});
    CHECK(auto_scope->reuse() == AUTO_REUSE);
    CHECK(get_variable("n", {.shape = TensorShape{1}}).name() == "a/r/s/n:0");
  }
  CHECK_THROWS_MATCHES(
      variable_scope("", {.default_name = "d", .reuse = AUTO_REUSE}), ValueError,
      Catch::Matchers::Message("reuse=True cannot be used without a name_or_scope"));
  a->reuse_variables();
  CHECK(a->reuse() == Reuse(true));
}

TEST_CASE_METHOD(FreshGraph, "partitioned variables and get_variable without a partitioner",
                 "[variable_scope][partitioned]") {
  {
    auto a = variable_scope("a", {.partitioner = fixed_size_partitioner(2)});
    get_variable("v", {.shape = TensorShape{4, 1}});
    // A scalar under a partitioner is a plain variable ("a/s:0").
    GetVariableResult s = get_variable("s", {.shape = TensorShape{}});
    CHECK_FALSE(s.is_partitioned());
    CHECK(s.name() == "a/s:0");
    // An initial value gives no scalar shape argument: still partitioned.
    CHECK_THROWS_MATCHES(
        get_variable("t", {.initializer = Tensor(1.f)}), ValueError,
        Catch::Matchers::Message("A partitioned Variable must have rank at least 1, shape: []"));
  }
  {
    // reuse=True: get_variable("v") returns PartitionedVariable "a/v".
    auto a = variable_scope("a", {.reuse = true});
    GetVariableResult v = get_variable("v");
    REQUIRE(v.is_partitioned());
    CHECK(v.name() == "a/v");
    CHECK(v.shape() == TensorShape{4, 1});
    CHECK_THROWS_MATCHES(
        get_variable("v", {.shape = TensorShape{5, 1}}), ValueError,
        Catch::Matchers::Message("Trying to reuse partitioned variable a/v, but specified shape "
                                 "[5,1] and found shape [4,1]."));
    CHECK_THROWS_MATCHES(
        get_variable("v", {.dtype = DType::kInt32}), ValueError,
        Catch::Matchers::Message("Trying to reuse partitioned variable a/v, but specified dtype "
                                 "int32 and found dtype float32."));
  }
  const std::string message =
      "No partitioner was provided, but a partitioned version of the variable was found: "
      "a/v/part_0. Perhaps a variable of the same name was already created with partitioning?";
  for (Reuse reuse : {Reuse(false), AUTO_REUSE}) {
    auto a = variable_scope("a", {.reuse = reuse});
    CHECK_THROWS_MATCHES(get_variable("v", {.shape = TensorShape{4, 1}}), ValueError,
                         Catch::Matchers::Message(message));
  }
}

TEST_CASE_METHOD(FreshGraph, "partition counts are checked before any part is created",
                 "[variable_scope][partitioners]") {
  auto counts = [](std::vector<int64_t> p) -> Partitioner {
    return [p](const TensorShape&, DType) { return p; };
  };
  auto try_counts = [&](std::vector<int64_t> p, TensorShape shape = TensorShape{10, 1}) {
    return get_variable("p", {.shape = shape, .partitioner = counts(std::move(p))});
  };
  // TensorFlow raises ValueError for each (for {11, 1} and {INT64_MAX, 1}
  // "Expected 0 <= offset < shape but found offset=10, shape=10 ...", once
  // ten parts exist; varstate checks first and names the variable).
  CHECK_THROWS_MATCHES(try_counts({11, 1}), ValueError,
                       Catch::Matchers::Message(
                           "Partitioner returned 11 partitions for axis 0 of partitioned variable "
                           "p of shape [10,1], more than its 10 elements on that axis: [11, 1]"));
  CHECK_THROWS_AS(try_counts({INT64_MAX, 1}), ValueError);
  CHECK_THROWS_MATCHES(
      try_counts({0, 1}), ValueError,
      Catch::Matchers::Message("Partitioner returned zero partitions for some axes: [0, 1]"));
  CHECK_THROWS_MATCHES(try_counts({2}), ValueError,
                       Catch::Matchers::Message("Partitioner returned a partition list that does "
                                                "not match the Variable's rank: [2] vs. [10,1]"));
  CHECK_THROWS_AS(try_counts({2, 1, 1}), ValueError);
  CHECK_THROWS_MATCHES(try_counts({2, 2}, TensorShape{10, 4}), ValueError,
                       Catch::Matchers::Message("Can only slice a variable along one dimension: "
                                                "shape: [10,4], partitioning: [2, 2]"));
  CHECK(global_variables().empty());
  CHECK(try_counts({10, 1}).partitioned_variable().size() == 10);
}

TEST_CASE_METHOD(FreshGraph, "names TensorFlow rejects", "[variable_scope]") {
  const std::string root_pattern =
      "' is not a valid root scope name. A root scope name has to match the following pattern: "
      "^[A-Za-z0-9.][A-Za-z0-9_.\\\\/>-]*$";
  for (const char* bad : {"a b", "a:0", "/abs", "-a", "_a"}) {
    CAPTURE(bad);
    CHECK_THROWS_MATCHES(get_variable(bad, {.shape = TensorShape{1}}), ValueError,
                         Catch::Matchers::Message("'" + std::string(bad) + root_pattern));
    CHECK_THROWS_MATCHES(variable_scope(bad), ValueError,
                         Catch::Matchers::Message("'" + std::string(bad) + root_pattern));
  }
  CHECK_THROWS_AS(get_variable("", {.shape = TensorShape{1}}), ValueError);
  CHECK(global_variables().empty());
  CHECK(get_variable_scope().name().empty());
  // Accepted: ".a", "a>b", and "_a" below a scope ("s/_a:0").
  CHECK(get_variable(".a", {.shape = TensorShape{1}}).name() == ".a:0");
  CHECK(get_variable("a>b", {.shape = TensorShape{1}}).name() == "a>b:0");
  auto s = variable_scope("s");
  CHECK(get_variable("_a", {.shape = TensorShape{1}}).name() == "s/_a:0");
  CHECK_THROWS_MATCHES(get_variable("a b", {.shape = TensorShape{1}}), ValueError,
                       Catch::Matchers::Message("'s/a b" + root_pattern));
  // Inside a name scope the scope-name pattern applies.
  CHECK(variable_scope("_b")->name() == "s/_b");
  CHECK_THROWS_MATCHES(
      variable_scope("a b"), ValueError,
      Catch::Matchers::Message("'a b' is not a valid scope name. A scope name has to match the "
                               "following pattern: ^[A-Za-z0-9_.\\\\/>-]*$"));
}

TEST_CASE_METHOD(FreshGraph, "caching_device may be a device function", "[variable_scope]") {
  // TensorFlow calls the function with the variable's read op: "a/v/read",
  // an Identity (ref variables).
  std::vector<std::string> calls;
  DeviceFunction fn = [&](const PlacementRequest& r) {
    calls.push_back(r.name + " " + r.type);
    return std::string("/cpu:0");
  };
  {
    auto a = variable_scope("a", {.caching_device = fn});
    CHECK(a->caching_device().is_function());
    get_variable("v", {.shape = TensorShape{1}});
  }
  get_variable("w", {.shape = TensorShape{1}, .caching_device = fn});
  CHECK(calls == std::vector<std::string>{"a/v/read Identity", "w/read Identity"});
}
