// Meta graphs: export, the TensorFlow-compatible contents, and import into a
// fresh graph followed by a restore.
#include <catch2/catch.hpp>

#include <filesystem>

#include "checkpoint/checkpoint_test_util.h"
#include "varstate/initializers.h"
#include "varstate/meta_graph.h"
#include "varstate/partitioners.h"
#include "varstate/placement.h"
#include "varstate/saver.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

namespace varstate {
namespace {

using testing::TempDir;

Tensor iota(int64_t n, float start, std::vector<int64_t> dims) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return Tensor::from_vector<float>(v, TensorShape(std::move(dims)));
}

// A small model: two trainable variables on ps tasks, a non-trainable
// step, a partitioned embedding, and a few user collections.
struct Source {
  Graph graph;
  Variable w, b, step;
  std::vector<Variable> emb;
  Source()
      : w(make(iota(6, 1, {2, 3}), "layer/w", "/job:ps/task:0")),
        b(make(iota(3, 10, {3}), "layer/b", "/job:ps/task:1")),
        step(Variable(Tensor(int64_t{7}),
                      {.trainable = false, .name = "global_step", .graph = &graph})) {
    for (int i = 0; i < 2; ++i) {
      emb.emplace_back(
          iota(4 * 2, static_cast<float>(8 * i), {4, 2}),
          VariableOptions{.name = "emb/part_" + std::to_string(i),
                          .graph = &graph,
                          .save_slice_info = SaveSliceInfo{"emb", {8, 2}, {4 * i, 0}, {4, 2}}});
    }
    graph.add_to_collection("train_op", std::string("train/step"));
    graph.add_to_collection("sizes", int64_t{3});
    graph.add_to_collection("sizes", int64_t{5});
    graph.add_to_collection("rates", 0.5f);
    graph.add_to_collection(GraphKeys::GLOBAL_STEP, step);
    auto guard = graph.as_default();
    Session sess;
    sess.run(global_variables_initializer());
  }
  Variable make(const Tensor& value, const std::string& name, const std::string& device) {
    DeviceScope host("/device:CPU:0");  // the devices below are the CPUs of ps tasks
    DeviceScope scope(device);
    return Variable(value, {.name = name, .graph = &graph});
  }
};

}  // namespace

