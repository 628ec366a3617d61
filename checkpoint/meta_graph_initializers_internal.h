// Initial values as GraphDef nodes (internal): export_meta_graph writes a
// variable's initializer recipe as the ops TensorFlow's graph holds
// (RandomUniform / RandomStandardNormal / TruncatedNormal with their seed
// attrs and scale/shift arithmetic, Fill, small Consts), not its computed
// value; import_meta_graph turns such nodes back into a recipe.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>

#include "proto/graph.pb.h"
#include "varstate/variable.h"

namespace varstate::internal {

// A tensor initial value (or a custom initializer's) larger than this has
// no op form: it is not inlined into the meta graph.
inline constexpr size_t kMaxInlineInitialValueBytes = size_t{64} << 10;

// Adds the nodes computing `v`'s initial value, the last one named
// "<op>/initial_value". Returns false (adding nothing) when the value has
// no op form: a Tensor or a callable's value above the inline limit, or a
// variable recreated from a VariableDef.
bool add_initial_value_nodes(tf::GraphDef* g, const Variable& v);

// A GraphDef's nodes by name, built once per import for all its variables
// (one per variable made an import quadratic in the variables).
using NodeIndex = std::unordered_map<std::string, const tf::NodeDef*>;
NodeIndex index_nodes(const tf::GraphDef& g);

// For a variable recreated by import_meta_graph: gives it the initial value
// the nodes ending at `node` (an "<op>/initial_value" or a TensorFlow
// initializer output) compute, when they are a form add_initial_value_nodes
// writes or TensorFlow's initializers build. Returns false when they are not.
// `nodes`: index_nodes of the GraphDef.
bool import_initial_value(const NodeIndex& nodes, const std::string& node, Variable& v);

}  // namespace varstate::internal
