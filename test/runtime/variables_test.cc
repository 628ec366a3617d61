// Graph collections and the initialization helpers.
#include <catch2/catch.hpp>

#include "device_fixture.h"
#include "runtime/variable_access.h"
#include "tensor_util.h"
#include "varstate/error.h"
#include "varstate/placeholder.h"
#include "varstate/random_seed.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

std::vector<std::string> names(const std::vector<Variable>& vars) {
  std::vector<std::string> out;
  for (const auto& v : vars) out.push_back(v.op_name());
  return out;
}

// What TensorFlow's get_collection would print for each item: its name, or
// for unnamed items their value.
std::vector<std::string> item_names(const std::vector<std::any>& items) {
  std::vector<std::string> out;
  for (const std::any& item : items) {
    if (const auto* v = std::any_cast<Variable>(&item)) out.push_back(v->name());
    if (const auto* p = std::any_cast<PartitionedVariable>(&item)) out.push_back(p->name());
    if (const auto* op = std::any_cast<Op>(&item)) out.push_back(op->name());
    if (const auto* ph = std::any_cast<Placeholder>(&item)) out.push_back(ph->name() + ":0");
    if (const auto* s = std::any_cast<std::string>(&item)) out.push_back("str " + *s);
    if (const auto* i = std::any_cast<int>(&item)) out.push_back("int " + std::to_string(*i));
  }
  return out;
}
}  // namespace

TEST_CASE_METHOD(FreshGraph, "variables land in their collections", "[collections]") {
  Variable w(Tensor({1.f}), {.name = "w"});
  Variable step(Tensor(0), {.trainable = false, .name = "global_step"});
  Variable local(Tensor(0.f), {.trainable = false,
                               .collections = std::vector<std::string>{GraphKeys::LOCAL_VARIABLES},
                               .name = "local"});
  Variable model(Tensor(0.f), {.collections = std::vector<std::string>{GraphKeys::GLOBAL_VARIABLES,
                                                                       GraphKeys::MODEL_VARIABLES},
                               .name = "model"});
  Variable avg(Tensor(0.f),
               {.trainable = false,
                .collections = std::vector<std::string>{GraphKeys::GLOBAL_VARIABLES,
                                                        GraphKeys::MOVING_AVERAGE_VARIABLES},
                .name = "avg"});
  using V = std::vector<std::string>;
  CHECK(names(global_variables()) == V{"w", "global_step", "model", "avg"});
  CHECK(names(all_variables()) == names(global_variables()));
  CHECK(names(get_collection_variables(GraphKeys::VARIABLES)) == names(global_variables()));
  CHECK(names(trainable_variables()) == V{"w", "model"});
  CHECK(names(local_variables()) == V{"local"});
  CHECK(names(model_variables()) == V{"model"});
  CHECK(names(moving_average_variables()) == V{"avg"});
  CHECK(get_default_graph().variables().size() == 5);
}

TEST_CASE_METHOD(FreshGraph, "user collections and scope filters", "[collections]") {
  {
    NameScope a("encoder");
    Variable e1(Tensor(1.f), {.name = "w"});
    Variable e2(Tensor(1.f), {.name = "b"});
  }
  Variable d(Tensor(1.f), {.name = "decoder_w"});
  add_to_collection("my_losses", Tensor(0.5f));
  add_to_collection("my_losses", std::string("not a tensor"));
  add_to_collection(GraphKeys::REGULARIZATION_LOSSES, Tensor(0.1f));
  CHECK(get_collection("my_losses").size() == 2);
  CHECK(get_collection("nothing").empty());
  CHECK(get_collection(GraphKeys::REGULARIZATION_LOSSES).size() == 1);
  CHECK(names(get_collection_variables(GraphKeys::GLOBAL_VARIABLES, "encoder")) ==
        std::vector<std::string>{"encoder/w", "encoder/b"});
  CHECK(names(get_collection_variables(GraphKeys::GLOBAL_VARIABLES, ".*_w")) ==
        std::vector<std::string>{"decoder_w"});
  CHECK_THROWS_AS(get_collection_variables(GraphKeys::GLOBAL_VARIABLES, "(unclosed"), ValueError);
}

