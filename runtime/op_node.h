// What an Op is, beyond its action: the TensorFlow node it stands for, so
// export_meta_graph can write it and import_meta_graph can rebuild it.
// Internal.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "varstate/session.h"
#include "varstate/state_ops.h"
#include "varstate/variable.h"

namespace varstate::internal {

// One TensorFlow node: an update of `ref` (type "Assign", "AssignAdd",
// "ScatterAdd", "CountUpTo", ...) or of every part of `partitioned` with
// its data inputs, or a "NoOp" whose control inputs are a group's members.
struct OpGraphForm {
  std::string type;
  std::optional<Variable> ref;
  std::optional<PartitionedVariable> partitioned;
  // Data inputs after the ref, by role: "value", "delta", "indices", "updates".
  std::vector<std::pair<std::string, UpdateValue>> inputs;
  bool use_locking = false;            // resolved (TensorFlow's default when unset)
  std::optional<bool> validate_shape;  // Assign
  std::optional<int64_t> limit;        // CountUpTo
  std::vector<Op> control_inputs;      // NoOp
};

Op make_op(std::string name, std::string type, std::function<void()> action,
           std::shared_ptr<const OpGraphForm> form, std::vector<Placeholder> placeholders);
// `op` under another name.
Op renamed(const Op& op, std::string name);
// The node `op` stands for, or nullptr when it has none (a hand-made Op).
const OpGraphForm* graph_form(const Op& op);
// Runs the action under the feeds of the enclosing run (no checks).
void run_fed(const Op& op);

// The placeholders of `a` followed by those of `b` not in `a`.
std::vector<Placeholder> merge_placeholders(std::vector<Placeholder> a,
                                            const std::vector<Placeholder>& b);

// A placeholder registered in `graph` under exactly `name` (a node of an
// imported graph), replacing one of the same name.
Placeholder placeholder_named(std::string name, DType dtype, TensorShape shape, Graph& graph);

// The value fed to `p` in the run under way on this thread. Throws
// InvalidArgumentError ("You must feed a value for placeholder tensor ...")
// when there is none.
Tensor fed_value(const Placeholder& p);

// Validates `feeds` for a run that reads `needed` (see Op::run).
void check_feeds(const std::vector<Placeholder>& needed, const FeedDict& feeds);

// Makes `feeds` the thread's current feeds until destroyed.
class FeedScope {
 public:
  explicit FeedScope(const FeedDict* feeds);
  ~FeedScope();
  FeedScope(const FeedScope&) = delete;
  FeedScope& operator=(const FeedScope&) = delete;

 private:
  const FeedDict* previous_;
};

}  // namespace varstate::internal
