// Update Ops in meta graphs: a train_op exported with a checkpoint runs
// after import_meta_graph in a fresh graph, and does exactly what it did in
// the program that built it.
#include <catch2/catch.hpp>

#include <algorithm>

#include "checkpoint/checkpoint_test_util.h"
#include "varstate/meta_graph.h"
#include "varstate/partitioned_variable.h"
#include "varstate/partitioners.h"
#include "varstate/saver.h"
#include "varstate/state_ops.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

namespace varstate {
namespace {

using testing::TempDir;

const GraphNode* node_named(const std::vector<GraphNode>& nodes, const std::string& name) {
  auto it =
      std::find_if(nodes.begin(), nodes.end(), [&](const GraphNode& n) { return n.name == name; });
  return it == nodes.end() ? nullptr : &*it;
}

// The feeds of step `i`: ids and rows that differ from step to step.
FeedDict feeds_for(int i) {
  const float f = static_cast<float>(i);
  return {{"ids", Tensor::from_vector<int64_t>({i % 3, 2, (i + 1) % 3})},
          {"rows", Tensor::from_vector<float>({f, 1, 2 * f, 3, 0.5f, f}, {3, 2})},
          {"lr", Tensor(0.25f * f)}};
}

// The model every test builds: an embedding, a dense weight, a step
// counter, a min-tracker, and a train_op over placeholders, a constant and
// another variable's value.
struct Model {
  Variable emb, w, bias, step, floor;
  PartitionedVariable table;
  Op train_op;
  Model()
      : emb(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}), {.name = "emb"}),
        w(Tensor({1.f, 2.f}), {.name = "dense/w"}),
        bias(Tensor({0.5f, -0.5f}), {.name = "dense/b"}),
        step(Tensor(int64_t{0}), {.trainable = false, .name = "global_step"}),
        floor(Tensor({9.f, 9.f, 9.f}), {.name = "floor"}),
        table(get_variable("table", {.shape = TensorShape{5, 2},
                                     .initializer = random_uniform_initializer({.seed = 7}),
                                     .partitioner = fixed_size_partitioner(2)})) {
    Placeholder ids = placeholder(DType::kInt64, TensorShape{-1}, "ids");
    Placeholder rows = placeholder(DType::kFloat, TensorShape{-1, 2}, "rows");
    Placeholder lr = placeholder(DType::kFloat, TensorShape{}, "lr");
    train_op = Op::group(
        {scatter_add_op(emb, ids, rows), assign_sub_op(w, lr), assign_add_op(w, bias),
         assign_add_op(bias, Tensor({1.f, 2.f})),
         scatter_min_op(floor, Tensor({0, 2}), Tensor({4.f, 7.f})), count_up_to_op(step, 100),
         scatter_sub_op(table, ids, rows), assign_add_op(table, lr),
         scatter_update_op(table, Tensor({4, 0}),
                           Tensor::from_vector<float>({7, 8, 9, 10}, {2, 2}))},
        "train");
    get_default_graph().add_to_collection("train_op", train_op);
  }
};

}  // namespace

