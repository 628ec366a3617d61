// Slot variables: variables that belong to another one (an optimizer's
// accumulators, a moving average), made as TensorFlow's slot_creator makes
// them. Shared by training/optimizer.cc and training/moving_averages.cc.
#pragma once

#include <string>

#include "varstate/tensor_shape.h"
#include "varstate/variable.h"

namespace varstate::internal {

// A new variable on `primary`'s device (its placement; any enclosing
// device scope is cleared), in `primary`'s graph, not trainable, in
// GLOBAL_VARIABLES only, uninitialized: `initial_value` runs when its
// initializer does. options.name is taken as given.
Variable colocated_variable(const Variable& primary, InitialValueFn initial_value, DType dtype,
                            const TensorShape& shape, VariableOptions options);

// The same with the constant `value` (a constant_initializer's recipe, so
// that a meta graph exports it as an op whatever the slot's size).
Variable colocated_variable(const Variable& primary, DType dtype, const TensorShape& shape,
                            double value, VariableOptions options);

// The slice of the whole slot that the slot of a partition holds: the
// partition's slice of "<full_name>/<suffix>" (its first dimension only
// for a per-row slot).
SaveSliceInfo slot_slice(const SaveSliceInfo& part, const std::string& suffix, bool per_row);

// "<primary>/<base>" made unique in the graph (not taken: the variable
// created with that name takes it), outside any name scope. Callers create
// the slot under NameScope(graph, "") too.
std::string slot_name(const Variable& primary, const std::string& base);

}  // namespace varstate::internal
