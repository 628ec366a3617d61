#include "varstate/graph.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <utility>

#include "runtime/variable_access.h"
#include "varstate/error.h"
#include "varstate/partitioned_variable.h"
#include "varstate/placeholder.h"
#include "varstate/session.h"
#include "varstate/variable.h"

namespace varstate {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// tf.get_collection's scope: a regular expression matched at the start of
// an item's name (Python's re.match). None for an empty scope.
std::optional<std::regex> scope_filter(std::string_view scope) {
  if (scope.empty()) return std::nullopt;
  try {
    return std::regex(std::string(scope), std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw ValueError("get_collection: scope " + quoted(scope) +
                     " is not a valid regular expression: " + e.what());
  }
}

bool matches(const std::regex& filter, const std::string& name) {
  return std::regex_search(name, filter, std::regex_constants::match_continuous);
}

// The `name` attribute the item's TensorFlow counterpart has: "w:0" for a
// variable, "emb" for a partitioned variable, "init" for an op, "x:0" for a
// placeholder (a Tensor in TensorFlow). None for items without one.
std::optional<std::string> item_name(const std::any& item) {
  if (const auto* v = std::any_cast<Variable>(&item)) return v->name();
  if (const auto* p = std::any_cast<PartitionedVariable>(&item)) return p->name();
  if (const auto* op = std::any_cast<Op>(&item)) return op->name();
  if (const auto* ph = std::any_cast<Placeholder>(&item)) return ph->name() + ":0";
  return std::nullopt;
}

thread_local std::unique_ptr<Graph> t_owned_default;
thread_local Graph* t_default = nullptr;

}  // namespace

Graph::Graph() = default;
Graph::~Graph() = default;

std::string Graph::name_scope() const {
  std::lock_guard lock(mu_);
  return scope_stack_.empty() ? std::string() : scope_stack_.back();
}

std::string Graph::unique_name(std::string_view name, bool mark_as_used) {
  std::lock_guard lock(mu_);
  std::string base =
      (scope_stack_.empty() ? std::string() : scope_stack_.back()) + std::string(name);
  std::string key = lower(base);
  auto it = used_names_.find(key);
  if (it == used_names_.end()) {
    if (mark_as_used) used_names_[key] = 1;
    return base;
  }
  // First free suffix: an explicitly requested "x_1" also reserves that name.
  int64_t i = it->second;
  std::string candidate;
  while (true) {
    candidate = base + "_" + std::to_string(i);
    if (!used_names_.count(lower(candidate))) break;
    ++i;
  }
  if (mark_as_used) {
    it->second = i + 1;
    used_names_[lower(candidate)] = 1;
  }
  return candidate;
}

void Graph::push_name_scope(std::string scope) {
  std::lock_guard lock(mu_);
  scope_stack_.push_back(std::move(scope));
}

void Graph::pop_name_scope() {
  std::lock_guard lock(mu_);
  scope_stack_.pop_back();
}

void Graph::add_to_collection(const std::string& key, std::any item) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = collections_.try_emplace(key);
  if (inserted) collection_order_.push_back(key);
  it->second.push_back(std::move(item));
}

void Graph::add_to_collections(const std::vector<std::string>& keys, const std::any& item) {
  std::vector<std::string> unique = keys;
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  for (const auto& key : unique) add_to_collection(key, item);
}

std::vector<std::any> Graph::get_collection(const std::string& key, std::string_view scope) const {
  const std::optional<std::regex> filter = scope_filter(scope);
  std::vector<std::any> items;
  {
    std::lock_guard lock(mu_);
    auto it = collections_.find(key);
    if (it != collections_.end()) items = it->second;
  }
  if (!filter) return items;
  std::vector<std::any> out;
  for (std::any& item : items) {
    const std::optional<std::string> name = item_name(item);
    if (name && matches(*filter, *name)) out.push_back(std::move(item));
  }
  return out;
}

