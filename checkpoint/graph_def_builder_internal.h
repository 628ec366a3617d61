// Building GraphDef nodes, for the meta-graph writers (meta_graph.cc: the
// variables and the saver; meta_graph_ops.cc: update Ops;
// meta_graph_initializers.cc: initializers). Internal: generated protos.
#pragma once

#include <string>
#include <vector>

#include "proto/graph.pb.h"
#include "varstate/tensor.h"

namespace varstate {

// Appends a node `name` running `op` on `inputs`, placed on `device` (none
// when empty).
tf::NodeDef* add_node(tf::GraphDef* graph, const std::string& name, const std::string& op,
                      std::vector<std::string> inputs = {}, const std::string& device = {});

// The attr `key` of `node`, created empty when missing.
tf::AttrValue& attr(tf::NodeDef* node, const std::string& key);

// `host` (a host tensor) as a TensorProto: dtype, shape and tensor_content
// (string_val for strings).
void tensor_to_proto(const Tensor& host, tf::TensorProto* proto);

// A Const node `name` holding `host` (a host tensor).
tf::NodeDef* add_const(tf::GraphDef* graph, const std::string& name, const Tensor& host,
                       const std::string& device = {});

}  // namespace varstate
