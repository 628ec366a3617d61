// Dense in-place updates of a tensor: assign, assign_add, assign_sub.
//
// These are the kernels behind Variable::assign and friends, usable on any
// tensor. The value's dtype must match (a weakly typed literal converts,
// see convert_to_dtype); its shape must equal the target's, or be a scalar,
// which is broadcast. A value on another device is copied to the target's
// device first. Everything is validated before the first byte is written:
// a call that throws has left the target unchanged.
//
// On a GPU the update is enqueued on the target device's stream.
#pragma once

#include "varstate/tensor.h"
#include "varstate/update_options.h"

namespace varstate {

// target = value; with options.validate_shape=false the target takes the
// value's shape (a new buffer; other handles to the old buffer keep the old
// contents). options.name names the target in error messages ("w:0").
// Throws TypeError (dtype), ValueError (a shape that is neither the
// target's nor a scalar: TensorFlow's graph-time check),
// InvalidArgumentError (an empty target or value handle).
void assign(Tensor& target, const Tensor& value, const UpdateOptions& options = {});
// target += delta / target -= delta. Numeric dtypes only.
void assign_add(Tensor& target, const Tensor& delta, const UpdateOptions& options = {});
void assign_sub(Tensor& target, const Tensor& delta, const UpdateOptions& options = {});

}  // namespace varstate
