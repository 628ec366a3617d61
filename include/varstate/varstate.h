// varstate: TensorFlow-style variables for C++ training programs.
// Include this one header to get the whole public API.
#pragma once

#include "base/dtype.h"
#include "base/error.h"
#include "base/logging.h"
#include "device/device.h"
#include "device/device_manager.h"
#include "device/device_spec.h"
#include "device/placement.h"
#include "runtime/cast.h"
#include "runtime/dense_update.h"
#include "runtime/indexed_slices.h"
#include "runtime/scatter.h"
#include "runtime/tensor.h"
#include "runtime/tensor_shape.h"
