// TensorFlow's checkpoint utilities (tf.compat.v1.train.list_variables,
// load_variable, init_from_checkpoint): reading a checkpoint by name, and
// starting variables from one (warm starts, fine-tuning).
//
//   // Every variable under "encoder/" of the graph starts from the
//   // checkpoint's "pretrained/encoder/...", "emb" from its "embedding":
//   init_from_checkpoint("/ckpt/pretrained", {{"pretrained/encoder/", "encoder/"},
//                                              {"embedding", "emb"}});
//   global_variables_initializer().run();
//
// `ckpt_dir_or_file` is a checkpoint prefix (or V1 file), or a directory
// whose latest checkpoint ("checkpoint" state file) is meant; ValueError
// when a directory has none.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "varstate/partitioned_variable.h"
#include "varstate/tensor.h"
#include "varstate/variable.h"

namespace varstate {

// Every tensor of the checkpoint as (name, shape), sorted by name (a
// partitioned tensor once, with its full shape).
std::vector<std::pair<std::string, std::vector<int64_t>>> list_variables(
    const std::string& ckpt_dir_or_file);

// The tensor `name` of the checkpoint, whole, on the CPU (NotFoundError
// naming it and the checkpoint when absent).
Tensor load_variable(const std::string& ckpt_dir_or_file, const std::string& name);

// What an assignment map entry initializes: a variable name or scope of
// the default graph's get_variable store ("s/w", "s/", "/"), a Variable, or
// a PartitionedVariable.
using CheckpointTarget = std::variant<std::string, Variable, PartitionedVariable>;

// Replaces the initial value of variables with tensors of the checkpoint
// (TensorFlow's init_from_checkpoint): the next run of their initializer
// (global_variables_initializer(), or an initializer Op taken before this
// call: it reads the recipe when it runs) reads the checkpoint, not the
// initializer they were made with. Each entry, in the order of the keys:
//   "ckpt/name" -> "graph/name" or a Variable: that tensor into that
//       variable; a partitioned variable ("emb", or a PartitionedVariable)
//       gets each part's slice of the tensor, whatever partitioning it was
//       saved with;
//   "ckpt_scope/" -> "graph_scope/": every get_variable variable under
//       graph_scope/ from ckpt_scope/ plus the rest of its name; "/" on
//       either side is the root (every variable of the graph, names kept).
// Variables made with Variable(...) are not in the store: pass them as
// Variables. Dynamic variables are left out of scopes (a Saver restores
// them; naming one is a ValueError). Everything is checked before any initializer changes, and a
// call that throws changes none:
//   ValueError  a tensor missing from the checkpoint ("Tensor emb is not
//               found in ... checkpoint"), a shape or dtype that differs
//               from the variable's (TensorFlow finds a dtype mismatch only
//               when the initializer runs), a scope mapped to a name or a
//               name that is no variable of the store ("Assignment map with
//               scope only name ... should map to scope only ...").
// The checkpoint is read when the initializers run (a later change of its
// files shows), and rows go straight to each variable's device.
void init_from_checkpoint(const std::string& ckpt_dir_or_file,
                          const std::map<std::string, CheckpointTarget>& assignment_map);

}  // namespace varstate