std::vector<Variable> Graph::get_collection_variables(const std::string& key,
                                                      std::string_view scope) const {
  std::vector<Variable> out;
  for (const std::any& item : get_collection(key, scope)) {
    if (const auto* v = std::any_cast<Variable>(&item)) out.push_back(*v);
  }
  return out;
}

std::vector<std::any> Graph::clear_collection(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = collections_.find(key);
  if (it == collections_.end()) return {};
  return std::exchange(it->second, {});
}

std::vector<std::string> Graph::collection_keys() const {
  std::lock_guard lock(mu_);
  return collection_order_;
}

size_t Graph::collection_size(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = collections_.find(key);
  return it == collections_.end() ? 0 : it->second.size();
}

std::shared_ptr<void> Graph::extension(const std::string& key,
                                       const std::function<std::shared_ptr<void>()>& make) {
  std::lock_guard lock(mu_);
  auto& slot = extensions_[key];
  if (!slot) slot = make();
  return slot;
}

void Graph::register_variable(const Variable& v) {
  std::lock_guard lock(mu_);
  variable_index_.emplace(v.op_name(), variable_states_.size());
  variable_states_.push_back(internal::state_handle(v));
}

std::vector<Variable> Graph::variables() const {
  std::lock_guard lock(mu_);
  std::vector<Variable> out;
  for (const auto& s : variable_states_) out.push_back(internal::from_state_handle(s));
  return out;
}

std::optional<Variable> Graph::find_variable(std::string_view name) const {
  std::lock_guard lock(mu_);
  auto it = variable_index_.find(std::string(name));
  if (it == variable_index_.end()) return std::nullopt;
  return internal::from_state_handle(variable_states_[it->second]);
}

void Graph::set_random_seed(std::optional<int64_t> seed) {
  std::lock_guard lock(mu_);
  seed_ = seed;
}

std::optional<int64_t> Graph::random_seed() const {
  std::lock_guard lock(mu_);
  return seed_;
}

int64_t Graph::next_op_id() {
  std::lock_guard lock(mu_);
  return ++op_id_;
}

Graph::DefaultGuard::DefaultGuard(Graph* g) : previous_(&get_default_graph()) { t_default = g; }

Graph::DefaultGuard::~DefaultGuard() { t_default = previous_; }

Graph& get_default_graph() {
  if (t_default == nullptr) {
    t_owned_default = std::make_unique<Graph>();
    t_default = t_owned_default.get();
  }
  return *t_default;
}

void Graph::release_contents() {
  std::map<std::string, std::vector<std::any>> collections;
  std::vector<std::shared_ptr<void>> states;
  std::map<std::string, std::shared_ptr<void>> extensions;
  {
    std::lock_guard lock(mu_);
    collections.swap(collections_);
    states.swap(variable_states_);
    variable_index_.clear();
    extensions.swap(extensions_);
    collection_order_.clear();
  }
  // Destroyed here, outside the lock: a variable's state may refer back.
}

void reset_default_graph() {
  // As in TensorFlow, the old graph's objects are not to be used after a
  // reset: its variables, collections and scopes are released (variables a
  // caller still holds keep their own state). The emptied graph object is
  // kept until the thread ends so that Variable::graph() stays valid.
  static thread_local std::vector<std::unique_ptr<Graph>> retired;
  if (t_owned_default) {
    t_owned_default->release_contents();
    retired.push_back(std::move(t_owned_default));
  }
  t_owned_default = std::make_unique<Graph>();
  t_default = t_owned_default.get();
}

NameScope::NameScope(std::string_view name) : NameScope(get_default_graph(), name) {}

NameScope::NameScope(Graph& graph, std::string_view name) : graph_(graph) {
  if (name.empty()) {
    scope_.clear();
  } else if (name.back() == '/') {
    scope_ = std::string(name);  // re-enter exactly
  } else {
    scope_ = graph_.unique_name(name) + "/";
  }
  graph_.push_name_scope(scope_);
}

NameScope::~NameScope() { graph_.pop_name_scope(); }

}  // namespace varstate