TEST_CASE("an exported train_op is written as TensorFlow nodes", "[meta_graph][state_ops]") {
  reset_default_graph();
  Model m;
  MetaGraphDef meta = export_meta_graph();
  REQUIRE(meta.collection_def.at("train_op").node_list == std::vector<std::string>{"train"});
  const std::vector<GraphNode> nodes = meta.nodes();
  const GraphNode* train = node_named(nodes, "train");
  REQUIRE(train);
  CHECK(train->op == "NoOp");
  CHECK(train->input == std::vector<std::string>{
                            "^emb/ScatterAdd", "^dense/w/AssignSub", "^dense/w/AssignAdd",
                            "^dense/b/AssignAdd", "^floor/ScatterMin", "^global_step/CountUpTo",
                            "^table/ScatterSub", "^table/AssignAdd", "^table/ScatterUpdate"});
  // A PartitionedVariable's update: routing nodes, one update per part, a NoOp over them.
  const GraphNode* part1 = node_named(nodes, "table/ScatterSub/part_1");
  REQUIRE(part1);
  CHECK(part1->op == "ScatterSub");
  CHECK(part1->input == std::vector<std::string>{"table/part_1", "table/ScatterSub/index_parts:1",
                                                 "table/ScatterSub/update_parts:1"});
  CHECK(node_named(nodes, "table/ScatterSub")->input ==
        std::vector<std::string>{"^table/ScatterSub/part_0", "^table/ScatterSub/part_1"});
  CHECK(node_named(nodes, "table/AssignAdd/part_0")->input ==
        std::vector<std::string>{"table/part_0", "table/AssignAdd/split"});
  CHECK(node_named(nodes, "table/AssignAdd/split")->op == "SplitV");
  const GraphNode* scatter = node_named(nodes, "emb/ScatterAdd");
  REQUIRE(scatter);
  CHECK(scatter->op == "ScatterAdd");
  CHECK(scatter->input == std::vector<std::string>{"emb", "ids", "rows"});
  const GraphNode* ids = node_named(nodes, "ids");
  REQUIRE(ids);
  CHECK(ids->op == "Placeholder");
  CHECK(ids->dtype == DType::kInt64);
  CHECK(node_named(nodes, "dense/w/AssignAdd")->input ==
        std::vector<std::string>{"dense/w", "dense/b/read"});
  const GraphNode* constant = node_named(nodes, "dense/b/AssignAdd/delta");
  REQUIRE(constant);
  CHECK(constant->op == "Const");
  CHECK(node_named(nodes, "floor/ScatterMin")->input ==
        std::vector<std::string>{"floor", "floor/ScatterMin/indices", "floor/ScatterMin/updates"});
  // The text form names the attributes TensorFlow's op definitions require.
  const std::string text = meta.to_text();
  CHECK(text.find("key: \"Tindices\"") != std::string::npos);
  CHECK(text.find("key: \"limit\"") != std::string::npos);
}

TEST_CASE("an imported train_op runs as the original does", "[meta_graph][state_ops]") {
  TempDir dir;
  const std::string prefix = dir.path() + "/model";
  constexpr int kSteps = 4;
  std::vector<Tensor> want;
  {
    reset_default_graph();
    Model m;
    Session sess;
    sess.run(global_variables_initializer());
    Saver saver;
    saver.save(sess, prefix);
    for (int i = 0; i < kSteps; ++i) sess.run(m.train_op, feeds_for(i));
    for (const Variable& v : {m.emb, m.w, m.bias, m.step, m.floor, m.table[0], m.table[1]}) {
      want.push_back(v.eval(sess));
    }
    CHECK(m.step.eval(sess).scalar<int64_t>() == kSteps);
  }
  reset_default_graph();
  std::optional<Saver> saver = import_meta_graph(prefix + ".meta");
  REQUIRE(saver);
  Session sess;
  saver->restore(sess, prefix);
  std::vector<std::any> items = get_default_graph().get_collection("train_op");
  REQUIRE(items.size() == 1);
  REQUIRE(items[0].type() == typeid(Op));
  const Op train_op = std::any_cast<Op>(items[0]);
  CHECK(train_op.name() == "train");
  CHECK(train_op.placeholders().size() == 3);
  CHECK(find_placeholder("ids"));
  for (int i = 0; i < kSteps; ++i) sess.run(train_op, feeds_for(i));
  const char* names[] = {"emb",   "dense/w",      "dense/b",     "global_step",
                         "floor", "table/part_0", "table/part_1"};
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(names[i]);
    Tensor got = get_default_graph().find_variable(names[i])->eval(sess);
    CHECK(got.dtype() == want[i].dtype());
    CHECK(got.shape() == want[i].shape());
    CHECK(std::memcmp(got.raw_data(), want[i].raw_data(), got.nbytes()) == 0);
  }
  // Feeds are checked as on the original.
  CHECK_THROWS_AS(sess.run(train_op), InvalidArgumentError);
  // Re-exported, the imported Op keeps its nodes.
  MetaGraphDef again = export_meta_graph();
  CHECK(again.collection_def.at("train_op").node_list == std::vector<std::string>{"train"});
  REQUIRE(node_named(again.nodes(), "emb/ScatterAdd"));
  CHECK(node_named(again.nodes(), "emb/ScatterAdd")->input ==
        std::vector<std::string>{"emb", "ids", "rows"});
}

