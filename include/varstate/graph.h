// Graph: the registry of variables, collections, names and seeds.
//
// A Graph records the variables created in it (in creation order), named
// collections of arbitrary items (GraphKeys), the names in use (so that
// "Variable" becomes "Variable_1", ...), the name-scope stack and the
// graph-level random seed. Each thread has a default graph; the free
// functions that mirror TensorFlow's (global_variables(), ...) use it.
// All methods are thread-safe.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace varstate {

class Variable;

// Standard collection names (TensorFlow's GraphKeys values).
namespace GraphKeys {
inline constexpr const char* GLOBAL_VARIABLES = "variables";
inline constexpr const char* VARIABLES = GLOBAL_VARIABLES;  // old alias
inline constexpr const char* TRAINABLE_VARIABLES = "trainable_variables";
inline constexpr const char* LOCAL_VARIABLES = "local_variables";
inline constexpr const char* MODEL_VARIABLES = "model_variables";
inline constexpr const char* MOVING_AVERAGE_VARIABLES = "moving_average_variables";
inline constexpr const char* REGULARIZATION_LOSSES = "regularization_losses";
inline constexpr const char* GLOBAL_STEP = "global_step";
inline constexpr const char* SAVERS = "savers";
inline constexpr const char* CONCATENATED_VARIABLES = "concatenated_variables";
// The initializer Ops of lookup tables (tables_initializer() runs them).
inline constexpr const char* TABLE_INITIALIZERS = "table_initializer";
}  // namespace GraphKeys

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // --- names ---------------------------------------------------------------
  // The current name scope with a trailing "/" ("" at the root).
  std::string name_scope() const;
  // `name` prefixed by the current name scope and made unique in this graph
  // by appending _1, _2, ... (case-insensitively, as TensorFlow does). With
  // mark_as_used=false the name is returned but not reserved.
  std::string unique_name(std::string_view name, bool mark_as_used = true);

  // --- collections ---------------------------------------------------------
  void add_to_collection(const std::string& key, std::any item);
  void add_to_collections(const std::vector<std::string>& keys, const std::any& item);
  // The items of a collection in insertion order (empty if none), as
  // tf.get_collection(key, scope): with a non-empty `scope`, only the items
  // whose name matches the regular expression `scope` (ECMAScript grammar)
  // at its start, as Python's re.match(scope, item.name). Names are
  // TensorFlow's: Variable "s/w:0", PartitionedVariable "s/emb", Op "s/init",
  // Placeholder "s/x:0"; other items (strings, numbers, ...) have none and
  // are left out when a scope is given. An empty scope keeps every item
  // (TensorFlow's scope=None; there is no way to pass its scope="").
  // Throws ValueError naming `scope` when it is not a valid regular
  // expression.
  std::vector<std::any> get_collection(const std::string& key, std::string_view scope = {}) const;
  // The Variables of get_collection(key, scope), other items left out.
  std::vector<Variable> get_collection_variables(const std::string& key,
                                                 std::string_view scope = {}) const;
  // Removes every item of a collection and returns them.
  std::vector<std::any> clear_collection(const std::string& key);
  std::vector<std::string> collection_keys() const;
  // The number of items in a collection (0 if none), without copying them.
  size_t collection_size(const std::string& key) const;

  // --- variables -----------------------------------------------------------
  // Every variable created in this graph, in creation order.
  std::vector<Variable> variables() const;
  // The variable whose op name (no ":0") is `name`, if any.
  std::optional<Variable> find_variable(std::string_view name) const;

  // --- randomness ----------------------------------------------------------
  // Graph-level seed (tf.set_random_seed).
  void set_random_seed(std::optional<int64_t> seed);
  std::optional<int64_t> random_seed() const;
  // A counter that grows with every op created, used as the op seed when
  // only the graph seed is set (TensorFlow uses the graph's last op id).
  int64_t next_op_id();

  // --- state of higher layers ----------------------------------------------
  // The object kept under `key` for this graph's lifetime, created with
  // make() on first use (get_variable's store and the variable-scope stack,
  // varstate/variable_scope.h). Every later call returns that object.
  std::shared_ptr<void> extension(const std::string& key,
                                  const std::function<std::shared_ptr<void>()>& make);

  // --- default graph -------------------------------------------------------
  class DefaultGuard {
   public:
    explicit DefaultGuard(Graph* g);
    ~DefaultGuard();
    DefaultGuard(const DefaultGuard&) = delete;
    DefaultGuard& operator=(const DefaultGuard&) = delete;

   private:
    Graph* previous_;
  };
  // Makes this graph the thread's default until the guard is destroyed.
  [[nodiscard]] DefaultGuard as_default() { return DefaultGuard(this); }

 private:
  friend class Variable;
  friend class NameScope;
  friend void reset_default_graph();
  void register_variable(const Variable& v);
  // Drops what the graph holds (variables, collections, extensions); the
  // empty object stays valid for Variable::graph() references.
  void release_contents();
  void push_name_scope(std::string scope);
  void pop_name_scope();

  mutable std::mutex mu_;
  std::map<std::string, int64_t> used_names_;  // lower-cased name -> next suffix
  std::vector<std::string> scope_stack_;
  std::map<std::string, std::vector<std::any>> collections_;
  std::vector<std::string> collection_order_;
  std::vector<std::shared_ptr<void>> variable_states_;
  // Op name -> the first variable of that name in variable_states_.
  std::unordered_map<std::string, size_t> variable_index_;
  std::optional<int64_t> seed_;
  int64_t op_id_ = 0;
  std::map<std::string, std::shared_ptr<void>> extensions_;
};

// The thread's default graph (created on first use).
Graph& get_default_graph();
// Replaces the thread's default graph with a new, empty one. Variables of
// the old graph stay valid as long as handles to them exist; the old graph
// itself drops its variables and collections (as in TensorFlow, its objects
// are not to be used after a reset), so their memory goes with the last handle.
void reset_default_graph();

// A name scope (tf.name_scope) on the default graph or a given one, for its
// lifetime: names created inside get the prefix "name/". The scope name is
// made unique ("layer" -> "layer_1" the second time) unless it ends with
// "/", which re-enters that exact scope; "" returns to the root.
class NameScope {
 public:
  explicit NameScope(std::string_view name);
  NameScope(Graph& graph, std::string_view name);
  ~NameScope();
  NameScope(const NameScope&) = delete;
  NameScope& operator=(const NameScope&) = delete;
  // The scope's full name with trailing "/" (e.g. "outer/layer_1/").
  const std::string& name() const { return scope_; }

 private:
  Graph& graph_;
  std::string scope_;
};

}  // namespace varstate