TEST_CASE("export_meta_graph writes TensorFlow's structures", "[meta_graph]") {
  Source src;
  Saver saver({.var_list = std::map<std::string, Variable>{{"weights", src.w}, {"layer/b", src.b}},
               .graph = &src.graph});
  TempDir dir;
  MetaGraphDef meta = saver.export_meta_graph(dir / "model.meta");
  REQUIRE(std::filesystem::exists(dir / "model.meta"));
  CHECK(MetaGraphDef::parse(testing::read_file(dir / "model.meta")).serialize() ==
        meta.serialize());
  // The file's bytes are serialize()'s, byte for byte: the export writes the
  // graph_def it built as it is, where serialize() parses it and serializes
  // the whole message again.
  CHECK(testing::read_file(dir / "model.meta") == meta.serialize());

  REQUIRE(meta.saver_def.has_value());
  CHECK(meta.saver_def->filename_tensor_name == "save/Const:0");
  CHECK(meta.saver_def->restore_op_name == "save/restore_all");

  // Variable collections hold serialized VariableDefs.
  const CollectionDef& vars = meta.collection_def.at("variables");
  REQUIRE(vars.kind == CollectionDef::Kind::kBytesList);
  REQUIRE(vars.bytes_list.size() == 5);
  VariableDef first = VariableDef::parse(vars.bytes_list[0]);
  CHECK(first.variable_name == "layer/w:0");
  CHECK(first.initializer_name == "layer/w/Assign");
  CHECK(first.snapshot_name == "layer/w/read:0");
  CHECK(meta.collection_def.at("trainable_variables").bytes_list.size() == 4);
  CHECK(meta.collection_def.at("train_op").kind == CollectionDef::Kind::kNodeList);
  CHECK(meta.collection_def.at("train_op").node_list == std::vector<std::string>{"train/step"});
  CHECK(meta.collection_def.at("sizes").int64_list == std::vector<int64_t>{3, 5});
  CHECK(meta.collection_def.at("rates").float_list == std::vector<float>{0.5f});

  // Graph nodes: one VariableV2 per variable, and the save node.
  std::map<std::string, GraphNode> nodes;
  for (auto& n : meta.nodes()) nodes.emplace(n.name, n);
  const GraphNode& w = nodes.at("layer/w");
  CHECK(w.op == "VariableV2");
  CHECK(w.dtype == DType::kFloat);
  CHECK(w.shape == std::vector<int64_t>{2, 3});
  CHECK(w.device == "/job:ps/task:0/device:CPU:0");
  CHECK(nodes.at("global_step").dtype == DType::kInt64);
  const GraphNode& save = nodes.at("save/SaveV2");
  CHECK(save.op == "SaveV2");
  CHECK(save.input == std::vector<std::string>{"save/Const", "save/SaveV2/tensor_names",
                                               "save/SaveV2/shape_and_slices", "layer/b",
                                               "layer/w"});

  // Every name the VariableDefs and the SaverDef refer to is a node, and every
  // node input names a node (TensorFlow's import_meta_graph needs both).
  auto strip = [](const std::string& n) { return n.substr(0, n.rfind(':')); };
  for (const std::string& bytes : vars.bytes_list) {
    VariableDef def = VariableDef::parse(bytes);
    CAPTURE(def.variable_name);
    CHECK(nodes.at(strip(def.variable_name)).op == "VariableV2");
    CHECK(nodes.at(def.initializer_name).op == "Assign");
    CHECK(nodes.at(def.initializer_name).input ==
          std::vector<std::string>{strip(def.variable_name), strip(def.initial_value_name)});
    CHECK(nodes.at(strip(def.snapshot_name)).op == "Identity");
    CHECK(nodes.at(strip(def.initial_value_name)).op == "Const");
  }
  CHECK(nodes.at(strip(meta.saver_def->filename_tensor_name)).op == "Const");
  CHECK(nodes.at(strip(meta.saver_def->save_tensor_name)).op == "Identity");
  CHECK(nodes.at(meta.saver_def->restore_op_name).op == "NoOp");
  CHECK(nodes.at("save/RestoreV2").op == "RestoreV2");
  CHECK(nodes.at("save/Assign_1").input == std::vector<std::string>{"layer/w", "save/RestoreV2:1"});
  CHECK(nodes.at("save/restore_all").input ==
        std::vector<std::string>{"^save/Assign", "^save/Assign_1"});
  for (const auto& [name, node] : nodes) {
    for (const std::string& in : node.input) {
      CAPTURE(name, in);
      std::string target = in[0] == '^' ? in.substr(1) : in;
      target = target.substr(
          0, target.rfind(':') == std::string::npos ? target.size() : target.rfind(':'));
      CHECK(nodes.count(target) == 1);
    }
  }

  // A sharded saver: one SaveV2 per device, merged; one RestoreV2 per device.
  Saver sharded({.sharded = true, .graph = &src.graph});
  MetaGraphDef sm = sharded.export_meta_graph();
  std::map<std::string, GraphNode> snodes;
  for (auto& n : sm.nodes()) snodes.emplace(n.name, n);
  const std::string scope = strip(sm.saver_def->filename_tensor_name).substr(0, 6);  // "save_1"
  CHECK(snodes.at(strip(sm.saver_def->save_tensor_name)).input ==
        std::vector<std::string>{scope + "/Const", "^" + scope + "/MergeV2Checkpoints"});
  CHECK(snodes.at(scope + "/SaveV2_2").op == "SaveV2");  // ps/task:0, ps/task:1, local CPU
  CHECK(snodes.count(scope + "/SaveV2_3") == 0);
  CHECK(snodes.at(sm.saver_def->restore_op_name).input ==
        std::vector<std::string>{"^" + scope + "/restore_shard", "^" + scope + "/restore_shard_1",
                                 "^" + scope + "/restore_shard_2"});

  // Only the requested collections; text format parses back.
  MetaGraphDef some =
      saver.export_meta_graph(dir / "some.pbtxt", std::vector<std::string>{"sizes"}, true);
  CHECK(some.collection_def.size() == 1);
  const std::string text = testing::read_file(dir / "some.pbtxt");
  CHECK(text.find("collection_def") != std::string::npos);
  CHECK(MetaGraphDef::parse_text(text).serialize() == some.serialize());
}

