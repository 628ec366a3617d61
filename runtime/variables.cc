#include "varstate/variables.h"

#include "varstate/error.h"

namespace varstate {
namespace {

std::vector<Variable> global_and_local() {
  auto out = global_variables();
  for (const Variable& v : local_variables()) {
    bool dup = false;
    for (const Variable& g : out) dup = dup || g.same_as(v);
    if (!dup) out.push_back(v);
  }
  return out;
}

std::vector<std::string> uninitialized_names(const std::vector<Variable>& vars) {
  std::vector<std::string> names;
  for (const Variable& v : vars) {
    if (!v.is_initialized()) names.push_back(v.op_name());
  }
  return names;
}

}  // namespace

void add_to_collection(const std::string& key, std::any item) {
  get_default_graph().add_to_collection(key, std::move(item));
}
std::vector<std::any> get_collection(const std::string& key, std::string_view scope) {
  return get_default_graph().get_collection(key, scope);
}
std::vector<Variable> get_collection_variables(const std::string& key, std::string_view scope) {
  return get_default_graph().get_collection_variables(key, scope);
}

std::vector<Variable> global_variables(std::string_view scope) {
  return get_collection_variables(GraphKeys::GLOBAL_VARIABLES, scope);
}
std::vector<Variable> all_variables() { return global_variables(); }
std::vector<Variable> trainable_variables(std::string_view scope) {
  return get_collection_variables(GraphKeys::TRAINABLE_VARIABLES, scope);
}
std::vector<Variable> local_variables(std::string_view scope) {
  return get_collection_variables(GraphKeys::LOCAL_VARIABLES, scope);
}
std::vector<Variable> model_variables(std::string_view scope) {
  return get_collection_variables(GraphKeys::MODEL_VARIABLES, scope);
}
std::vector<Variable> moving_average_variables(std::string_view scope) {
  return get_collection_variables(GraphKeys::MOVING_AVERAGE_VARIABLES, scope);
}

Op initialize_variables(const std::vector<Variable>& var_list, const std::string& name) {
  std::vector<Op> ops;
  for (const Variable& v : var_list) {
    if (!v.initializer().valid()) {
      throw ValueError("initialize_variables: variable " + quoted(v.op_name()) +
                       " has no initializer (recreated from a VariableDef; restore it instead)");
    }
    ops.push_back(v.initializer());
  }
  return Op::group(std::move(ops), get_default_graph().unique_name(name));
}
Op variables_initializer(const std::vector<Variable>& var_list, const std::string& name) {
  return initialize_variables(var_list, name);
}
Op global_variables_initializer() { return initialize_variables(global_variables(), "init"); }
Op initialize_all_variables() { return global_variables_initializer(); }
Op local_variables_initializer() { return initialize_variables(local_variables(), "init_1"); }
Op initialize_local_variables() { return local_variables_initializer(); }

Op tables_initializer(const std::string& name) {
  std::vector<Op> ops;
  for (const std::any& item : get_default_graph().get_collection(GraphKeys::TABLE_INITIALIZERS)) {
    const Op* op = std::any_cast<Op>(&item);
    if (op == nullptr) {
      throw TypeError("tables_initializer: an item of the " +
                      quoted(GraphKeys::TABLE_INITIALIZERS) + " collection is not an Op");
    }
    ops.push_back(*op);
  }
  return Op::group(std::move(ops), get_default_graph().unique_name(name));
}
Op initialize_all_tables(const std::string& name) { return tables_initializer(name); }

bool is_variable_initialized(const Variable& variable) { return variable.is_initialized(); }

Tensor report_uninitialized_variables(const std::vector<Variable>& var_list) {
  auto names = uninitialized_names(var_list);
  return Tensor::from_vector<std::string>(names).strongly_typed();
}
Tensor report_uninitialized_variables() {
  return report_uninitialized_variables(global_and_local());
}

Op assert_variables_initialized(const std::vector<Variable>& var_list) {
  return Op(get_default_graph().unique_name("assert_variables_initialized"), "Assert", [var_list] {
    auto names = uninitialized_names(var_list);
    if (names.empty()) return;
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw FailedPreconditionError("Attempting to use uninitialized value " + names.front() +
                                  " (uninitialized: " + list + ")");
  });
}
Op assert_variables_initialized() { return assert_variables_initialized(global_and_local()); }

}  // namespace varstate
