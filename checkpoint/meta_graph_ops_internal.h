// Update Ops as GraphDef nodes: export_meta_graph writes the Ops of its
// collections as the TensorFlow nodes they stand for, import_meta_graph
// rebuilds runnable Ops from such nodes (ours or TensorFlow's). Internal.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/graph_def_builder_internal.h"
#include "proto/graph.pb.h"
#include "varstate/graph.h"
#include "varstate/session.h"
#include "varstate/state_ops.h"
#include "varstate/tensor.h"

namespace varstate {
namespace internal {
struct OpGraphForm;
}  // namespace internal

// Adds Ops to a GraphDef that already holds the graph's variable nodes:
// an update becomes its TensorFlow node ("AssignAdd", "ScatterAdd", ...)
// whose first input is the variable's node, a Tensor value a Const, a
// Variable value "<variable>/read", a Placeholder a Placeholder node; a
// group a NoOp with a control input per member.
class OpNodeWriter {
 public:
  OpNodeWriter(tf::GraphDef* graph_def, const Graph& graph);
  // The node name `op` was written under (its name, made unique with _1, _2,
  // ... among the GraphDef's nodes), or nullopt with the reason in `why`
  // when it cannot be written (an Op made from a function, a value read
  // through a callable, a variable outside the graph).
  std::optional<std::string> add(const Op& op, std::string* why);

  // `name`, or with _1, _2, ... a name no node of the GraphDef has; reserved.
  std::string unused_name(const std::string& name) { return unique(name); }

  // The static shape of a value, when it is known before a run.
  static TensorShape value_shape(const UpdateValue& value);

 private:
  std::string unique(const std::string& name);
  tf::NodeDef* node(const std::string& name, const std::string& op,
                    const std::vector<std::string>& inputs, const std::string& device);
  std::string write_const(const std::string& name, const Tensor& value, const std::string& device);
  std::string write_int32s(const std::string& name, const std::vector<int64_t>& values,
                           bool scalar);
  // Checks that `value` can be written as input `role` of Op `op` on a
  // variable of dtype `want`.
  bool check_value(const std::string& op, const std::string& role, const UpdateValue& value,
                   DType want, std::string* why);
  // Writes the node `value` is read from (once per placeholder); returns
  // the input's name.
  std::string write_value(const std::string& base, const std::string& role,
                          const UpdateValue& value, DType want, const std::string& device);
  std::optional<std::string> write_group(const Op& op, const internal::OpGraphForm& form,
                                         std::string* why);
  std::optional<std::string> write_update(const Op& op, const internal::OpGraphForm& form,
                                          std::string* why);
  std::optional<std::string> write_partitioned(const Op& op, const internal::OpGraphForm& form,
                                               std::string* why);
  // The steps of write_partitioned: the checks, then one update node per
  // part, for a dense value (broadcast and split) or for scatter indices
  // and updates (routed to their part); each returns the parts' nodes.
  bool check_partitioned(const Op& op, const internal::OpGraphForm& form, std::string* why);
  std::vector<std::string> write_dense_parts(const std::string& name,
                                             const internal::OpGraphForm& form,
                                             const std::string& value);
  std::vector<std::string> write_sparse_parts(const std::string& name,
                                              const internal::OpGraphForm& form,
                                              const std::vector<std::string>& values);
  // Scatter indices routed to the parts: each index's part (the number of
  // part offsets <= it) and its index within that part.
  struct PartRouting {
    std::string part;
    std::string local_indices;
  };
  PartRouting write_part_routing(const std::string& name, const PartitionedVariable& p,
                                 const std::string& indices, DType index_dtype);
  // A Reshape node "<name>/<what>" of `in` to `shape`; returns its name.
  std::string write_reshape(const std::string& name, const std::string& what, const std::string& in,
                            tf::DataType dtype, const std::vector<int64_t>& shape);
  void write_update_node(const std::string& name, const std::string& type, const Variable& ref,
                         std::vector<std::string> inputs, const internal::OpGraphForm& form,
                         std::optional<DType> index_dtype);

  tf::GraphDef* g_;
  const Graph& graph_;
  std::set<std::string> used_;
  std::set<std::string> placeholders_;
  std::map<const internal::OpGraphForm*, std::string> written_;
};

// Rebuilds Ops from a GraphDef's nodes in a graph that holds its variables.
// A node runs as TensorFlow runs it when fetched: its control inputs first,
// each effect once, then its own update. Supported: the ref and resource
// forms of Assign, AssignAdd, AssignSub, the seven scatters and CountUpTo,
// with values from Const, Placeholder, the variables and Identity /
// ReadVariableOp / Snapshot of those; NoOp, Identity, ReadVariableOp and
// Snapshot pass their inputs' effects on; BroadcastTo reads as its input (a
// scalar the update broadcasts). A NoOp written by OpNodeWriter for a
// PartitionedVariable update becomes that one update again.
class OpNodeReader {
 public:
  OpNodeReader(const tf::GraphDef& graph_def, Graph& graph);
  // The Op named `node`, or nullopt with the reason in `why` (empty when
  // the graph has no node of that name).
  std::optional<Op> build(const std::string& node, std::string* why);

 private:
  bool effects(const std::string& node, std::vector<Op>& out, std::set<std::string>& done,
               std::set<std::string>& visiting, std::string* why);
  std::optional<Op> update(const tf::NodeDef& node, std::string* why);
  std::optional<Op> partitioned_update(const tf::NodeDef& node, std::string* why);
  std::optional<PartitionedVariable> partitioned_variable(const std::string& name,
                                                          std::string* why);
  std::optional<UpdateValue> value(const std::string& input, std::string* why, int depth = 0);

  Graph& graph_;
  std::map<std::string, const tf::NodeDef*> nodes_;
  std::map<std::string, Op> updates_;
};

}  // namespace varstate
