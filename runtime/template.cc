#include "varstate/template.h"

#include "varstate/error.h"
#include "varstate/variable.h"

namespace varstate {

struct TemplateBase::State {
  std::string name;
  std::string unique_name;
  std::optional<VariableScope> scope;
  bool variables_created = false;
};

std::unique_ptr<VariableScopeGuard> TemplateBase::open(Graph& graph, const std::string& name,
                                                       const VariableScope* scope,
                                                       const VariableScopeOptions& options,
                                                       bool open_name_scope) {
  std::optional<std::string_view> n;
  if (!scope) n = name;
  return std::unique_ptr<VariableScopeGuard>(
      new VariableScopeGuard(graph, n, scope, options, open_name_scope));
}

TemplateBase::TemplateBase(std::string name, const TemplateOptions& options)
    : state_(std::make_shared<State>()) {
  if (name.empty()) throw ValueError("name cannot be None.");
  state_->name = std::move(name);
  state_->unique_name = options.unique_name;
  if (options.create_scope_now) {
    // A variable scope without a name scope, captured and closed at once.
    auto guard = open(get_default_graph(), state_->unique_name, nullptr,
                      {.default_name = state_->name}, /*open_name_scope=*/false);
    state_->scope = guard->scope();
  }
}

const std::string& TemplateBase::name() const { return state_->name; }

std::optional<VariableScope> TemplateBase::variable_scope() const { return state_->scope; }

TemplateBase::CallScope::CallScope(TemplateBase& t) : graph_(get_default_graph()) {
  State& s = *t.state_;
  if (s.scope) {
    if (s.variables_created) {
      guard_ = open(graph_, "", &*s.scope, {.reuse = true}, true);
      check_ = true;
    } else {
      s.variables_created = true;
      guard_ = open(graph_, "", &*s.scope, {}, true);
    }
  } else {
    s.variables_created = true;
    guard_ = open(graph_, s.unique_name, nullptr, {.default_name = s.name}, true);
    s.scope = guard_->scope();
  }
  trainable_at_start_ = graph_.collection_size(GraphKeys::TRAINABLE_VARIABLES);
}

TemplateBase::CallScope::~CallScope() = default;

void TemplateBase::CallScope::finish() {
  if (!check_) return;
  const size_t now = graph_.collection_size(GraphKeys::TRAINABLE_VARIABLES);
  if (now == trainable_at_start_) return;
  std::vector<Variable> trainable = graph_.get_collection_variables(GraphKeys::TRAINABLE_VARIABLES);
  std::string names;
  for (size_t i = trainable_at_start_; i < trainable.size(); ++i) {
    names += (names.empty() ? "" : ", ") + trainable[i].name();
  }
  throw ValueError(
      "Trainable variable created when calling a template after the first time, perhaps you used "
      "tf.Variable when you meant tf.get_variable: [" +
      names + "]");
}

}  // namespace varstate
