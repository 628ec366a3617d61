// varstate: TensorFlow-style variables for C++ training programs.
// Include this one header to get the whole public API.
#pragma once

#include "varstate/base/dtype.h"
#include "varstate/base/error.h"
#include "varstate/base/logging.h"
#include "varstate/checkpoint/checkpoint_reader.h"
#include "varstate/checkpoint/checkpoint_state.h"
#include "varstate/checkpoint/meta_graph.h"
#include "varstate/checkpoint/saver.h"
#include "varstate/device/device.h"
#include "varstate/device/device_manager.h"
#include "varstate/device/device_spec.h"
#include "varstate/device/placement.h"
#include "varstate/device/replica_device_setter.h"
#include "varstate/runtime/cast.h"
#include "varstate/runtime/dense_update.h"
#include "varstate/runtime/gather.h"
#include "varstate/runtime/math_ops.h"
#include "varstate/runtime/partitioned_variable.h"
#include "varstate/runtime/partitioners.h"
#include "varstate/runtime/slice.h"
#include "varstate/runtime/initializers.h"
#include "varstate/runtime/random_ops.h"
#include "varstate/runtime/random_seed.h"
#include "varstate/runtime/indexed_slices.h"
#include "varstate/runtime/scatter.h"
#include "varstate/runtime/state_ops.h"
#include "varstate/runtime/tensor.h"
#include "varstate/runtime/template.h"
#include "varstate/runtime/tensor_shape.h"
#include "varstate/runtime/variable_scope.h"
#include "varstate/runtime/variables.h"
#ifdef VARSTATE_HAVE_MPI
#include "varstate/distributed/cluster.h"  // multi-process layer (VARSTATE_MPI)
#include "varstate/distributed/distributed_saver.h"
#endif