TEST_CASE("Ops a graph cannot hold are exported by name only", "[meta_graph][state_ops]") {
  reset_default_graph();
  Variable v(Tensor(1.f), {.name = "v"});
  Graph other;
  Variable foreign(Tensor(2.f), {.name = "foreign", .graph = &other});
  PartitionedVariable p =
      get_variable("p", {.shape = TensorShape{4, 2}, .partitioner = fixed_size_partitioner(2)});
  Graph& g = get_default_graph();
  g.add_to_collection("ops", assign_add_op(v, [] { return Tensor(1.f); }));
  g.add_to_collection("ops", Op("custom", "Custom", [] {}));
  g.add_to_collection("ops", assign_add_op(v, foreign));
  g.add_to_collection("ops", scatter_add_op(p, Tensor({0}), Tensor(1.f)));
  g.add_to_collection("ops", scatter_add_op(v, Tensor({0.5f}), Tensor({1.f})));
  // The initializer is "v/Assign": an assign Op of `v` takes the next name.
  g.add_to_collection("ops", assign_op(v, Tensor(3.f)));
  MetaGraphDef meta = export_meta_graph();
  REQUIRE(node_named(meta.nodes(), "p/ScatterAdd"));
  CHECK(meta.collection_def.at("ops").node_list ==
        std::vector<std::string>{"v/AssignAdd", "custom", "v/AssignAdd_1", "p/ScatterAdd",
                                 "v/ScatterAdd", "v/Assign_1"});
  const std::vector<GraphNode> nodes = meta.nodes();
  CHECK_FALSE(node_named(nodes, "v/AssignAdd"));
  CHECK_FALSE(node_named(nodes, "v/ScatterAdd"));
  REQUIRE(node_named(nodes, "v/Assign"));
  CHECK(node_named(nodes, "v/Assign")->input == std::vector<std::string>{"v", "v/initial_value"});
  REQUIRE(node_named(nodes, "v/Assign_1"));
  CHECK(node_named(nodes, "v/Assign_1")->input ==
        std::vector<std::string>{"v", "v/Assign_1/value"});

  // After import, the names that are no node stay names; the node runs.
  reset_default_graph();
  import_meta_graph(meta);
  std::vector<std::any> items = get_default_graph().get_collection("ops");
  REQUIRE(items.size() == 6);
  CHECK(std::any_cast<std::string>(items[0]) == "v/AssignAdd");
  CHECK(std::any_cast<std::string>(items[1]) == "custom");
  CHECK(items[3].type() == typeid(Op));  // the PartitionedVariable's scatter
  REQUIRE(items[5].type() == typeid(Op));
  Session sess;
  Variable imported = *get_default_graph().find_variable("v");
  imported.initializer().run();
  sess.run(std::any_cast<Op>(items[5]));
  CHECK(imported.eval(sess).scalar<float>() == 3.f);
}

