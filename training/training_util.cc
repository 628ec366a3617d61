#include "varstate/training_util.h"

#include <string>

#include "base/logging.h"
#include "varstate/error.h"
#include "varstate/graph.h"
#include "varstate/initializers.h"
#include "varstate/variable_scope.h"

namespace varstate {
namespace {

// TensorFlow's assert_global_step.
void check_global_step(const Variable& step) {
  if (!dtype_is_integer(step.dtype())) {
    throw TypeError("Existing \"global_step\" " + varstate::quoted(step.name()) +
                    " does not have integer type: " + std::string(dtype_name(step.dtype())));
  }
  if (step.shape().rank() != 0) {
    throw TypeError("Existing \"global_step\" " + varstate::quoted(step.name()) +
                    " is not scalar: " + step.shape().to_string());
  }
}

}  // namespace

std::optional<Variable> get_global_step(Graph* graph) {
  Graph& g = graph ? *graph : get_default_graph();
  const std::vector<std::any> items = g.get_collection(GraphKeys::GLOBAL_STEP);
  std::optional<Variable> step;
  if (items.size() == 1) {
    const auto* v = std::any_cast<Variable>(&items.front());
    if (v == nullptr) {
      throw TypeError("Existing \"global_step\" in collection " +
                      varstate::quoted(GraphKeys::GLOBAL_STEP) + " must be a Variable");
    }
    step = *v;
  } else if (items.empty()) {
    step = g.find_variable("global_step");
    if (!step) return std::nullopt;
  } else {
    logger().error("Multiple tensors in global_step collection ({}).", items.size());
    return std::nullopt;
  }
  check_global_step(*step);
  return step;
}

Variable get_or_create_global_step(Graph* graph) {
  Graph& g = graph ? *graph : get_default_graph();
  if (std::optional<Variable> step = get_global_step(&g)) return *step;
  auto as_default = g.as_default();
  NameScope root(g, "");
  return get_variable(GraphKeys::GLOBAL_STEP,
                      {.shape = TensorShape{},
                       .dtype = DType::kInt64,
                       .initializer = zeros_initializer(DType::kInt64),
                       .trainable = false,
                       .collections = std::vector<std::string>{GraphKeys::GLOBAL_VARIABLES,
                                                               GraphKeys::GLOBAL_STEP}})
      .variable();
}

}  // namespace varstate
