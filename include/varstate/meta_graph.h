// Meta graphs: a program's variables, collections and saver in one file
// (tf.train.export_meta_graph / tf.train.import_meta_graph).
//
// A MetaGraphDef (TensorFlow's meta_graph.proto, same field numbers, binary
// or text format) records each variable with the nodes tf.compat.v1.Variable
// creates: "w" (VariableV2 with its dtype, shape and device),
// "w/initial_value" (the initializer's recipe as the ops TensorFlow's graph
// holds, not its value: RandomUniform / RandomUniformInt /
// RandomStandardNormal / TruncatedNormal of the full variable's shape with
// the resolved seed/seed2 attrs, a Slice for a partition, then the Mul/Add
// (and Sub) scale and shift; Fill for zeros, ones and scalar constants; a
// Const for a Tensor, a constant list or a custom initializer's value of at
// most 64 KiB), "w/Assign" (the initializer) and "w/read". A value without
// such a form (a larger Tensor or callable value, a variable recreated from
// a VariableDef) is not stored: "w/Assign" is a NoOp, the VariableDef has
// no initial_value_name and a warning is logged; restore such a variable
// from a checkpoint. TensorFlow running the imported initializers gets
// varstate's values (uniform bit for bit, normals within the ulps of the
// random interop tests). import_meta_graph rebuilds these forms (and
// TensorFlow's own initializer graphs) into initializer recipes, so a
// round trip keeps initializers working; the collections (variable collections as
// serialized VariableDefs in bytes_list, as TensorFlow stores them; names in
// node_list; integers and floats in int64_list / float_list); the SaverDef
// and the saver's nodes as tf.compat.v1.train.Saver builds them ("save/Const"
// filename, SaveV2 -- SaveSlices for V1 -- per shard, "save/control_
// dependency" or, sharded, MergeV2Checkpoints + "save/Identity"; RestoreV2 +
// one Assign per variable under "save/restore_all"). TensorFlow's
// import_meta_graph loads such a file: its saver restores our checkpoints
// and the initializers run. A fresh program recreates the variables
// (uninitialized) and the saver from a meta graph (ours or TensorFlow's,
// ref or resource variables), then restores a checkpoint:
//
//   std::optional<Saver> saver = import_meta_graph("ckpt/my-model-1000.meta");
//   saver->restore(sess, "ckpt/my-model-1000");
//   Variable w = *get_default_graph().find_variable("layer/w");
//
// Update Ops in collections (a "train_op" built with varstate/state_ops.h
// over Tensors, Variables and Placeholders, PartitionedVariables included)
// are written as the TensorFlow nodes they stand for, so TensorFlow runs
// them after its import; import_meta_graph turns each collection item naming
// a node it can run (ours, or TensorFlow's ref/resource update nodes) back
// into an Op, fed through Session::run(op, feeds):
//
//   Op train_op = std::any_cast<Op>(get_default_graph().get_collection("train_op")[0]);
//   sess.run(train_op, {{"ids", batch_ids}, {"grads", batch_grads}});
//
// Restarting from a meta graph only works if the device assignments have
// not changed (or with clear_devices).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "varstate/dtype.h"
#include "varstate/graph.h"
#include "varstate/saver.h"

namespace varstate {

class FileSystem;

// TensorFlow's MetaGraphDef.MetaInfoDef (the fields modelled here).
struct MetaInfoDef {
  std::string meta_graph_version;
  std::vector<std::string> tags;
  std::string tensorflow_version;
  std::string tensorflow_git_version;
  bool stripped_default_attrs = false;
};

// TensorFlow's CollectionDef: one of four kinds of list.
struct CollectionDef {
  enum class Kind {
    kNone,
    kNodeList,
    kBytesList,
    kInt64List,
    kFloatList
  };
  Kind kind = Kind::kNone;
  std::vector<std::string> node_list;
  std::vector<std::string> bytes_list;
  std::vector<int64_t> int64_list;
  std::vector<float> float_list;
};

// One node of a meta graph's GraphDef, as far as varstate reads it.
struct GraphNode {
  std::string name;
  std::string op;
  std::vector<std::string> input;
  std::string device;
  std::optional<DType> dtype;                 // attr "dtype"
  std::optional<std::vector<int64_t>> shape;  // attr "shape" (fully known dims)
};

struct MetaGraphDef {
  std::optional<MetaInfoDef> meta_info_def;
  // The GraphDef, serialized (kept whole, so foreign graphs survive a
  // round trip); see nodes().
  std::string graph_def;
  std::optional<SaverDef> saver_def;
  std::map<std::string, CollectionDef> collection_def;

  // The graph's nodes. Throws DataLossError when graph_def does not parse.
  std::vector<GraphNode> nodes() const;

  // Protobuf binary and text formats. parse()/parse_text() throw
  // DataLossError naming `what` when the input is not a MetaGraphDef.
  std::string serialize() const;
  std::string to_text() const;
  static MetaGraphDef parse(const std::string& bytes, const std::string& what = "meta graph");
  static MetaGraphDef parse_text(const std::string& text, const std::string& what = "meta graph");
};

struct ExportMetaGraphOptions {
  // Where to write it ("" = only return it).
  std::string filename;
  std::optional<MetaInfoDef> meta_info_def;
  // A serialized GraphDef to use instead of the one built from the graph's
  // variables.
  std::optional<std::string> graph_def;
  std::optional<SaverDef> saver_def;
  // A saver whose save node (each variable's checkpoint key and slice) to
  // record, so import_meta_graph rebuilds the same saver; its SaverDef is
  // used when saver_def is not given.
  const Saver* saver = nullptr;
  // Collections to export; nullopt = all. Items that cannot be represented
  // are skipped with a logged warning, as TensorFlow does; an Op the graph
  // cannot hold (made from a function, reading a callable) is exported by
  // name only, with a logged warning.
  std::optional<std::vector<std::string>> collection_list;
  bool as_text = false;
  Graph* graph = nullptr;             // default: the thread's default graph
  FileSystem* file_system = nullptr;  // default: default_file_system()
};

// Builds the graph's MetaGraphDef and writes it (atomically) when a filename
// is given. Throws the file layer's errors.
MetaGraphDef export_meta_graph(const ExportMetaGraphOptions& options = {});

struct ImportMetaGraphOptions {
  // Drop the devices recorded for the variables (place them by the current
  // device scopes instead).
  bool clear_devices = false;
  Graph* graph = nullptr;             // default: the thread's default graph
  FileSystem* file_system = nullptr;  // default: default_file_system()
};

// Recreates the meta graph's variables (uninitialized; with their names,
// dtypes, shapes, trainable flags and devices) and collections in the graph
// (node names of runnable update nodes become Ops, placeholders they read
// are registered in the graph),
// and returns a Saver built from its SaverDef over the variables its save
// node names -- or nullopt when the meta graph has no variables. A variable
// already in the graph under the same name is reused. Throws
// InvalidArgumentError naming the variable when its node is missing or has
// no dtype/shape, and ValueError as Saver's constructor.
std::optional<Saver> import_meta_graph(const MetaGraphDef& meta_graph,
                                       const ImportMetaGraphOptions& options = {});
// The same from a file, binary or text format. Throws NotFoundError for a
// missing file, DataLossError naming the file when it parses as neither.
std::optional<Saver> import_meta_graph(const std::string& filename,
                                       const ImportMetaGraphOptions& options = {});

}  // namespace varstate
