// Runtime-internal: the shape check of the dense updates (assign,
// assign_add, assign_sub), shared by the updates of a tensor
// (runtime/dense_update.cc), of a Variable (runtime/variable.cc) and of a
// PartitionedVariable (runtime/partitioned_variable.cc), so that the same
// mistake gets the same error and message whatever the target.
#pragma once

#include <string>
#include <string_view>

#include "kernels/common.h"
#include "varstate/tensor_shape.h"

namespace varstate::internal {

// How errors name a dense update: "Assign", "AssignAdd", "AssignSub",
// then ` to "w"` when `name` is not empty.
std::string dense_update_subject(kernels::DenseUpdateOp op, std::string_view name);

// Throws ValueError (TensorFlow's graph-time shape check) unless a value
// of shape `value` may update a target of shape `target`: equal shapes, or
// a scalar value when `scalar_ok` (the broadcast of varstate/dense_update.h,
// and of assign_add/assign_sub on variables).
// "Assign to \"w\": shapes must match: target shape [3], value shape [2]"
void check_dense_update_shape(const std::string& who, const TensorShape& target,
                              const TensorShape& value, bool scalar_ok);

}  // namespace varstate::internal
