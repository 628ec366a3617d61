// The generator behind random_ops.h and initializers.h: a slice of a seeded
// random tensor, generated on a given device. Not part of the public API.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "varstate/device.h"
#include "varstate/random_seed.h"
#include "varstate/tensor.h"

namespace varstate::internal {

enum class RandomDistribution {
  kUniform,
  kNormal,
  kTruncatedNormal
};

// Where the generated tensor sits in a larger one: the part of shape `shape`
// at `offset` of a tensor of `full_shape` (a variable partition).
struct RandomSlice {
  const TensorShape& full_shape;
  const std::vector<int64_t>& offset;
};

// Throws ValueError ("Expected floating point type, got int32.") unless
// dtype is half, bfloat16, float32 or float64.
void check_float_dtype(DType dtype, std::string_view what);

// random_uniform's dtype rules: floats, int32 and int64; integers need a
// maxval. Throws ValueError ("Invalid dtype int8", "Must specify maxval for
// integer dtype int32").
void check_uniform_dtype(DType dtype, bool has_maxval, std::string_view what);

// For integer bounds (host scalars of one dtype): throws InvalidArgumentError
// ("Need minval < maxval, got 5 >= 3") when the range is empty.
void check_uniform_range(const Tensor& lo, const Tensor& hi, std::string_view what);

// `param` as a host scalar of `dtype` (literals convert); `what` and `param_name`
// name it in errors. Throws InvalidArgumentError when it is not a single
// value, TypeError when it does not convert.
Tensor scalar_param(const Tensor& param, DType dtype, std::string_view what,
                    std::string_view param_name);

// A tensor of `shape` and `dtype` on `device` holding the values the op
// (distribution, seeds, a, b) gives, where (a, b) are (minval, maxval) or
// (mean, stddev) as host scalars of `dtype` (see scalar_param). With `slice`,
// the values are that part of the full tensor's: the same bits whatever the
// partitioning and the device. dtype: half, bfloat16, float32, float64, and
// int32/int64 for kUniform (callers validate; an integer range must be
// non-empty). Throws ValueError for a shape that is not fully defined or a
// slice that does not fit in its full shape. `run` numbers the runs of one
// op (0 = first): run k draws what TensorFlow's op draws on its (k+1)-th
// run, whose Philox counter has advanced by 256 samples per element of the
// full tensor on each earlier run (random_run_offset).
Tensor generate_random(RandomDistribution distribution, DType dtype, const TensorShape& shape,
                       SeedPair seeds, const Tensor& a, const Tensor& b, Device& device,
                       const RandomSlice* slice = nullptr, int64_t run = 0);

// The element index where run `run` of an op producing `full_elements`
// values of `dtype` starts in the counter-based element numbering of
// kernels/random_distributions.h. Throws OutOfRangeError past 2^62.
int64_t random_run_offset(RandomDistribution distribution, DType dtype, int64_t full_elements,
                          int64_t run);

}  // namespace varstate::internal