TEST_CASE_METHOD(FreshGraph, "get_collection(key, scope) is re.match(scope, item.name)",
                 "[collections]") {
  {
    auto enc = variable_scope("enc");
    get_variable("w", {.shape = TensorShape{2}});
    PartitionedVariable emb =
        get_variable("emb", {.shape = TensorShape{4, 2}, .partitioner = fixed_size_partitioner(2)});
    add_to_collection("mixed", emb);
  }
  {
    auto encoder = variable_scope("encoder");
    get_variable("w", {.shape = TensorShape{2}, .trainable = false});
  }
  add_to_collection("mixed", placeholder(DType::kFloat, TensorShape{2}, "enc/x"));
  add_to_collection("mixed", Op("enc/step", "NoOp", [] {}));
  add_to_collection("mixed", std::string("enc/unnamed"));
  add_to_collection("mixed", 7);
  using V = std::vector<std::string>;
  // No scope (or an empty one): every item, named or not.
  CHECK(item_names(get_collection("mixed")) ==
        V{"enc/emb", "enc/x:0", "enc/step", "str enc/unnamed", "int 7"});
  CHECK(item_names(get_collection("mixed", "")) == item_names(get_collection("mixed")));
  // A scope keeps named items matching at the start only; unnamed ones drop.
  CHECK(item_names(get_collection("mixed", "enc")) == V{"enc/emb", "enc/x:0", "enc/step"});
  CHECK(item_names(get_collection("mixed", "enc/[xs]")) == V{"enc/x:0", "enc/step"});
  CHECK(item_names(get_collection("mixed", "enc/.*:0$")) == V{"enc/x:0"});
  CHECK(item_names(get_collection("mixed", "x")).empty());
  CHECK(item_names(get_collection(GraphKeys::GLOBAL_VARIABLES, "enc/")) ==
        V{"enc/w:0", "enc/emb/part_0:0", "enc/emb/part_1:0"});
  CHECK(get_default_graph().get_collection(GraphKeys::GLOBAL_VARIABLES, "encoder").size() == 1);
  // The per-kind helpers take the same scope.
  CHECK(names(global_variables("enc")) ==
        V{"enc/w", "enc/emb/part_0", "enc/emb/part_1", "encoder/w"});
  CHECK(names(global_variables(".*/w")) == V{"enc/w", "encoder/w"});
  CHECK(names(global_variables("w")).empty());
  CHECK(names(trainable_variables("enc")) == V{"enc/w", "enc/emb/part_0", "enc/emb/part_1"});
  CHECK(names(trainable_variables("encoder")).empty());
  Variable local(Tensor(0.f), {.collections = std::vector<std::string>{GraphKeys::LOCAL_VARIABLES},
                               .name = "dec/local"});
  Variable model(Tensor(0.f), {.collections = std::vector<std::string>{GraphKeys::MODEL_VARIABLES},
                               .name = "dec/model"});
  Variable avg(Tensor(0.f),
               {.collections = std::vector<std::string>{GraphKeys::MOVING_AVERAGE_VARIABLES},
                .name = "dec/avg"});
  CHECK(names(local_variables("dec")) == V{"dec/local"});
  CHECK(names(local_variables("enc")).empty());
  CHECK(names(model_variables("dec/m")) == V{"dec/model"});
  CHECK(names(moving_average_variables("dec/a")) == V{"dec/avg"});
  CHECK(names(moving_average_variables("dec/m")).empty());
  // A malformed scope raises ValueError naming it.
  CHECK_THROWS_WITH(get_collection("mixed", "(unclosed"),
                    Catch::Contains("\"(unclosed\"") && Catch::Contains("regular expression"));
  CHECK_THROWS_AS(get_default_graph().get_collection("mixed", "["), ValueError);
  CHECK_THROWS_AS(global_variables("a{2,1}"), ValueError);
  CHECK_THROWS_AS(local_variables("*"), ValueError);
}

TEST_CASE_METHOD(FreshGraph, "the initializer helpers", "[initialization]") {
  Variable a(Tensor({1.f, 2.f}), {.name = "a"});
  Variable b(Tensor(3), {.name = "b"});
  Variable loc(Tensor(7.f), {.trainable = false,
                             .collections = std::vector<std::string>{GraphKeys::LOCAL_VARIABLES},
                             .name = "loc"});
  Session sess;
  CHECK_FALSE(is_variable_initialized(a));
  CHECK(report_uninitialized_variables().to_vector<std::string>() ==
        std::vector<std::string>{"a", "b", "loc"});
  Op check = assert_variables_initialized();
  CHECK_THROWS_AS(sess.run(check), FailedPreconditionError);
  CHECK_THROWS_WITH(sess.run(check), Catch::Contains("a") && Catch::Contains("loc"));

  Op none = initialize_variables({});
  sess.run(none);  // a runnable no-op
  CHECK(report_uninitialized_variables().num_elements() == 3);

  sess.run(initialize_variables({b}, "init_b"));
  CHECK(is_variable_initialized(b));
  CHECK(report_uninitialized_variables({a, b}).to_vector<std::string>() ==
        std::vector<std::string>{"a"});

  sess.run(global_variables_initializer());
  CHECK(report_uninitialized_variables().to_vector<std::string>() ==
        std::vector<std::string>{"loc"});
  sess.run(initialize_local_variables());
  CHECK(report_uninitialized_variables().num_elements() == 0);
  sess.run(check);  // passes now
  sess.run(assert_variables_initialized({a}));

  // Running an initializer again resets to the initial value.
  a.assign_add(10.f);
  sess.run(initialize_all_variables());
  CHECK(a.value().to_vector<float>() == std::vector<float>{1.f, 2.f});
}

