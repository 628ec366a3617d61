// Random tensors: tf.random_uniform, tf.random_normal, tf.truncated_normal.
//
// Each function creates a tensor of a fully defined `shape` on the device
// the current device scope picks (varstate/placement.h; request types
// "RandomUniform", "RandomStandardNormal", "TruncatedNormal") and fills it
// there: on a GPU with the CUDA kernels, enqueued on the device's stream
// (no host generation and copy), on the CPU with the multithreaded kernels.
//
// Values come from a Philox4x32-10 generator keyed by the op's seed pair
// (varstate/random_seed.h: graph seed + op seed, TensorFlow's rules). Each
// call is a new op, as in a TensorFlow graph: two calls with the same
// (graph seed, op seed) give identical tensors, on every run, on the CPU and
// on a GPU (bit for bit); with neither seed set each call draws fresh seeds.
// With a seed pair, the values are TensorFlow's: uniform values bit-exact,
// normal values within 2 ulp (float32/float64; measured against TensorFlow
// 2.21 by test/interop, see kernels/random_distributions.h for why).
//
//   Tensor w = random_normal({784, 256}, {.stddev = 0.02, .seed = 1});
//   Tensor k = random_uniform({16}, {.maxval = 10, .dtype = DType::kInt64});
//
// Parameters (minval, maxval, mean, stddev) are scalars: literals convert to
// the dtype (1, 0.5), tensors must already have it (TypeError otherwise).
// Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "varstate/random_seed.h"
#include "varstate/tensor.h"
#include "varstate/tensor_shape.h"

namespace varstate {

struct RandomUniformOptions {
  Tensor minval = 0;
  // Exclusive upper bound. Defaults to 1 for floating dtypes; required for
  // integer dtypes.
  std::optional<Tensor> maxval = std::nullopt;
  // float16, bfloat16, float32, float64, int32 or int64.
  DType dtype = DType::kFloat;
  std::optional<int64_t> seed = std::nullopt;
  // Names the op in placement requests and messages.
  std::string name = "random_uniform";
};

struct RandomNormalOptions {
  Tensor mean = 0.0;
  Tensor stddev = 1.0;
  // float16, bfloat16, float32 or float64.
  DType dtype = DType::kFloat;
  std::optional<int64_t> seed = std::nullopt;
  std::string name = {};  // default "random_normal" / "truncated_normal"
};

// Uniform values in [minval, maxval): for floats U[0,1) * (maxval - minval)
// + minval in the dtype's arithmetic; for integers minval + (bits mod
// (maxval - minval)) (a slight modulo bias, as TensorFlow). Throws
// ValueError for an unsupported dtype, for an integer dtype without maxval,
// or for a shape that is not fully defined; InvalidArgumentError when an
// integer range is empty ("Need minval < maxval, got 5 >= 3") or a parameter
// is not a scalar; TypeError when a parameter does not convert to the dtype.
Tensor random_uniform(const TensorShape& shape, const RandomUniformOptions& options = {});

// Normal values (Box-Muller) * stddev + mean. A negative stddev is not an
// error (as in TensorFlow, the values are mirrored). Throws TypeError for a
// non-floating dtype (as TensorFlow) or a parameter that does not convert,
// ValueError for a shape not fully defined, InvalidArgumentError for a
// non-scalar parameter.
Tensor random_normal(const TensorShape& shape, const RandomNormalOptions& options = {});

// Like random_normal, but standard-normal draws with |x| >= 2 are discarded
// and re-drawn, so every value lies strictly within 2 stddev of the mean.
// Same errors.
Tensor truncated_normal(const TensorShape& shape, const RandomNormalOptions& options = {});

}  // namespace varstate
