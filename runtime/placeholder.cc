#include "varstate/placeholder.h"

#include <map>
#include <mutex>

#include "runtime/op_node.h"
#include "varstate/error.h"
#include "varstate/graph.h"

namespace varstate {

struct Placeholder::State {
  std::string name;
  DType dtype;
  TensorShape shape;
  Graph* graph;
};

namespace {

// The graph's placeholders by name; the graph keeps it as long as itself.
struct PlaceholderStore {
  std::mutex mu;
  std::map<std::string, Placeholder, std::less<>> by_name;
};

PlaceholderStore& store(Graph& graph) {
  return *static_cast<PlaceholderStore*>(
      graph.extension("varstate.placeholders", [] { return std::make_shared<PlaceholderStore>(); })
          .get());
}

// "x:0" -> "x"; other names unchanged.
std::string_view without_output(std::string_view name) {
  if (name.size() > 2 && name.substr(name.size() - 2) == ":0") name.remove_suffix(2);
  return name;
}

thread_local const FeedDict* t_feeds = nullptr;

bool contains(const std::vector<Placeholder>& list, const Placeholder& p) {
  for (const Placeholder& q : list) {
    if (q.same_as(p)) return true;
  }
  return false;
}

std::string describe(const Placeholder& p) {
  std::string out = "placeholder tensor " + quoted(p.name()) + " with dtype " +
                    std::string(dtype_name(p.dtype()));
  if (!p.shape().unknown_rank()) out += " and shape " + p.shape().to_string();
  return out;
}

}  // namespace

const std::string& Placeholder::name() const { return state_->name; }
DType Placeholder::dtype() const { return state_->dtype; }
const TensorShape& Placeholder::shape() const { return state_->shape; }
Graph& Placeholder::graph() const { return *state_->graph; }

Placeholder placeholder(DType dtype, TensorShape shape, std::string_view name, Graph* graph) {
  if (!dtype_is_valid(static_cast<int>(dtype))) {
    throw InvalidArgumentError("placeholder " + quoted(name) + ": invalid dtype " +
                               std::to_string(static_cast<int>(dtype)));
  }
  Graph& g = graph ? *graph : get_default_graph();
  return internal::placeholder_named(g.unique_name(name), dtype, std::move(shape), g);
}

std::optional<Placeholder> find_placeholder(std::string_view name, Graph* graph) {
  PlaceholderStore& s = store(graph ? *graph : get_default_graph());
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.by_name.find(without_output(name));
  if (it == s.by_name.end()) return std::nullopt;
  return it->second;
}

FeedDict::FeedDict(std::initializer_list<Entry> entries) {
  for (const Entry& e : entries) set(e);
}

void FeedDict::set(const Entry& entry) {
  const std::string name(without_output(entry.name));
  for (Entry& e : entries_) {
    if (e.name == name) {
      e.value = entry.value;
      return;
    }
  }
  entries_.emplace_back(name, entry.value);
}

const Tensor* FeedDict::find(std::string_view name) const {
  for (const Entry& e : entries_) {
    if (e.name == name) return &e.value;
  }
  return nullptr;
}

namespace internal {

Placeholder placeholder_named(std::string name, DType dtype, TensorShape shape, Graph& graph) {
  Placeholder p(std::make_shared<const Placeholder::State>(
      Placeholder::State{name, dtype, std::move(shape), &graph}));
  PlaceholderStore& s = store(graph);
  std::lock_guard<std::mutex> lock(s.mu);
  s.by_name.insert_or_assign(std::move(name), p);
  return p;
}

std::vector<Placeholder> merge_placeholders(std::vector<Placeholder> a,
                                            const std::vector<Placeholder>& b) {
  for (const Placeholder& p : b) {
    if (!contains(a, p)) a.push_back(p);
  }
  return a;
}

Tensor fed_value(const Placeholder& p) {
  const Tensor* value = t_feeds ? t_feeds->find(p.name()) : nullptr;
  if (value == nullptr) throw InvalidArgumentError("You must feed a value for " + describe(p));
  return *value;
}

void check_feeds(const std::vector<Placeholder>& needed, const FeedDict& feeds) {
  for (const FeedDict::Entry& e : feeds.entries()) {
    bool known = false;
    for (const Placeholder& p : needed) known = known || p.name() == e.name;
    if (!known && !find_placeholder(e.name)) {
      throw InvalidArgumentError("feed " + quoted(e.name) +
                                 ": the graph has no placeholder of that name");
    }
  }
  for (const Placeholder& p : needed) {
    const Tensor* value = feeds.find(p.name());
    if (value == nullptr) throw InvalidArgumentError("You must feed a value for " + describe(p));
    if (value->dtype() != p.dtype()) {
      throw InvalidArgumentError("placeholder " + quoted(p.name()) + " has dtype " +
                                 std::string(dtype_name(p.dtype())) + "; the value fed has dtype " +
                                 std::string(dtype_name(value->dtype())));
    }
    if (!p.shape().is_compatible_with(value->shape())) {
      throw ValueError("Cannot feed value of shape " + value->shape().to_string() + " for Tensor " +
                       quoted(p.name() + ":0") + ", which has shape " + p.shape().to_string());
    }
  }
}

FeedScope::FeedScope(const FeedDict* feeds) : previous_(t_feeds) { t_feeds = feeds; }
FeedScope::~FeedScope() { t_feeds = previous_; }

}  // namespace internal
}  // namespace varstate