TEST_CASE_METHOD(FreshGraph, "tables_initializer runs the TABLE_INITIALIZERS Ops in order",
                 "[initialization]") {
  Session sess;
  Op none = initialize_all_tables();
  CHECK(none.name() == "init_all_tables");
  sess.run(none);  // no tables: a runnable no-op
  std::vector<int> ran;
  add_to_collection(GraphKeys::TABLE_INITIALIZERS,
                    Op("vocab/table_init", "InitializeTableV2", [&] { ran.push_back(1); }));
  add_to_collection(GraphKeys::TABLE_INITIALIZERS,
                    Op("ids/table_init", "InitializeTableV2", [&] { ran.push_back(2); }));
  Op init = tables_initializer();
  CHECK(init.name() == "init_all_tables_1");
  sess.run(init);
  CHECK(ran == std::vector<int>{1, 2});
  add_to_collection(GraphKeys::TABLE_INITIALIZERS, std::string("not an op"));
  CHECK_THROWS_WITH(tables_initializer(), Catch::Contains("\"table_initializer\" collection"));
}

TEST_CASE_METHOD(FreshGraph, "graphs are separate; reset_default_graph starts over", "[graph]") {
  Variable v(1.f);
  CHECK(v.name() == "Variable:0");
  Graph other;
  {
    auto guard = other.as_default();
    Variable w(1.f);
    CHECK(w.name() == "Variable:0");
    CHECK(&w.graph() == &other);
    CHECK(global_variables().size() == 1);
  }
  CHECK(global_variables().size() == 1);
  reset_default_graph();
  CHECK(global_variables().empty());
  Variable fresh(1.f);
  CHECK(fresh.name() == "Variable:0");
  CHECK(v.name() == "Variable:0");  // the old variable stays usable
  Session().run(v.initializer());
  CHECK(v.value().scalar<float>() == 1.f);
}

TEST_CASE_METHOD(FreshGraph, "name scopes", "[graph]") {
  Graph& g = get_default_graph();
  CHECK(g.name_scope().empty());
  {
    NameScope a("a");
    CHECK(a.name() == "a/");
    CHECK(g.unique_name("add") == "a/add");
    CHECK(g.unique_name("add") == "a/add_1");
    CHECK(g.unique_name("ADD", false) == "a/ADD_2");  // case-insensitive, not reserved
    {
      NameScope abs("b/");  // re-enters "b/" exactly
      CHECK(abs.name() == "b/");
      NameScope root("");
      CHECK(g.name_scope().empty());
    }
  }
  NameScope a2("a");
  CHECK(a2.name() == "a_1/");
  set_random_seed(42);
  CHECK(g.random_seed() == 42);
  int64_t first = g.next_op_id();
  CHECK(g.next_op_id() > first);
}

TEST_CASE("reset_default_graph releases the old graph's variables", "[variables][graph]") {
  reset_default_graph();
  std::weak_ptr<void> dropped;
  std::optional<Variable> kept;
  {
    DeviceScope on(test_device_name());
    Variable gone(Tensor::zeros(DType::kFloat, {1000}), {.name = "gone"});
    kept.emplace(Tensor::from_vector<float>({1, 2}), VariableOptions{.name = "kept"});
    dropped = internal::state_handle(gone);
  }
  CHECK_FALSE(dropped.expired());  // the graph holds its variables
  CHECK(global_variables().size() == 2);
  reset_default_graph();
  CHECK(dropped.expired());  // ...until it is reset
  CHECK(global_variables().empty());
  // A handle the caller still holds keeps its variable.
  Session session;
  session.run(kept->initializer());
  CHECK(kept->eval(session).to_vector<float>() == std::vector<float>{1, 2});
}
