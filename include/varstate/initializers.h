// Initializers: TensorFlow's tf.*_initializer functions.
//
// An Initializer is a callable bound later to a shape, a dtype and, for a
// partition of a larger variable, a PartitionInfo; each call produces a new
// tensor on the device the current device scope picks (a Variable computes
// its initial value under a scope of its own device, so the values are made
// there: GPU kernels on a GPU, no host generation and copy).
//
//   Initializer init = glorot_uniform_initializer({.seed = 7});
//   Tensor w = init({784, 256});                      // float32
//   Variable v(bind(init, {784, 256}, DType::kFloat),
//              {.name = "w", .dtype = DType::kFloat, .expected_shape = TensorShape{784, 256}});
//
// Seeds. As in TensorFlow, each call of a random initializer is a new
// random op: it resolves its seed pair (varstate/random_seed.h: graph seed +
// op seed) when called. With an op seed every call gives the same values
// (and the partitions of a variable initialized with PartitionInfo hold
// exactly the slices of the tensor the unpartitioned variable would get,
// whatever the number of partitions and whichever devices they are on).
// With only a graph seed each call takes the next value of the graph's op
// counter, and with no seed each call draws a fresh pair, so one initializer
// used for two variables gives them different values (no symmetric
// weights); a fresh graph built the same way repeats the graph-seeded ones.
//
// A part is generated directly from the element indices it covers in the
// full tensor (the generator is counter-based: element i depends only on the
// seeds and i). A part split along axis 0 is one contiguous run, one kernel
// call; a part split along axis k > 0 is made of prod(shape[0..k)) runs, one
// kernel call each (so on a GPU prefer axis-0 partitions of tall tensors).
//
// Fans (variance_scaling_initializer, glorot_*, uniform_unit_scaling) are
// computed from the full shape when a PartitionInfo is given.
//
// Errors: factories and calls validate everything before generating. The
// float-only initializers throw ValueError ("Expected floating point type,
// got int32.") for a non-floating dtype, at creation or call. A call throws
// ValueError for a shape that is not fully defined or a PartitionInfo that
// does not fit it. Initializers are immutable and thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "varstate/random_seed.h"
#include "varstate/tensor.h"
#include "varstate/tensor_shape.h"
#include "varstate/variable.h"

namespace varstate {

// The tensor being initialized is the part at var_offset of a variable of
// full_shape (TensorFlow's _PartitionInfo). Ranks must match.
struct PartitionInfo {
  TensorShape full_shape;
  std::vector<int64_t> var_offset;
};

namespace internal {
struct InitializerRecipe;
struct InitializerAccess;
}  // namespace internal

// An initializer is a recipe (its kind, parameters and op seed), not a
// value: a Variable made from bind(init, ...) keeps the recipe and computes
// its value only when its initializer Op runs (TensorFlow keeps the
// initializer op, not its output). Meta graphs export the recipe as
// TensorFlow's ops (varstate/meta_graph.h).
class Initializer {
 public:
  // What a custom initializer runs: (shape, dtype, partition_info or
  // nullptr) -> tensor on the current device. Called with arguments already
  // validated. A custom initializer has no op form in a meta graph.
  using Fn = std::function<Tensor(const TensorShape&, DType, const PartitionInfo*)>;

  Initializer() = default;  // empty: calling it throws ValueError
  Initializer(DType dtype, Fn fn);

  // A tensor of `shape` (fully defined) and `dtype` (default: the dtype the
  // initializer was created with). With partition_info, the part of the full
  // variable's value at its var_offset. Each call is a new op: a random
  // initializer resolves its seed pair per call (see Seeds above).
  Tensor operator()(const TensorShape& shape) const { return (*this)(shape, dtype_); }
  Tensor operator()(const TensorShape& shape, DType dtype,
                    const PartitionInfo* partition_info = nullptr) const;

  DType dtype() const { return dtype_; }
  explicit operator bool() const { return static_cast<bool>(recipe_); }

