// get_variable's store of a graph, read from outside variable_scope.cc:
// what tf.train.init_from_checkpoint looks names up in.
#pragma once

#include <map>
#include <string>

#include "varstate/graph.h"
#include "varstate/partitioned_variable.h"
#include "varstate/variable.h"

namespace varstate::internal {

// The variables get_variable made in `graph`, by full name ("s/w"; the
// parts of a partitioned variable as "s/emb/part_0", ...), and the
// partitioned variables by name ("s/emb").
std::map<std::string, Variable> store_variables(Graph& graph);
std::map<std::string, PartitionedVariable> store_partitioned_variables(Graph& graph);

}  // namespace varstate::internal
