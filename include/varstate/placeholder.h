// Placeholders and feeds (tf.compat.v1.placeholder, Session.run's feed_dict).
//
// A Placeholder is a named input of an update Op (varstate/state_ops.h) whose
// value is given each time the Op runs. Unlike a callable, it is written to
// an exported meta graph as a Placeholder node, so the Op still runs after
// import_meta_graph -- in varstate or in TensorFlow:
//
//   Placeholder ids = placeholder(DType::kInt64, TensorShape{-1}, "ids");
//   Placeholder grads = placeholder(DType::kFloat, TensorShape{-1, 64}, "grads");
//   Op train_op = scatter_sub_op(emb, ids, grads);
//   sess.run(train_op, {{ids, batch_ids}, {grads, batch_grads}});
//   sess.run(train_op, {{"ids:0", batch_ids}, {"grads", batch_grads}});  // by name
//
// Placeholders belong to a graph (the default one when created), which
// keeps them by name: find_placeholder("ids").
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "varstate/dtype.h"
#include "varstate/tensor.h"
#include "varstate/tensor_shape.h"

namespace varstate {

class Graph;
class Placeholder;
namespace internal {
Placeholder placeholder_named(std::string name, DType dtype, TensorShape shape, Graph& graph);
}  // namespace internal

class Placeholder {
 public:
  // The node name ("scope/ids"), without ":0".
  const std::string& name() const;
  DType dtype() const;
  // Possibly partial: -1 dimensions and TensorShape::unknown() accept any size.
  const TensorShape& shape() const;
  Graph& graph() const;
  bool same_as(const Placeholder& other) const { return state_ == other.state_; }

 private:
  struct State;
  explicit Placeholder(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  friend Placeholder internal::placeholder_named(std::string, DType, TensorShape, Graph&);
  std::shared_ptr<const State> state_;
};

// A placeholder named `name` in the current name scope, made unique in the
// graph (default: the thread's default graph) with _1, _2, ... as TensorFlow
// does. Throws InvalidArgumentError for an invalid dtype.
Placeholder placeholder(DType dtype, TensorShape shape = TensorShape::unknown(),
                        std::string_view name = "Placeholder", Graph* graph = nullptr);

// The graph's placeholder named `name` ("x" or "x:0"), if any.
std::optional<Placeholder> find_placeholder(std::string_view name, Graph* graph = nullptr);

// The values fed to a run: each entry names a placeholder by object or by
// name ("x" or "x:0").
class FeedDict {
 public:
  struct Entry {
    Entry(const Placeholder& p, Tensor v) : name(p.name()), value(std::move(v)) {}
    Entry(std::string n, Tensor v) : name(std::move(n)), value(std::move(v)) {}
    Entry(const char* n, Tensor v) : name(n), value(std::move(v)) {}
    std::string name;
    Tensor value;
  };
  FeedDict() = default;
  FeedDict(std::initializer_list<Entry> entries);
  // Adds or replaces the value fed to the placeholder.
  void set(const Entry& entry);
  // The value fed to the placeholder named `name` (no ":0"), or nullptr.
  const Tensor* find(std::string_view name) const;
  const std::vector<Entry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<Entry> entries_;  // names without ":0", each once
};

}  // namespace varstate