 private:
  friend struct internal::InitializerAccess;
  DType dtype_ = DType::kFloat;
  std::shared_ptr<const internal::InitializerRecipe> recipe_;
};

// A Variable's deferred initial value: the initializer's op for this shape,
// dtype and partition. Its first run resolves the seed pair (and advances
// the graph's op counter when only a graph seed is set); each later run is
// a new run of the same op: a random initializer draws new values, as
// TensorFlow's random op does when its initializer runs again (the values
// of run k are those TensorFlow's op gives on its (k+1)-th run: its Philox
// counter advanced by 256 samples per element of the full variable per
// run). The first run's values depend only on the seeds, and are the same
// on the CPU and on a GPU and whatever the partitioning.
InitialValueFn bind(const Initializer& init, TensorShape shape, DType dtype,
                    std::optional<PartitionInfo> partition_info = {});

// --- constant -----------------------------------------------------------------

// Fills the tensor with `value`: a scalar is repeated; a list or tensor is
// laid out in row-major order and, when shorter than the shape, its last
// element repeats for the remaining entries (an empty value gives zeros).
// Literals convert to the dtype (a float literal does not become an integer:
// TypeError); a typed tensor is cast. A call with more elements than the
// shape holds throws ValueError("Too many elements provided. Needed at most
// 6, but received 8"). partition_info is ignored: each part starts from the
// value's first element, as in TensorFlow.
//   constant_initializer({0, 1, 2, 3, 4, 5, 6, 7})({3, 4})
//     -> [[0 1 2 3] [4 5 6 7] [7 7 7 7]]
Initializer constant_initializer(Tensor value = 0, DType dtype = DType::kFloat);
Initializer zeros_initializer(DType dtype = DType::kFloat);
Initializer ones_initializer(DType dtype = DType::kFloat);

// --- random -------------------------------------------------------------------

struct RandomNormalInitializerOptions {
  Tensor mean = 0.0;
  Tensor stddev = 1.0;
  std::optional<int64_t> seed = std::nullopt;
  DType dtype = DType::kFloat;  // floating dtypes only
};
// random_normal values (varstate/random_ops.h).
Initializer random_normal_initializer(const RandomNormalInitializerOptions& options = {});
// truncated_normal values: draws beyond 2 stddev are discarded and re-drawn.
Initializer truncated_normal_initializer(const RandomNormalInitializerOptions& options = {});

struct RandomUniformInitializerOptions {
  Tensor minval = 0;
  // Defaults to 1 for floating dtypes; required for int32/int64.
  std::optional<Tensor> maxval = std::nullopt;
  std::optional<int64_t> seed = std::nullopt;
  DType dtype = DType::kFloat;  // float16/bfloat16/float32/float64/int32/int64
};
// random_uniform values in [minval, maxval). Throws ValueError for another
// dtype or an integer dtype without maxval, InvalidArgumentError for an
// empty integer range.
Initializer random_uniform_initializer(const RandomUniformInitializerOptions& options = {});

struct UniformUnitScalingOptions {
  double factor = 1.0;
  std::optional<int64_t> seed = std::nullopt;
  DType dtype = DType::kFloat;
};
// U(-m, m) with m = factor * sqrt(3 / input_size), input_size = the product
// of all dimensions but the last (at least 1).
Initializer uniform_unit_scaling_initializer(const UniformUnitScalingOptions& options = {});

struct VarianceScalingOptions {
  double scale = 1.0;  // > 0
  // "fan_in", "fan_out" or "fan_avg".
  std::string mode = "fan_in";
  // "truncated_normal" (alias "normal"), "untruncated_normal" or "uniform";
  // case-insensitive.
  std::string distribution = "truncated_normal";
  std::optional<int64_t> seed = std::nullopt;
  DType dtype = DType::kFloat;
};
// With n = fan_in, fan_out or (fan_in + fan_out) / 2 per mode (at least 1)
// and s = scale / n: truncated normal with stddev sqrt(s) / 0.8796... (the
// stddev of a unit normal truncated to +-2, so the result has variance s),
// normal with stddev sqrt(s), or U(-sqrt(3 s), sqrt(3 s)). Fans: rank 0 ->
// (1, 1); rank 1 -> (d0, d0); rank 2 -> (d0, d1); rank >= 3 (convolution
// kernels) -> (d[-2] * r, d[-1] * r), r the product of the other dims.
// Throws ValueError for scale <= 0 ("`scale` must be positive float."), an
// unknown mode ("Invalid `mode` argument: ...") or distribution.
Initializer variance_scaling_initializer(const VarianceScalingOptions& options = {});

struct GlorotOptions {
  std::optional<int64_t> seed = std::nullopt;
  DType dtype = DType::kFloat;
};
// Xavier/Glorot: variance_scaling with scale 1 and mode "fan_avg";
// U(-limit, limit) with limit = sqrt(6 / (fan_in + fan_out)), or a
// truncated normal with variance 2 / (fan_in + fan_out).
Initializer glorot_uniform_initializer(const GlorotOptions& options = {});
Initializer glorot_normal_initializer(const GlorotOptions& options = {});

}  // namespace varstate
