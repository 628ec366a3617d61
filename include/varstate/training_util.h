// The global step (tf.compat.v1.train.get_global_step,
// get_or_create_global_step): the int64 scalar variable "global_step" that
// counts training steps, found through the GLOBAL_STEP collection so that
// optimizers, savers and hooks of one program share it.
//
//   Variable step = get_or_create_global_step();   // "global_step:0", int64 []
//   opt.apply_gradients(grads_and_vars, &step);
//   saver.save(sess, "ckpt/model", {.global_step = step});
//
// Thread safety: as get_variable on the graph (one thread builds a graph).
#pragma once

#include <optional>

#include "varstate/variable.h"

namespace varstate {

class Graph;

// The global step of `graph` (default: the default graph): the one variable
// of its GLOBAL_STEP collection or, with that collection empty, its variable
// named "global_step"; nullopt when there is none, or when the collection
// holds several (logged as an error, as TensorFlow does). Throws TypeError
// naming the variable when the one found is not an integer scalar
// (TensorFlow's assert_global_step).
std::optional<Variable> get_global_step(Graph* graph = nullptr);

// The global step of `graph` (default: the default graph), created when
// get_global_step finds none: as TensorFlow's create_global_step, through
// get_variable in the current variable scope and outside any name scope,
// named "global_step", an int64 scalar, zeros_initializer (initialized by
// global_variables_initializer, not at creation), not trainable, in the
// GLOBAL_VARIABLES and GLOBAL_STEP collections, on the device the device
// scope gives. Throws as get_global_step, and as get_variable (ValueError
// when a variable "global_step" of the current variable scope exists
// outside the collection with another shape or dtype).
Variable get_or_create_global_step(Graph* graph = nullptr);

}  // namespace varstate