TEST_CASE("import_meta_graph runs TensorFlow's resource-variable update nodes",
          "[meta_graph][state_ops]") {
  // The nodes tf.compat.v1 builds for resource variables: v.assign_add(x)
  // (AssignAddVariableOp, then a read whose control input is the update),
  // tf.compat.v1.scatter_sub, and tf.group over them.
  const std::string text = R"pb(
    graph_def {
      node {
        name: "v"
        op: "VarHandleOp"
        attr {
          key: "dtype"
          value { type: DT_FLOAT }
        }
        attr {
          key: "shape"
          value { shape { dim { size: 3 } } }
        }
      }
      node {
        name: "x"
        op: "Placeholder"
        attr {
          key: "dtype"
          value { type: DT_FLOAT }
        }
      }
      node {
        name: "AssignAddVariableOp"
        op: "AssignAddVariableOp"
        input: "v"
        input: "x"
        attr {
          key: "dtype"
          value { type: DT_FLOAT }
        }
      }
      node {
        name: "ReadVariableOp"
        op: "ReadVariableOp"
        input: "v"
        input: "^AssignAddVariableOp"
        attr {
          key: "dtype"
          value { type: DT_FLOAT }
        }
      }
      node { name: "Identity" op: "Identity" input: "ReadVariableOp" }
      node {
        name: "idx"
        op: "Const"
        attr {
          key: "dtype"
          value { type: DT_INT32 }
        }
        attr {
          key: "value"
          value {
            tensor {
              dtype: DT_INT32
              tensor_shape { dim { size: 2 } }
              int_val: 0
              int_val: 2
            }
          }
        }
      }
      node {
        name: "two"
        op: "Const"
        attr {
          key: "dtype"
          value { type: DT_FLOAT }
        }
        attr {
          key: "value"
          value {
            tensor {
              dtype: DT_FLOAT
              tensor_shape { dim { size: 2 } }
              float_val: 2
            }
          }
        }
      }
      node {
        name: "ResourceScatterSub"
        op: "ResourceScatterSub"
        input: "v"
        input: "idx"
        input: "two"
      }
      node { name: "train" op: "NoOp" input: "^Identity" input: "^ResourceScatterSub" }
      node { name: "loop" op: "NoOp" input: "^loop2" }
      node { name: "loop2" op: "NoOp" input: "^loop" }
      node { name: "mul" op: "Mul" input: "x" input: "x" }
      node { name: "uses_mul" op: "AssignVariableOp" input: "v" input: "mul" }
    }
    collection_def {
      key: "variables"
      value { bytes_list { value: "\n\003v:0" } }
    }
    collection_def {
      key: "train_op"
      value { node_list { value: "train" value: "loop" value: "uses_mul" } }
    }
  )pb";
  reset_default_graph();
  import_meta_graph(MetaGraphDef::parse_text(text));
  Variable v = *get_default_graph().find_variable("v");
  Session sess;
  v.assign(Tensor({10.f, 20.f, 30.f}));
  std::vector<std::any> items = get_default_graph().get_collection("train_op");
  REQUIRE(items.size() == 3);
  REQUIRE(items[0].type() == typeid(Op));
  CHECK(std::any_cast<std::string>(items[1]) == "loop");      // a cycle
  CHECK(std::any_cast<std::string>(items[2]) == "uses_mul");  // a value varstate cannot compute
  const Op train = std::any_cast<Op>(items[0]);
  sess.run(train, {{"x", Tensor({1.f, 1.f, 1.f})}});
  sess.run(train, {{"x", Tensor({0.5f, 0.f, 0.f})}});
  // Each run: v += x, then v[0] -= 2 and v[2] -= 2 (the Const's last value repeats).
  CHECK(v.eval(sess).to_vector<float>() == std::vector<float>{7.5f, 21.f, 27.f});
}

TEST_CASE("exported values: literals convert, scalars broadcast, other dtypes stay names",
          "[meta_graph][state_ops]") {
  reset_default_graph();
  Variable v(Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}), {.name = "v"});
  Variable ints(Tensor({1, 2}), {.name = "ints"});
  Variable doubles(Tensor::from_vector<double>({1, 2}), {.name = "doubles"});
  Placeholder half = placeholder(DType::kFloat, TensorShape{}, "half");
  Graph& g = get_default_graph();
  g.add_to_collection("ops", assign_add_op(v, 2));               // an int literal: float
  g.add_to_collection("ops", assign_sub_op(v, half));            // a scalar placeholder
  g.add_to_collection("ops", assign_add_op(ints, doubles));      // float64 into int32: no
  g.add_to_collection("ops", assign_add_op(ints, Tensor(1.5)));  // a literal that does not fit
  g.add_to_collection("ops", assign_add_op(ints, Tensor(int64_t{1}).strongly_typed()));
  // A constant above 64 MiB would be written again with every save.
  const int64_t big_size = (int64_t{64} << 20) / 4 + 1;
  Variable big(Tensor::zeros(DType::kFloat, {big_size}), {.name = "big"});
  g.add_to_collection("ops", assign_op(big, Tensor::zeros(DType::kFloat, {big_size})));
  MetaGraphDef meta = export_meta_graph();
  const std::vector<GraphNode> nodes = meta.nodes();
  const GraphNode* add = node_named(nodes, "v/AssignAdd");
  REQUIRE(add);
  CHECK(add->input == std::vector<std::string>{"v", "v/AssignAdd/broadcast"});
  REQUIRE(node_named(nodes, "v/AssignAdd/delta"));
  CHECK(node_named(nodes, "v/AssignAdd/delta")->dtype == DType::kFloat);
  CHECK(node_named(nodes, "v/AssignSub")->input ==
        std::vector<std::string>{"v", "v/AssignSub/broadcast"});
  CHECK(node_named(nodes, "v/AssignSub/broadcast")->input ==
        std::vector<std::string>{"half", "v/AssignSub/shape"});
  CHECK_FALSE(node_named(nodes, "ints/AssignAdd"));

  reset_default_graph();
  import_meta_graph(meta);
  std::vector<std::any> items = get_default_graph().get_collection("ops");
  REQUIRE(items.size() == 6);
  REQUIRE(items[0].type() == typeid(Op));
  REQUIRE(items[1].type() == typeid(Op));
  for (size_t i = 2; i < 6; ++i) CHECK(items[i].type() == typeid(std::string));
  CHECK(std::any_cast<std::string>(items[5]) == "big/Assign_1");
  Variable imported = *get_default_graph().find_variable("v");
  Session sess;
  imported.assign(Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}));
  sess.run(std::any_cast<Op>(items[0]));
  sess.run(std::any_cast<Op>(items[1]), {{"half", Tensor(0.5f)}});
  CHECK(imported.eval(sess).to_vector<float>() == std::vector<float>{2.5f, 3.5f, 4.5f, 5.5f});
}

