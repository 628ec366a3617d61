#include "varstate/meta_graph.h"

#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/wire_format_lite.h>

#include <any>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "base/logging.h"
#include "checkpoint/file_system.h"
#include "checkpoint/graph_def_builder_internal.h"
#include "checkpoint/meta_graph_initializers_internal.h"
#include "checkpoint/meta_graph_internal.h"
#include "checkpoint/meta_graph_ops_internal.h"
#include "proto/meta_graph.pb.h"
#include "proto/saver.pb.h"
#include "runtime/keyed_storage.h"
#include "varstate/error.h"
#include "varstate/placement.h"
#include "varstate/tensor_slice.h"

namespace varstate {
namespace {

// Map fields (node attributes, collections) in a stable order, so equal
// messages serialize to equal bytes.
std::string deterministic_bytes(const google::protobuf::MessageLite& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

// Collections whose items are variables, stored as serialized VariableDefs.
const std::set<std::string>& variable_collections() {
  static const std::set<std::string> keys = {
      GraphKeys::GLOBAL_VARIABLES, GraphKeys::TRAINABLE_VARIABLES,      GraphKeys::LOCAL_VARIABLES,
      GraphKeys::MODEL_VARIABLES,  GraphKeys::MOVING_AVERAGE_VARIABLES, GraphKeys::GLOBAL_STEP,
      "metric_variables",          "trainable_resource_variables"};
  return keys;
}

// The op name of a graph input: "^x", "x:0" -> "x".
std::string input_node(std::string input) {
  if (!input.empty() && input[0] == '^') input.erase(0, 1);
  auto colon = input.rfind(':');
  if (colon != std::string::npos) input.erase(colon);
  return input;
}

std::string strip_output(const std::string& name) {
  auto colon = name.rfind(':');
  return colon == std::string::npos ? name : name.substr(0, colon);
}

// --- conversions to and from the generated protos ----------------------------

// Without graph_def (field 2) when !with_graph_def.
void to_proto(const MetaGraphDef& in, tf::MetaGraphDef* out, bool with_graph_def = true) {
  if (in.meta_info_def) {
    auto* m = out->mutable_meta_info_def();
    m->set_meta_graph_version(in.meta_info_def->meta_graph_version);
    for (const auto& t : in.meta_info_def->tags) m->add_tags(t);
    m->set_tensorflow_version(in.meta_info_def->tensorflow_version);
    m->set_tensorflow_git_version(in.meta_info_def->tensorflow_git_version);
    m->set_stripped_default_attrs(in.meta_info_def->stripped_default_attrs);
  }
  if (with_graph_def && !in.graph_def.empty() &&
      !out->mutable_graph_def()->ParseFromString(in.graph_def)) {
    throw InvalidArgumentError("MetaGraphDef: graph_def is not a serialized GraphDef");
  }
  if (in.saver_def && !out->mutable_saver_def()->ParseFromString(in.saver_def->serialize())) {
    throw InternalError("MetaGraphDef: cannot re-parse a SaverDef");
  }
  for (const auto& [key, c] : in.collection_def) {
    tf::CollectionDef& p = (*out->mutable_collection_def())[key];
    switch (c.kind) {
      case CollectionDef::Kind::kNodeList:
        for (const auto& v : c.node_list) p.mutable_node_list()->add_value(v);
        break;
      case CollectionDef::Kind::kBytesList:
        for (const auto& v : c.bytes_list) p.mutable_bytes_list()->add_value(v);
        break;
      case CollectionDef::Kind::kInt64List:
        for (int64_t v : c.int64_list) p.mutable_int64_list()->add_value(v);
        break;
      case CollectionDef::Kind::kFloatList:
        for (float v : c.float_list) p.mutable_float_list()->add_value(v);
        break;
      case CollectionDef::Kind::kNone:
        break;
    }
  }
}

MetaGraphDef from_proto(const tf::MetaGraphDef& in) {
  MetaGraphDef out;
  if (in.has_meta_info_def()) {
    const auto& m = in.meta_info_def();
    out.meta_info_def = MetaInfoDef{m.meta_graph_version(),
                                    {m.tags().begin(), m.tags().end()},
                                    m.tensorflow_version(),
                                    m.tensorflow_git_version(),
                                    m.stripped_default_attrs()};
  }
  if (in.has_graph_def()) out.graph_def = deterministic_bytes(in.graph_def());
  if (in.has_saver_def()) out.saver_def = SaverDef::parse(in.saver_def().SerializeAsString());
  for (const auto& [key, p] : in.collection_def()) {
    CollectionDef c;
    switch (p.kind_case()) {
      case tf::CollectionDef::kNodeList:
        c.kind = CollectionDef::Kind::kNodeList;
        c.node_list.assign(p.node_list().value().begin(), p.node_list().value().end());
        break;
      case tf::CollectionDef::kBytesList:
        c.kind = CollectionDef::Kind::kBytesList;
        c.bytes_list.assign(p.bytes_list().value().begin(), p.bytes_list().value().end());
        break;
      case tf::CollectionDef::kInt64List:
        c.kind = CollectionDef::Kind::kInt64List;
        c.int64_list.assign(p.int64_list().value().begin(), p.int64_list().value().end());
        break;
      case tf::CollectionDef::kFloatList:
        c.kind = CollectionDef::Kind::kFloatList;
        c.float_list.assign(p.float_list().value().begin(), p.float_list().value().end());
        break;
      default:
        break;
    }
    out.collection_def.emplace(key, std::move(c));
  }
  return out;
}

// --- building the graph -------------------------------------------------------
//
// The nodes TensorFlow's tf.compat.v1.Variable and Saver put in a graph, with
// their names and attrs, so that tf.compat.v1.train.import_meta_graph finds
// every name the VariableDefs and the SaverDef refer to, the returned saver
// restores our checkpoints and the variables' initializers run.

void set_colocation(tf::NodeDef* node, const std::string& with) {
  attr(node, "_class").mutable_list()->add_s("loc:@" + with);
}

void set_shape(tf::TensorShapeProto* proto, const std::vector<int64_t>& dims) {
  for (int64_t d : dims) proto->add_dim()->set_size(d);
}

void add_string_const(tf::GraphDef* graph, const std::string& name,
                      const std::vector<std::string>& values, bool scalar,
                      const std::string& device = {}) {
  tf::NodeDef* node = add_node(graph, name, "Const", {}, device);
  attr(node, "dtype").set_type(tf::DT_STRING);
  tf::TensorProto* t = attr(node, "value").mutable_tensor();
  t->set_dtype(tf::DT_STRING);
  if (!scalar) t->mutable_tensor_shape()->add_dim()->set_size(static_cast<int64_t>(values.size()));
  for (const auto& v : values) t->add_string_val(v);
}

void add_int32_const(tf::GraphDef* graph, const std::string& name, int32_t value,
                     const std::string& device = {}) {
  tf::NodeDef* node = add_node(graph, name, "Const", {}, device);
  attr(node, "dtype").set_type(tf::DT_INT32);
  tf::TensorProto* t = attr(node, "value").mutable_tensor();
  t->set_dtype(tf::DT_INT32);
  t->add_int_val(value);
}

// "<name>" for the first, "<name>_<i>" for later ones (TensorFlow's unique names).
std::string numbered(const std::string& name, size_t i) {
  return i == 0 ? name : name + "_" + std::to_string(i);
}

// VariableV2 "<op>", its initial value, "<op>/Assign" (the initializer) and
// "<op>/read" (the snapshot), as tf.compat.v1.Variable creates them. An
// initial value without an op form (a large Tensor, a variable recreated
// from a VariableDef) is omitted: "<op>/Assign" is then a NoOp, the
// variable's name joins `no_initial_value`, and a warning is logged.
void add_variable_nodes(tf::GraphDef* g, const Variable& v,
                        std::set<std::string>& no_initial_value) {
  const std::string& op = v.op_name();
  const auto dtype = static_cast<tf::DataType>(v.dtype());
  // A dynamic variable's row count follows its keys: a variable of
  // unknown shape, assigned without a shape check (TensorFlow's
  // validate_shape=False).
  const bool dynamic = internal::keyed_storage(v) != nullptr;
  tf::NodeDef* var = add_node(g, op, "VariableV2", {}, v.placement());
  attr(var, "dtype").set_type(dtype);
  if (dynamic) {
    attr(var, "shape").mutable_shape()->set_unknown_rank(true);
  } else {
    set_shape(attr(var, "shape").mutable_shape(), v.shape().dims());
  }
  attr(var, "container").set_s("");
  attr(var, "shared_name").set_s("");

  tf::NodeDef* read = add_node(g, op + "/read", "Identity", {op}, v.placement());
  attr(read, "T").set_type(dtype);
  set_colocation(read, op);

  if (!internal::add_initial_value_nodes(g, v)) {
    logger().warn(
        "export_meta_graph: the initial value of {} has no op form (a tensor over {} bytes, a "
        "callable's value, or none): it is not stored; its initializer is a NoOp, so restore the "
        "variable from a checkpoint after import",
        quoted(op), internal::kMaxInlineInitialValueBytes);
    tf::NodeDef* noop = add_node(g, op + "/Assign", "NoOp", {}, v.placement());
    set_colocation(noop, op);
    no_initial_value.insert(v.name());
    return;
  }
  tf::NodeDef* assign =
      add_node(g, op + "/Assign", "Assign", {op, op + "/initial_value"}, v.placement());
  attr(assign, "T").set_type(dtype);
  attr(assign, "use_locking").set_b(true);
  attr(assign, "validate_shape").set_b(!dynamic);
  set_colocation(assign, op);
}

std::string shape_and_slice_of(const Saver::Item& item) {
  if (!item.slice) return {};
  std::vector<TensorSlice::Extent> extents;
  for (size_t d = 0; d < item.slice->var_offset.size(); ++d) {
    extents.push_back({item.slice->var_offset[d], item.slice->var_shape[d]});
  }
  return shape_and_slice_string(item.slice->full_shape, TensorSlice(std::move(extents)));
}

// The save op of one shard: SaveV2 (or SaveSlices for V1) of `items` to the
// file named by `filename`, and "<scope>/control_dependency[_i]" passing the
// filename on once it has run. Returns that node's name.
std::string add_save_shard(tf::GraphDef* g, const std::string& scope, const SaverDef& def,
                           const std::vector<const Saver::Item*>& items,
                           const std::string& filename, size_t shard, const std::string& device) {
  const bool v1 = def.version == CheckpointFormatVersion::kV1;
  const std::string save = numbered(scope + (v1 ? "/SaveSlices" : "/SaveV2"), shard);
  std::vector<std::string> names, slices;
  for (const Saver::Item* item : items) {
    names.push_back(item->key);
    slices.push_back(shape_and_slice_of(*item));
  }
  add_string_const(g, save + "/tensor_names", names, false, device);
  add_string_const(g, save + (v1 ? "/shapes_and_slices" : "/shape_and_slices"), slices, false,
                   device);
  tf::NodeDef* node = add_node(
      g, save, v1 ? "SaveSlices" : "SaveV2",
      {filename, save + "/tensor_names", save + (v1 ? "/shapes_and_slices" : "/shape_and_slices")},
      device);
  auto* types = attr(node, v1 ? "T" : "dtypes").mutable_list();
  for (const Saver::Item* item : items) {
    node->add_input(item->variable.op_name());
    types->add_type(static_cast<tf::DataType>(item->variable.dtype()));
  }
  const std::string dep = numbered(scope + "/control_dependency", shard);
  tf::NodeDef* id = add_node(g, dep, "Identity", {filename, "^" + save}, device);
  attr(id, "T").set_type(tf::DT_STRING);
  set_colocation(id, filename);
  return dep;
}

// RestoreV2 of `items` (any format) and one Assign per variable; returns the
// Assign nodes' names. `next_assign` numbers the Assigns across shards.
std::vector<std::string> add_restore_shard(tf::GraphDef* g, const std::string& scope,
                                           const std::vector<const Saver::Item*>& items,
                                           size_t shard, size_t& next_assign) {
  const std::string restore = numbered(scope + "/RestoreV2", shard);
  std::vector<std::string> names, slices;
  for (const Saver::Item* item : items) {
    names.push_back(item->key);
    slices.push_back(shape_and_slice_of(*item));
  }
  const std::string cpu = "/device:CPU:0";
  add_string_const(g, restore + "/tensor_names", names, false, cpu);
  add_string_const(g, restore + "/shape_and_slices", slices, false, cpu);
  tf::NodeDef* node =
      add_node(g, restore, "RestoreV2",
               {scope + "/Const", restore + "/tensor_names", restore + "/shape_and_slices"}, cpu);
  auto* types = attr(node, "dtypes").mutable_list();
  std::vector<std::string> assigns;
  for (size_t i = 0; i < items.size(); ++i) {
    const Variable& v = items[i]->variable;
    types->add_type(static_cast<tf::DataType>(v.dtype()));
    const std::string name = numbered(scope + "/Assign", next_assign++);
    tf::NodeDef* assign = add_node(
        g, name, "Assign", {v.op_name(), i == 0 ? restore : restore + ":" + std::to_string(i)},
        v.placement());
    attr(assign, "T").set_type(static_cast<tf::DataType>(v.dtype()));
    attr(assign, "use_locking").set_b(true);
    attr(assign, "validate_shape").set_b(true);
    set_colocation(assign, v.op_name());
    assigns.push_back(name);
  }
  return assigns;
}

// The saver's subgraph under `scope` (from def.filename_tensor_name):
// "<scope>/Const" (the filename to feed), the save ops ending in
// def.save_tensor_name and the restore ops under def.restore_op_name.
void add_saver_nodes(tf::GraphDef* g, const SaverDef& def,
                     const std::vector<Saver::Item>& saver_items) {
  // Dynamic variables' keys and rows are left out: TensorFlow's
  // RestoreV2 + Assign cannot rebuild a hash-keyed table (varstate's Saver
  // restores them; TensorFlow reads their tensors as plain ones).
  std::vector<Saver::Item> items;
  for (const Saver::Item& item : saver_items) {
    if (item.part == Saver::Part::kValue) items.push_back(item);
  }
  const std::string filename = strip_output(def.filename_tensor_name);
  const std::string scope = filename.substr(0, filename.rfind('/'));
  add_string_const(g, filename, {"model"}, /*scalar=*/true);
  if (!def.sharded) {
    std::vector<const Saver::Item*> all;
    for (const Saver::Item& item : items) all.push_back(&item);
    add_save_shard(g, scope, def, all, filename, 0, "");
    size_t next_assign = 0;
    std::vector<std::string> assigns = add_restore_shard(g, scope, all, 0, next_assign);
    tf::NodeDef* restore_all = add_node(g, def.restore_op_name, "NoOp");
    for (const std::string& a : assigns) restore_all->add_input("^" + a);
    return;
  }
  // Sharded: one save per device (in the Saver's order of device names) to
  // "<filename>_temp/part-0000i-of-0000n", merged (V2) into the checkpoint.
  std::map<std::string, std::vector<const Saver::Item*>> by_device;
  for (const Saver::Item& item : items) by_device[item.variable.placement()].push_back(&item);
  const bool v1 = def.version == CheckpointFormatVersion::kV1;
  std::string base = filename;
  if (!v1) {
    add_string_const(g, scope + "/StringJoin/inputs_1", {"_temp/part"}, true);
    tf::NodeDef* join = add_node(g, scope + "/StringJoin", "StringJoin",
                                 {filename, scope + "/StringJoin/inputs_1"});
    attr(join, "N").set_i(2);
    attr(join, "separator").set_s("");
    base = scope + "/StringJoin";
  }
  add_int32_const(g, scope + "/num_shards", static_cast<int32_t>(by_device.size()));
  std::vector<std::string> deps, restore_shards;
  size_t shard = 0, next_assign = 0;
  for (const auto& [device, shard_items] : by_device) {
    const std::string sharded = numbered(scope + "/ShardedFilename", shard);
    add_int32_const(g, sharded + "/shard", static_cast<int32_t>(shard), device);
    add_node(g, sharded, "ShardedFilename", {base, sharded + "/shard", scope + "/num_shards"},
             device);
    deps.push_back(add_save_shard(g, scope, def, shard_items, sharded, shard, device));
    std::vector<std::string> assigns = add_restore_shard(g, scope, shard_items, shard, next_assign);
    const std::string restore_shard = numbered(scope + "/restore_shard", shard);
    tf::NodeDef* noop = add_node(g, restore_shard, "NoOp", {}, device);
    for (const std::string& a : assigns) noop->add_input("^" + a);
    restore_shards.push_back(restore_shard);
    ++shard;
  }
  const std::string save_tensor = strip_output(def.save_tensor_name);
  if (v1) {
    tf::NodeDef* spec = add_node(g, scope + "/ShardedFilespec", "ShardedFilespec",
                                 {filename, scope + "/num_shards"});
    for (const std::string& d : deps) spec->add_input("^" + d);
    tf::NodeDef* id = add_node(g, save_tensor, "Identity", {scope + "/ShardedFilespec"});
    attr(id, "T").set_type(tf::DT_STRING);
  } else {
    const std::string prefixes = scope + "/MergeV2Checkpoints/checkpoint_prefixes";
    tf::NodeDef* pack = add_node(g, prefixes, "Pack", deps);
    attr(pack, "N").set_i(static_cast<int64_t>(deps.size()));
    attr(pack, "T").set_type(tf::DT_STRING);
    attr(pack, "axis").set_i(0);
    tf::NodeDef* merge =
        add_node(g, scope + "/MergeV2Checkpoints", "MergeV2Checkpoints", {prefixes, filename});
    attr(merge, "delete_old_dirs").set_b(true);
    tf::NodeDef* id =
        add_node(g, save_tensor, "Identity", {filename, "^" + scope + "/MergeV2Checkpoints"});
    attr(id, "T").set_type(tf::DT_STRING);
  }
  tf::NodeDef* restore_all = add_node(g, def.restore_op_name, "NoOp");
  for (const std::string& r : restore_shards) restore_all->add_input("^" + r);
}

void build_graph_def(Graph& graph, const SaverDef* saver_def, const std::vector<Saver::Item>* items,
                     std::set<std::string>& no_initial_value, tf::GraphDef* g) {
  g->mutable_versions()->set_producer(1);
  for (const Variable& v : graph.variables()) add_variable_nodes(g, v, no_initial_value);
  if (saver_def && items && !items->empty()) add_saver_nodes(g, *saver_def, *items);
}

// The node name each Op item of `collections` is exported under: written
// into `g` when `g` is given and the Op can be written; else its name, made
// unique among g's nodes (it then cannot run after import, which is logged
// when `g` is given).
std::map<const void*, std::string> export_ops(
    tf::GraphDef* g, const Graph& graph,
    const std::vector<std::pair<std::string, std::vector<std::any>>>& collections) {
  std::map<const void*, std::string> names;
  std::optional<OpNodeWriter> writer;
  if (g) writer.emplace(g, graph);
  for (const auto& [key, items] : collections) {
    for (const std::any& item : items) {
      if (item.type() != typeid(Op)) continue;
      const Op& op = std::any_cast<const Op&>(item);
      std::string why;
      std::optional<std::string> name = writer ? writer->add(op, &why) : std::nullopt;
      if (!name && writer) {  // (a graph_def the caller gives is taken as it is)
        logger().warn(
            "export_meta_graph: Op {} of collection {} is exported by name only and cannot run "
            "after import_meta_graph: {}",
            quoted(op.name()), quoted(key), why);
      }
      // A name-only Op takes a name no node has, so that import cannot
      // mistake another node (e.g. the initializer "v/Assign") for it.
      if (!name) name = writer ? writer->unused_name(op.name()) : op.name();
      names.emplace(&item, *name);
    }
  }
  return names;
}

// The collection `key` as a CollectionDef, or nullopt when it is empty or
// holds nothing representable.
std::optional<CollectionDef> export_collection(const std::string& key,
                                               const std::vector<std::any>& items,
                                               const std::map<const void*, std::string>& op_names,
                                               const std::set<std::string>& no_initial_value) {
  CollectionDef c;
  for (const std::any& item : items) {
    CollectionDef::Kind kind = CollectionDef::Kind::kNone;
    if (item.type() == typeid(Variable)) {
      kind = CollectionDef::Kind::kBytesList;
    } else if (item.type() == typeid(std::string) || item.type() == typeid(Op) ||
               item.type() == typeid(const char*)) {
      kind = CollectionDef::Kind::kNodeList;
    } else if (item.type() == typeid(int64_t) || item.type() == typeid(int) ||
               item.type() == typeid(int32_t)) {
      kind = CollectionDef::Kind::kInt64List;
    } else if (item.type() == typeid(float) || item.type() == typeid(double)) {
      kind = CollectionDef::Kind::kFloatList;
    }
    if (kind == CollectionDef::Kind::kNone ||
        (c.kind != CollectionDef::Kind::kNone && kind != c.kind)) {
      logger().warn(
          "export_meta_graph: skipping an item of collection {} that cannot be serialized "
          "alongside its other items (type {})",
          quoted(key), item.type().name());
      continue;
    }
    c.kind = kind;
    if (item.type() == typeid(Variable)) {
      VariableDef def = std::any_cast<const Variable&>(item).to_proto();
      if (no_initial_value.count(def.variable_name)) def.initial_value_name.clear();
      c.bytes_list.push_back(def.serialize());
    } else if (item.type() == typeid(std::string)) {
      c.node_list.push_back(std::any_cast<const std::string&>(item));
    } else if (item.type() == typeid(const char*)) {
      c.node_list.emplace_back(std::any_cast<const char*>(item));
    } else if (item.type() == typeid(Op)) {
      c.node_list.push_back(op_names.at(&item));
    } else if (item.type() == typeid(int64_t)) {
      c.int64_list.push_back(std::any_cast<int64_t>(item));
    } else if (item.type() == typeid(int)) {
      c.int64_list.push_back(std::any_cast<int>(item));
    } else if (item.type() == typeid(float)) {
      c.float_list.push_back(std::any_cast<float>(item));
    } else {
      c.float_list.push_back(static_cast<float>(std::any_cast<double>(item)));
    }
  }
  if (c.kind == CollectionDef::Kind::kNone) return std::nullopt;
  return c;
}

// meta.serialize() for a graph_def this file serialized itself
// (deterministically, from a GraphDef): its bytes go in as they are, where
// serialize() parses them and serializes them again (about 40 % of the
// export of a graph of thousands of ops). Deterministic serialization writes
// a message's fields in the order of their numbers, so field 1
// (meta_info_def), then field 2 (graph_def: tag, length, bytes), then the
// fields after it is the message's own serialization, byte for byte.
std::string serialize_with_built_graph_def(const MetaGraphDef& meta) {
  tf::MetaGraphDef head, tail;
  to_proto(meta, &tail, /*with_graph_def=*/false);
  if (tail.has_meta_info_def()) {
    head.mutable_meta_info_def()->Swap(tail.mutable_meta_info_def());
    tail.clear_meta_info_def();
  }
  std::string out = deterministic_bytes(head);
  if (!meta.graph_def.empty()) {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
        tf::MetaGraphDef::kGraphDefFieldNumber,
        google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
    coded.WriteVarint32(static_cast<uint32_t>(meta.graph_def.size()));
    coded.WriteRaw(meta.graph_def.data(), static_cast<int>(meta.graph_def.size()));
  }
  return out + deterministic_bytes(tail);
}

// graph_def_built: meta.graph_def is deterministic_bytes of a GraphDef
// built here (else it came from the caller and is checked by parsing).
void write_meta_graph(FileSystem& fs, const std::string& filename, const MetaGraphDef& meta,
                      bool as_text, bool graph_def_built) {
  try {
    write_file_atomically(fs, filename,
                          as_text           ? meta.to_text()
                          : graph_def_built ? serialize_with_built_graph_def(meta)
                                            : meta.serialize());
  } catch (...) {
    rethrow_with_context("writing meta graph " + quoted(filename));
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// MetaGraphDef

std::string MetaGraphDef::serialize() const {
  tf::MetaGraphDef p;
  to_proto(*this, &p);
  return deterministic_bytes(p);
}

std::string MetaGraphDef::to_text() const {
  tf::MetaGraphDef p;
  to_proto(*this, &p);
  std::string text;
  google::protobuf::TextFormat::PrintToString(p, &text);
  return text;
}

MetaGraphDef MetaGraphDef::parse(const std::string& bytes, const std::string& what) {
  tf::MetaGraphDef p;
  if (!p.ParseFromString(bytes)) throw DataLossError(what + ": not a binary MetaGraphDef");
  return from_proto(p);
}

MetaGraphDef MetaGraphDef::parse_text(const std::string& text, const std::string& what) {
  tf::MetaGraphDef p;
  if (!google::protobuf::TextFormat::ParseFromString(text, &p)) {
    throw DataLossError(what + ": not a text-format MetaGraphDef");
  }
  return from_proto(p);
}

std::vector<GraphNode> MetaGraphDef::nodes() const {
  tf::GraphDef g;
  if (!g.ParseFromString(graph_def)) throw DataLossError("MetaGraphDef: graph_def does not parse");
  std::vector<GraphNode> out;
  for (const tf::NodeDef& n : g.node()) {
    GraphNode node{n.name(),   n.op(),       {n.input().begin(), n.input().end()},
                   n.device(), std::nullopt, std::nullopt};
    if (auto it = n.attr().find("dtype");
        it != n.attr().end() && it->second.value_case() == tf::AttrValue::kType) {
      int t = it->second.type();
      if (t >= 100) t -= 100;  // a reference type
      if (dtype_is_valid(t)) node.dtype = static_cast<DType>(t);
    }
    if (auto it = n.attr().find("shape");
        it != n.attr().end() && it->second.value_case() == tf::AttrValue::kShape) {
      const tf::TensorShapeProto& s = it->second.shape();
      std::vector<int64_t> dims;
      bool known = !s.unknown_rank();
      for (const auto& d : s.dim()) {
        if (d.size() < 0) known = false;
        dims.push_back(d.size());
      }
      if (known) node.shape = std::move(dims);
    }
    out.push_back(std::move(node));
  }
  return out;
}

// ---------------------------------------------------------------------------
// Export

MetaGraphDef export_meta_graph_for_items(const ExportMetaGraphOptions& options,
                                         const std::vector<Saver::Item>& items) {
  Graph& graph = options.graph ? *options.graph : get_default_graph();
  MetaGraphDef meta;
  meta.meta_info_def = options.meta_info_def ? *options.meta_info_def : MetaInfoDef{};
  meta.saver_def = options.saver_def;
  std::vector<std::pair<std::string, std::vector<std::any>>> collections;
  for (const std::string& key :
       options.collection_list ? *options.collection_list : graph.collection_keys()) {
    collections.emplace_back(key, graph.get_collection(key));
  }
  std::map<const void*, std::string> op_names;
  std::set<std::string> no_initial_value;
  if (options.graph_def) {
    meta.graph_def = *options.graph_def;
    op_names = export_ops(nullptr, graph, collections);
  } else {
    // Its nodes on an arena: a graph of thousands of variables is as many
    // small messages, and their allocations and frees cost as much as
    // building them.
    google::protobuf::Arena arena;
    tf::GraphDef* g = google::protobuf::Arena::CreateMessage<tf::GraphDef>(&arena);
    build_graph_def(graph, options.saver_def ? &*options.saver_def : nullptr, &items,
                    no_initial_value, g);
    op_names = export_ops(g, graph, collections);
    meta.graph_def = deterministic_bytes(*g);
  }
  for (const auto& [key, items] : collections) {
    if (auto c = export_collection(key, items, op_names, no_initial_value))
      meta.collection_def.emplace(key, std::move(*c));
  }
  if (!options.filename.empty()) {
    FileSystem& fs = options.file_system ? *options.file_system : *default_file_system();
    write_meta_graph(fs, options.filename, meta, options.as_text,
                     /*graph_def_built=*/!options.graph_def);
  }
  return meta;
}

MetaGraphDef export_meta_graph(const ExportMetaGraphOptions& options) {
  if (options.saver == nullptr) return export_meta_graph_for_items(options, {});
  ExportMetaGraphOptions with_saver = options;
  if (!with_saver.saver_def) with_saver.saver_def = options.saver->as_saver_def();
  return export_meta_graph_for_items(with_saver, options.saver->items());
}

// ---------------------------------------------------------------------------
// Import

namespace {

struct ImportedSaveNode {
  std::vector<std::string> keys;
  std::vector<std::string> variables;  // op names
};

const GraphNode* find_node(const std::map<std::string, const GraphNode*>& nodes,
                           const std::string& name) {
  auto it = nodes.find(name);
  return it == nodes.end() ? nullptr : it->second;
}

// The string values of a Const node, read from the serialized graph.
std::vector<std::string> const_strings(const tf::GraphDef& g, const std::string& name) {
  for (const tf::NodeDef& n : g.node()) {
    if (n.name() != name) continue;
    auto it = n.attr().find("value");
    if (it == n.attr().end() || it->second.value_case() != tf::AttrValue::kTensor) return {};
    const auto& vals = it->second.tensor().string_val();
    return {vals.begin(), vals.end()};
  }
  return {};
}

// The keys and variables of the save nodes (SaveV2, SaveSlices, Save) in
// the saver's name scope.
std::optional<ImportedSaveNode> find_save_nodes(const std::string& graph_def,
                                                const std::string& scope, const Graph& graph) {
  tf::GraphDef g;
  if (!g.ParseFromString(graph_def)) return std::nullopt;
  ImportedSaveNode out;
  bool found = false;
  std::map<std::string, const tf::NodeDef*> by_name;
  for (const tf::NodeDef& n : g.node()) by_name.emplace(n.name(), &n);
  for (const tf::NodeDef& n : g.node()) {
    const bool v2 = n.op() == "SaveV2" || n.op() == "SaveSlices";
    if (!v2 && n.op() != "Save") continue;
    if (n.name().rfind(scope + "/", 0) != 0 || n.input_size() < 2) continue;
    const int first_data = v2 ? 3 : 2;
    std::vector<std::string> names = const_strings(g, input_node(n.input(1)));
    if (static_cast<int>(names.size()) != n.input_size() - first_data) continue;
    for (int i = first_data; i < n.input_size(); ++i) {
      std::string var = input_node(n.input(i));
      // A resource variable is saved through reads (ReadVariableOp, then
      // Identity in the saver's scope): follow them back to the variable.
      for (int hop = 0; hop < 8 && !graph.find_variable(var); ++hop) {
        auto it = by_name.find(var);
        if (it == by_name.end() || it->second->input_size() < 1) break;
        const std::string& op = it->second->op();
        if (op != "Identity" && op != "ReadVariableOp" && op != "Snapshot") break;
        var = input_node(it->second->input(0));
      }
      if (!graph.find_variable(var)) {
        for (const char* suffix : {"/read", "/Read/ReadVariableOp"}) {
          std::string s(suffix);
          if (var.size() > s.size() && var.compare(var.size() - s.size(), s.size(), s) == 0) {
            var.erase(var.size() - s.size());
            break;
          }
        }
      }
      out.keys.push_back(names[static_cast<size_t>(i - first_data)]);
      out.variables.push_back(var);
    }
    found = true;
  }
  if (!found) return std::nullopt;
  return out;
}

// A variable of a variable collection of the MetaGraphDef, with its node.
struct PendingVariable {
  std::string collection;
  VariableDef def;
  const GraphNode* node;
};

// Validates that every variable of every variable collection has a usable
// node (or already exists in `graph`).
std::vector<PendingVariable> collect_variables(const MetaGraphDef& meta_graph,
                                               const std::map<std::string, const GraphNode*>& nodes,
                                               const Graph& graph) {
  std::set<std::string> trainable;
  if (auto it = meta_graph.collection_def.find(GraphKeys::TRAINABLE_VARIABLES);
      it != meta_graph.collection_def.end()) {
    for (const std::string& bytes : it->second.bytes_list)
      trainable.insert(VariableDef::parse(bytes).variable_name);
  }
  std::vector<PendingVariable> pending;
  for (const auto& [key, c] : meta_graph.collection_def) {
    if (!variable_collections().count(key) || c.kind != CollectionDef::Kind::kBytesList) continue;
    for (const std::string& bytes : c.bytes_list) {
      VariableDef def = VariableDef::parse(bytes);
      const std::string op = strip_output(def.variable_name);
      const GraphNode* node = find_node(nodes, op);
      if (!graph.find_variable(op) && (!node || !node->dtype || !node->shape)) {
        throw InvalidArgumentError("import_meta_graph: variable " + quoted(op) + " of collection " +
                                   quoted(key) +
                                   (node ? " has a graph node without a known dtype and shape"
                                         : " has no node in the graph_def"));
      }
      if (trainable.count(def.variable_name)) def.trainable = true;
      pending.push_back({key, std::move(def), node});
    }
  }
  return pending;
}

// Recreates the variables (or takes the graph's existing ones), by op name.
// A recreated variable's initializer, from its initial value's nodes when
// they are a form varstate knows (meta_graph_initializers_internal.h).
void import_initializer(const internal::NodeIndex& nodes, const VariableDef& def, Variable& v) {
  if (def.initial_value_name.empty()) return;
  try {
    if (!internal::import_initial_value(nodes, def.initial_value_name, v)) {
      logger().info(
          "import_meta_graph: the initial value {} of {} is not a known form; the "
          "variable has no initializer",
          quoted(def.initial_value_name), quoted(v.op_name()));
    }
  } catch (const Error& e) {
    logger().warn(
        "import_meta_graph: the initial value {} of {} cannot be read ({}); the "
        "variable has no initializer",
        quoted(def.initial_value_name), quoted(v.op_name()), e.what());
  }
}

std::map<std::string, Variable> recreate_variables(const std::vector<PendingVariable>& pending,
                                                   const tf::GraphDef& graph_def, Graph& graph,
                                                   bool clear_devices) {
  std::map<std::string, Variable> created;
  const internal::NodeIndex nodes = internal::index_nodes(graph_def);
  for (const PendingVariable& p : pending) {
    const std::string op = strip_output(p.def.variable_name);
    if (created.count(op)) continue;
    if (auto existing = graph.find_variable(op)) {
      created.emplace(op, *existing);
      continue;
    }
    VariableOptions vo;
    vo.collections = std::vector<std::string>{};
    vo.dtype = *p.node->dtype;
    vo.expected_shape = TensorShape(*p.node->shape);
    vo.variable_def = p.def;
    vo.graph = &graph;
    std::optional<DeviceScope> scope;
    if (!clear_devices && !p.node->device.empty()) scope.emplace(p.node->device);
    Variable v(vo);
    import_initializer(nodes, p.def, v);
    created.emplace(op, v);
  }
  return created;
}

// Adds the MetaGraphDef's collections to `graph`; variable collections name
// the `created` variables.
void restore_collections(const MetaGraphDef& meta_graph, const tf::GraphDef& graph_def,
                         const std::map<std::string, Variable>& created, Graph& graph) {
  OpNodeReader reader(graph_def, graph);
  for (const auto& [key, c] : meta_graph.collection_def) {
    std::vector<std::any> existing = graph.get_collection(key);
    auto contains_variable = [&](const Variable& v) {
      for (const std::any& a : existing) {
        if (a.type() == typeid(Variable) && std::any_cast<const Variable&>(a).same_as(v))
          return true;
      }
      return false;
    };
    if (variable_collections().count(key) && c.kind == CollectionDef::Kind::kBytesList) {
      for (const std::string& bytes : c.bytes_list) {
        const Variable& v = created.at(strip_output(VariableDef::parse(bytes).variable_name));
        if (!contains_variable(v)) graph.add_to_collection(key, v);
      }
      continue;
    }
    switch (c.kind) {
      case CollectionDef::Kind::kNodeList:
        for (const auto& name : c.node_list) {
          // A node varstate can run becomes an Op; any other stays a name.
          std::string why;
          if (std::optional<Op> op = reader.build(strip_output(name), &why)) {
            graph.add_to_collection(key, *op);
          } else {
            if (!why.empty()) {  // (empty: the name is no node at all)
              logger().warn("import_meta_graph: item {} of collection {} stays a name: {}",
                            quoted(name), quoted(key), why);
            }
            graph.add_to_collection(key, name);
          }
        }
        break;
      case CollectionDef::Kind::kBytesList:
        for (const auto& v : c.bytes_list) graph.add_to_collection(key, v);
        break;
      case CollectionDef::Kind::kInt64List:
        for (int64_t v : c.int64_list) graph.add_to_collection(key, v);
        break;
      case CollectionDef::Kind::kFloatList:
        for (float v : c.float_list) graph.add_to_collection(key, v);
        break;
      case CollectionDef::Kind::kNone:
        break;
    }
  }
}

// The saver: over the variables its save node names, else the global ones.
std::optional<Saver> make_imported_saver(const MetaGraphDef& meta_graph,
                                         const std::map<std::string, Variable>& created,
                                         Graph& graph, FileSystem* file_system) {
  SaverOptions so;
  so.graph = &graph;
  so.file_system = file_system;
  if (meta_graph.saver_def) so.saver_def = meta_graph.saver_def;
  std::string scope = "save";
  if (meta_graph.saver_def && !meta_graph.saver_def->filename_tensor_name.empty()) {
    scope = strip_output(meta_graph.saver_def->filename_tensor_name);
    scope = scope.substr(0, scope.rfind('/'));
  }
  std::optional<ImportedSaveNode> save = find_save_nodes(meta_graph.graph_def, scope, graph);
  if (!save) {
    std::vector<Variable> list;
    for (const Variable& v : graph.get_collection_variables(GraphKeys::GLOBAL_VARIABLES)) {
      if (created.count(v.op_name())) list.push_back(v);
    }
    if (list.empty()) return std::nullopt;
    so.var_list = std::move(list);
    return Saver(std::move(so));
  }
  std::vector<Variable> list;
  std::map<std::string, Variable> by_key;
  bool keys_are_names = true;
  for (size_t i = 0; i < save->keys.size(); ++i) {
    std::optional<Variable> v = graph.find_variable(save->variables[i]);
    if (!v) {
      throw InvalidArgumentError("import_meta_graph: the save node names " +
                                 quoted(save->variables[i]) + " (key " + quoted(save->keys[i]) +
                                 "), which is not a variable of the graph");
    }
    const auto& slice = v->save_slice_info();
    if (save->keys[i] != (slice ? slice->full_name : v->op_name())) keys_are_names = false;
    list.push_back(*v);
    by_key.emplace(save->keys[i], *v);
  }
  if (keys_are_names) {
    so.var_list = std::move(list);
  } else {
    so.var_list = std::move(by_key);
  }
  return Saver(std::move(so));
}

}  // namespace

std::optional<Saver> import_meta_graph(const MetaGraphDef& meta_graph,
                                       const ImportMetaGraphOptions& options) {
  Graph& graph = options.graph ? *options.graph : get_default_graph();
  const std::vector<GraphNode> node_list =
      meta_graph.graph_def.empty() ? std::vector<GraphNode>{} : meta_graph.nodes();
  std::map<std::string, const GraphNode*> nodes;
  for (const GraphNode& n : node_list) nodes[n.name] = &n;

  // Validate everything, then recreate the variables, then the collections.
  const std::vector<PendingVariable> pending = collect_variables(meta_graph, nodes, graph);
  tf::GraphDef graph_def;
  if (!meta_graph.graph_def.empty()) graph_def.ParseFromString(meta_graph.graph_def);
  const std::map<std::string, Variable> created =
      recreate_variables(pending, graph_def, graph, options.clear_devices);
  restore_collections(meta_graph, graph_def, created, graph);

  if (created.empty()) return std::nullopt;
  return make_imported_saver(meta_graph, created, graph, options.file_system);
}

std::optional<Saver> import_meta_graph(const std::string& filename,
                                       const ImportMetaGraphOptions& options) {
  FileSystem& fs = options.file_system ? *options.file_system : *default_file_system();
  const std::string contents = read_file_to_string(fs, filename);
  // TensorFlow's order: binary first, then text. Text bytes can parse as a
  // (meaningless) binary message, so an empty binary result falls back too.
  std::optional<MetaGraphDef> meta;
  try {
    meta = MetaGraphDef::parse(contents, quoted(filename));
  } catch (const DataLossError&) {
  }
  if (!meta || (meta->graph_def.empty() && !meta->saver_def && meta->collection_def.empty())) {
    try {
      meta = MetaGraphDef::parse_text(contents, quoted(filename));
    } catch (const DataLossError&) {
      if (!meta) {
        throw DataLossError("meta graph file " + quoted(filename) +
                            " is neither a binary nor a text-format MetaGraphDef");
      }
    }
  }
  return import_meta_graph(*meta, options);
}

}  // namespace varstate