TEST_CASE("import_meta_graph recreates variables, collections and saver", "[meta_graph]") {
  DeviceScope host("/device:CPU:0");  // device strings below name CPUs
  TempDir dir;
  Session sess;
  std::string ckpt;
  {
    Source src;
    std::vector<Variable> list = {src.w, src.b, src.step};
    list.insert(list.end(), src.emb.begin(), src.emb.end());
    Saver saver({.var_list = list, .sharded = true, .graph = &src.graph});
    ckpt = *saver.save(sess, dir / "my-model", {.global_step = src.step}).path();
    CHECK(ckpt == dir / "my-model-7");
  }
  REQUIRE(std::filesystem::exists(dir / "my-model-7.meta"));

  for (bool as_text : {false, true}) {
    CAPTURE(as_text);
    std::string meta_file = dir / "my-model-7.meta";
    if (as_text) {
      meta_file = dir / "copy.meta.txt";
      testing::write_file(
          meta_file, MetaGraphDef::parse(testing::read_file(dir / "my-model-7.meta")).to_text());
    }
    Graph fresh;
    std::optional<Saver> saver = import_meta_graph(meta_file, {.graph = &fresh});
    REQUIRE(saver.has_value());
    CHECK(saver->as_saver_def().sharded);
    CHECK(saver->items().size() == 5);
    auto w = fresh.find_variable("layer/w");
    REQUIRE(w.has_value());
    CHECK_FALSE(w->is_initialized());
    CHECK(w->dtype() == DType::kFloat);
    CHECK(w->shape() == TensorShape{2, 3});
    CHECK(w->trainable());
    CHECK(w->placement() == "/job:ps/task:0/device:CPU:0");
    auto step = fresh.find_variable("global_step");
    REQUIRE(step.has_value());
    CHECK_FALSE(step->trainable());
    auto part = fresh.find_variable("emb/part_1");
    REQUIRE(part.has_value());
    REQUIRE(part->save_slice_info().has_value());
    CHECK(part->save_slice_info()->var_offset == std::vector<int64_t>{4, 0});

    CHECK(fresh.get_collection_variables(GraphKeys::GLOBAL_VARIABLES).size() == 5);
    CHECK(fresh.get_collection_variables(GraphKeys::TRAINABLE_VARIABLES).size() == 4);
    CHECK(fresh.get_collection_variables(GraphKeys::GLOBAL_STEP).size() == 1);
    auto train_op = fresh.get_collection("train_op");
    REQUIRE(train_op.size() == 1);
    CHECK(std::any_cast<std::string>(train_op[0]) == "train/step");

    saver->restore(sess, ckpt);
    CHECK(w->value().to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
    CHECK(fresh.find_variable("layer/b")->value().to_vector<float>() ==
          std::vector<float>{10, 11, 12});
    CHECK(step->value().scalar<int64_t>() == 7);
    CHECK(part->value().to_vector<float>() == iota(8, 8, {4, 2}).to_vector<float>());

    // Re-exported, the imported initial values are exported again.
    std::map<std::string, GraphNode> nodes;
    for (auto& n : saver->export_meta_graph().nodes()) nodes.emplace(n.name, n);
    CHECK(nodes.at("layer/w/initial_value").op == "Const");
    CHECK(nodes.at("layer/w/Assign").op == "Assign");
  }
}

TEST_CASE("import_meta_graph: custom keys, clear_devices, no variables", "[meta_graph]") {
  DeviceScope host("/device:CPU:0");  // device strings below name CPUs
  TempDir dir;
  Session sess;
  std::string ckpt;
  {
    Source src;
    Saver saver(
        {.var_list = std::map<std::string, Variable>{{"weights", src.w}}, .graph = &src.graph});
    ckpt = *saver.save(sess, dir / "m").path();
  }
  Graph fresh;
  std::optional<Saver> saver =
      import_meta_graph(dir / "m.meta", {.clear_devices = true, .graph = &fresh});
  REQUIRE(saver.has_value());
  REQUIRE(saver->items().size() == 1);
  CHECK(saver->items()[0].key == "weights");
  CHECK(fresh.find_variable("layer/w")->placement() == "/device:CPU:0");
  saver->restore(sess, ckpt);
  CHECK(fresh.find_variable("layer/w")->value().to_vector<float>() ==
        std::vector<float>{1, 2, 3, 4, 5, 6});

  // Without a save node the saver covers the global variables.
  MetaGraphDef bare = export_meta_graph({.graph = &fresh});
  Graph other;
  auto from_bare = import_meta_graph(bare, {.graph = &other});
  REQUIRE(from_bare.has_value());
  CHECK(from_bare->items().size() == 5);

  Graph empty;
  CHECK_FALSE(
      import_meta_graph(export_meta_graph({.graph = &empty}), {.graph = &other}).has_value());
  testing::write_file(dir / "junk.meta", std::string("\xff\xff\xff not a meta graph {{{"));
  CHECK_THROWS_AS(import_meta_graph(dir / "junk.meta", {.graph = &other}), DataLossError);
  CHECK_THROWS_AS(import_meta_graph(dir / "missing.meta", {.graph = &other}), NotFoundError);
}

TEST_CASE("export_meta_graph writes initializers as ops; import rebuilds them", "[meta_graph]") {
  Graph source;
  std::map<std::string, std::vector<float>> first;
  MetaGraphDef meta;
  {
    auto as_default = source.as_default();
    source.set_random_seed(5);
    auto make = [](const char* name, Initializer init, TensorShape shape) {
      return get_variable(name, {.shape = shape, .initializer = init});
    };
    make("uniform", random_uniform_initializer({.minval = -2, .maxval = 3, .seed = 1}), {512, 512});
    make("normal", random_normal_initializer({.mean = 1, .stddev = 2}), {512, 512});
    make("glorot", glorot_normal_initializer({.seed = 2}), {64, 32});
    make("zeros", zeros_initializer(), {300, 300});
    get_variable("part", {.shape = TensorShape{10, 4},
                          .initializer = glorot_uniform_initializer({.seed = 7}),
                          .partitioner = fixed_size_partitioner(3)});
    Variable big(Tensor::zeros(DType::kFloat, TensorShape{200, 200}), {.name = "big"});
    Session sess;
    sess.run(global_variables_initializer());
    for (const Variable& v : global_variables())
      first[v.op_name()] = v.eval(sess).to_vector<float>();
    meta = export_meta_graph({.graph = &source});
  }
  // 1.4 MB of variables, a few KB of graph (big's 160 KB value is not stored).
  CHECK(meta.serialize().size() < 16 * 1024);
  std::map<std::string, GraphNode> nodes;
  for (auto& n : meta.nodes()) nodes.emplace(n.name, n);
  CHECK(nodes.at("uniform/Initializer/RandomUniform").op == "RandomUniform");
  CHECK(nodes.at("uniform/initial_value").op == "Add");
  CHECK(nodes.at("normal/Initializer/RandomStandardNormal").op == "RandomStandardNormal");
  CHECK(nodes.at("glorot/Initializer/TruncatedNormal").op == "TruncatedNormal");
  CHECK(nodes.at("zeros/initial_value").op == "Fill");
  CHECK(nodes.at("part/part_1/Initializer/Slice").op == "Slice");
  CHECK(nodes.at("big/Assign").op == "NoOp");
  CHECK(nodes.count("big/initial_value") == 0);

  Graph fresh;
  auto as_default = fresh.as_default();
  import_meta_graph(meta);
  Session sess;
  // "big" has no initializer: global_variables_initializer() names it.
  CHECK_THROWS_AS(global_variables_initializer(), ValueError);
  for (const auto& [name, values] : first) {
    CAPTURE(name);
    if (name == "big") continue;
    Variable v = *fresh.find_variable(name);
    sess.run(v.initializer());
    CHECK(v.eval(sess).to_vector<float>() == values);
  }
}

}  // namespace varstate
