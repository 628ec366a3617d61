#include "training/slot_creator.h"

#include <utility>

#include "varstate/graph.h"
#include "varstate/initializers.h"
#include "varstate/placement.h"

namespace varstate::internal {

Variable colocated_variable(const Variable& primary, InitialValueFn initial_value, DType dtype,
                            const TensorShape& shape, VariableOptions options) {
  DeviceScope clear{DeviceFunction{}};
  DeviceScope here(primary.placement());
  options.trainable = false;
  options.graph = &primary.graph();
  options.collections = std::vector<std::string>{GraphKeys::GLOBAL_VARIABLES};
  options.dtype = dtype;
  options.expected_shape = shape;
  return Variable(std::move(initial_value), std::move(options));
}

Variable colocated_variable(const Variable& primary, DType dtype, const TensorShape& shape,
                            double value, VariableOptions options) {
  return colocated_variable(primary, bind(constant_initializer(Tensor(value), dtype), shape, dtype),
                            dtype, shape, std::move(options));
}

SaveSliceInfo slot_slice(const SaveSliceInfo& part, const std::string& suffix, bool per_row) {
  SaveSliceInfo info = part;
  info.full_name = part.full_name + "/" + suffix;
  if (per_row) {
    info.full_shape.resize(1);
    info.var_offset.resize(1);
    info.var_shape.resize(1);
  }
  return info;
}

std::string slot_name(const Variable& primary, const std::string& base) {
  Graph& graph = primary.graph();
  NameScope root(graph, "");
  return graph.unique_name(primary.op_name() + "/" + base, false);
}

}  // namespace varstate::internal