TEST_CASE("an imported partitioned scatter checks every index before any part changes",
          "[meta_graph][state_ops]") {
  reset_default_graph();
  PartitionedVariable t = get_variable("t", {.shape = TensorShape{6, 1},
                                             .initializer = zeros_initializer(),
                                             .partitioner = fixed_size_partitioner(3)});
  Placeholder ids = placeholder(DType::kInt32, TensorShape{-1}, "ids");
  get_default_graph().add_to_collection("train_op",
                                        scatter_add_op(t, ids, Tensor(1.f), {.name = "t"}));
  MetaGraphDef meta = export_meta_graph();
  reset_default_graph();
  import_meta_graph(meta);
  Session sess;
  std::vector<Variable> parts;
  for (int k = 0; k < 3; ++k) {
    parts.push_back(*get_default_graph().find_variable("t/part_" + std::to_string(k)));
    parts.back().assign(Tensor::zeros(DType::kFloat, {2, 1}));
  }
  const Op op = std::any_cast<Op>(get_default_graph().get_collection("train_op")[0]);
  sess.run(op, {{"ids", Tensor({5, 0, 3, 3})}});
  CHECK_THROWS_WITH(sess.run(op, {{"ids", Tensor({1, 6})}}),
                    Catch::Matchers::Contains("indices[1] = 6 is not in [0, 6)"));
  std::vector<float> all;
  for (const Variable& p : parts) {
    for (float x : p.eval(sess).to_vector<float>()) all.push_back(x);
  }
  CHECK(all == std::vector<float>{1, 0, 0, 2, 0, 1});
}

TEST_CASE("nodes import_meta_graph cannot run stay names", "[meta_graph][state_ops]") {
  const std::string text = R"pb(
    graph_def {
      node {
        name: "v"
        op: "VariableV2"
        attr {
          key: "dtype"
          value { type: DT_FLOAT }
        }
        attr {
          key: "shape"
          value { shape { dim { size: 2 } } }
        }
      }
      node {
        name: "c"
        op: "Const"
        attr {
          key: "dtype"
          value { type: DT_FLOAT }
        }
        attr {
          key: "value"
          value {
            tensor {
              dtype: DT_FLOAT
              tensor_shape { dim { size: 2 } }
              tensor_content: "abc"
            }
          }
        }
      }
      node { name: "corrupt" op: "AssignAdd" input: "v" input: "c" }
      node { name: "not_a_variable" op: "AssignAdd" input: "c" input: "c" }
      node { name: "one_input" op: "ScatterAdd" input: "v" input: "c" }
      node { name: "apply" op: "ApplyGradientDescent" input: "v" input: "c" input: "c" }
      node { name: "missing_input" op: "AssignAdd" input: "v" input: "nowhere" }
    }
    collection_def {
      key: "variables"
      value { bytes_list { value: "\n\003v:0" } }
    }
    collection_def {
      key: "train_op"
      value {
        node_list {
          value: "corrupt"
          value: "not_a_variable"
          value: "one_input"
          value: "apply"
          value: "missing_input"
          value: "no_such_node"
        }
      }
    }
  )pb";
  reset_default_graph();
  std::optional<Saver> saver = import_meta_graph(MetaGraphDef::parse_text(text));
  CHECK(saver);
  std::vector<std::any> items = get_default_graph().get_collection("train_op");
  const std::vector<std::string> names = {"corrupt", "not_a_variable", "one_input",
                                          "apply",   "missing_input",  "no_such_node"};
  REQUIRE(items.size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    INFO(names[i]);
    REQUIRE(items[i].type() == typeid(std::string));
    CHECK(std::any_cast<std::string>(items[i]) == names[i]);
  }
}

}  // namespace varstate
