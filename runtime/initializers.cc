#include "varstate/initializers.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

#include "runtime/random_ops_internal.h"
#include "varstate/cast.h"
#include "varstate/dense_update.h"
#include "varstate/placement.h"

namespace varstate {
namespace {

using internal::RandomDistribution;

std::string dims_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

void check_partition(const TensorShape& shape, const PartitionInfo& p) {
  auto fail = [&](const std::string& why) {
    throw ValueError("initializer: partition_info (full_shape " + p.full_shape.to_string() +
                     ", var_offset " + dims_string(p.var_offset) + ") for shape " +
                     shape.to_string() + ": " + why);
  };
  if (!p.full_shape.is_fully_defined()) fail("the full shape is not fully defined");
  if (p.full_shape.rank() != shape.rank() ||
      static_cast<int>(p.var_offset.size()) != shape.rank()) {
    fail("ranks differ");
  }
  for (int k = 0; k < shape.rank(); ++k) {
    if (p.var_offset[k] < 0 || p.var_offset[k] + shape.dim(k) > p.full_shape.dim(k)) {
      fail("dimension " + std::to_string(k) + " does not fit in the full shape");
    }
  }
}

// The shape the fans are computed from: the full variable's.
const TensorShape& scale_shape(const TensorShape& shape, const PartitionInfo* p) {
  return p ? p->full_shape : shape;
}

struct Fans {
  double in;
  double out;
};

Fans compute_fans(const TensorShape& shape) {
  const auto& d = shape.dims();
  const size_t rank = d.size();
  if (rank == 0) return {1, 1};
  if (rank == 1) return {double(d[0]), double(d[0])};
  if (rank == 2) return {double(d[0]), double(d[1])};
  double receptive = 1;
  for (size_t k = 0; k + 2 < rank; ++k) receptive *= double(d[k]);
  return {double(d[rank - 2]) * receptive, double(d[rank - 1]) * receptive};
}

// Generates the (slice of the) random tensor on the current device.
Tensor generate(RandomDistribution distribution, const char* op_name, const char* op_type,
                const TensorShape& shape, DType dtype, SeedPair seeds, const Tensor& a,
                const Tensor& b, const PartitionInfo* p) {
  Device& device = place({op_name, op_type});
  if (p == nullptr) {
    return internal::generate_random(distribution, dtype, shape, seeds, a, b, device);
  }
  const internal::RandomSlice slice{p->full_shape, p->var_offset};
  return internal::generate_random(distribution, dtype, shape, seeds, a, b, device, &slice);
}

Tensor uniform(const char* what, const TensorShape& shape, DType dtype, SeedPair seeds,
               double limit, const PartitionInfo* p) {
  Tensor lo = internal::scalar_param(Tensor(-limit), dtype, what, "minval");
  Tensor hi = internal::scalar_param(Tensor(limit), dtype, what, "maxval");
  return generate(RandomDistribution::kUniform, "random_uniform", "RandomUniform", shape, dtype,
                  seeds, lo, hi, p);
}

Tensor normal(RandomDistribution distribution, const char* what, const TensorShape& shape,
              DType dtype, SeedPair seeds, double stddev, const PartitionInfo* p) {
  Tensor mean = internal::scalar_param(Tensor(0.0), dtype, what, "mean");
  Tensor sd = internal::scalar_param(Tensor(stddev), dtype, what, "stddev");
  const bool truncated = distribution == RandomDistribution::kTruncatedNormal;
  return generate(distribution, truncated ? "truncated_normal" : "random_normal",
                  truncated ? "TruncatedNormal" : "RandomStandardNormal", shape, dtype, seeds, mean,
                  sd, p);
}

// A typed value converted to `dtype`: literals as tf.constant converts them,
// typed tensors (arrays) cast.
Tensor value_as(const Tensor& value, DType dtype, std::string_view what) {
  if (value.weakly_typed() || value.dtype() == dtype || value.dtype() == DType::kString ||
      dtype == DType::kString) {
    return convert_to_dtype(value, dtype, what);
  }
  return cast_tensor(value, dtype);
}

Tensor filled_on(Device& device, DType dtype, const TensorShape& shape, const Tensor& scalar) {
  Tensor out(dtype, shape, device);
  assign(out, scalar);
  return out;
}

Tensor constant_value(const Tensor& value, const TensorShape& shape, DType dtype) {
  const char* what = "constant_initializer";
  Tensor v = value_as(value, dtype, what).to_host();
  const int64_t n = shape.num_elements();
  const int64_t m = v.num_elements();
  if (m > n && n > 0) {
    throw ValueError("Too many elements provided. Needed at most " + std::to_string(n) +
                     ", but received " + std::to_string(m));
  }
  Device& device = place({"Const", "Const"}, dtype);
  if (n == 0) return Tensor(dtype, shape, device);
  if (m == 0) return Tensor::zeros(dtype, shape, device);
  if (m == 1) return filled_on(device, dtype, shape, v.reshaped(TensorShape{}));
  // A list: its values, then the last one repeated (built on the host: such
  // values are short, and the copy is one transfer).
  Tensor host(dtype, shape);
  dispatch_all(dtype, what, [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(v.raw_data());
    T* dst = static_cast<T*>(host.raw_data());
    std::copy(src, src + m, dst);
    std::fill(dst + m, dst + n, src[m - 1]);
    return 0;
  });
  return device.is_cpu() ? host : host.to(device);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Tensor Initializer::operator()(const TensorShape& shape, DType dtype,
                               const PartitionInfo* partition_info) const {
  if (!fn_) throw ValueError("initializer: calling an empty Initializer");
  if (!shape.is_fully_defined()) {
    throw ValueError("initializer: shape " + shape.to_string() + " is not fully defined");
  }
  if (partition_info) check_partition(shape, *partition_info);
  return fn_(shape, dtype, partition_info);
}

InitialValueFn bind(const Initializer& init, TensorShape shape, DType dtype,
                    std::optional<PartitionInfo> partition_info) {
  return [init, shape = std::move(shape), dtype, partition_info = std::move(partition_info)] {
    return init(shape, dtype, partition_info ? &*partition_info : nullptr);
  };
}

Initializer constant_initializer(Tensor value, DType dtype) {
  if (!value.valid()) throw ValueError("constant_initializer: the value is an empty tensor handle");
  value = value.to_host();
  return Initializer(dtype, [value](const TensorShape& shape, DType dt, const PartitionInfo*) {
    return constant_value(value, shape, dt);
  });
}

Initializer zeros_initializer(DType dtype) {
  return Initializer(dtype, [](const TensorShape& shape, DType dt, const PartitionInfo*) {
    return Tensor::zeros(dt, shape, place({"zeros", "Fill"}, dt));
  });
}

Initializer ones_initializer(DType dtype) {
  return Initializer(dtype, [](const TensorShape& shape, DType dt, const PartitionInfo*) {
    return filled_on(place({"ones", "Fill"}, dt), dt, shape, Tensor(1).cast(dt));
  });
}

namespace {

Initializer normal_family(RandomDistribution distribution, const char* what,
                          const RandomNormalInitializerOptions& o) {
  internal::check_float_dtype(o.dtype, what);
  internal::scalar_param(o.mean, o.dtype, what, "mean");
  internal::scalar_param(o.stddev, o.dtype, what, "stddev");
  const std::optional<int64_t> op_seed = o.seed;
  Tensor mean = o.mean.to_host(), stddev = o.stddev.to_host();
  return Initializer(o.dtype, [=](const TensorShape& shape, DType dtype, const PartitionInfo* p) {
    internal::check_float_dtype(dtype, what);
    const SeedPair seeds = resolve_seed(op_seed);  // a new random op per call
    Tensor m = internal::scalar_param(mean, dtype, what, "mean");
    Tensor s = internal::scalar_param(stddev, dtype, what, "stddev");
    const bool truncated = distribution == RandomDistribution::kTruncatedNormal;
    return generate(distribution, truncated ? "truncated_normal" : "random_normal",
                    truncated ? "TruncatedNormal" : "RandomStandardNormal", shape, dtype, seeds, m,
                    s, p);
  });
}

}  // namespace

Initializer random_normal_initializer(const RandomNormalInitializerOptions& options) {
  return normal_family(RandomDistribution::kNormal, "random_normal_initializer", options);
}

Initializer truncated_normal_initializer(const RandomNormalInitializerOptions& options) {
  return normal_family(RandomDistribution::kTruncatedNormal, "truncated_normal_initializer",
                       options);
}

Initializer random_uniform_initializer(const RandomUniformInitializerOptions& o) {
  const char* what = "random_uniform_initializer";
  const bool has_max = o.maxval.has_value();
  internal::check_uniform_dtype(o.dtype, has_max, what);
  const Tensor minval = o.minval.valid() ? o.minval.to_host() : o.minval;
  const Tensor maxval = has_max ? (o.maxval->valid() ? o.maxval->to_host() : *o.maxval) : Tensor(1);
  internal::check_uniform_range(internal::scalar_param(minval, o.dtype, what, "minval"),
                                internal::scalar_param(maxval, o.dtype, what, "maxval"), what);
  const std::optional<int64_t> op_seed = o.seed;
  return Initializer(o.dtype, [=](const TensorShape& shape, DType dtype, const PartitionInfo* p) {
    internal::check_uniform_dtype(dtype, has_max, what);
    Tensor lo = internal::scalar_param(minval, dtype, what, "minval");
    Tensor hi = internal::scalar_param(maxval, dtype, what, "maxval");
    internal::check_uniform_range(lo, hi, what);
    const SeedPair seeds = resolve_seed(op_seed);  // a new random op per call
    return generate(RandomDistribution::kUniform, "random_uniform",
                    dtype_is_integer(dtype) ? "RandomUniformInt" : "RandomUniform", shape, dtype,
                    seeds, lo, hi, p);
  });
}

Initializer uniform_unit_scaling_initializer(const UniformUnitScalingOptions& o) {
  const char* what = "uniform_unit_scaling_initializer";
  internal::check_float_dtype(o.dtype, what);
  const std::optional<int64_t> op_seed = o.seed;
  const double factor = o.factor;
  return Initializer(o.dtype, [=](const TensorShape& shape, DType dtype, const PartitionInfo* p) {
    internal::check_float_dtype(dtype, what);
    const auto& dims = scale_shape(shape, p).dims();
    double input_size = 1.0;
    for (size_t k = 0; k + 1 < dims.size(); ++k) input_size *= double(dims[k]);
    input_size = std::max(input_size, 1.0);
    const SeedPair seeds = resolve_seed(op_seed);  // a new random op per call
    return uniform(what, shape, dtype, seeds, std::sqrt(3.0 / input_size) * factor, p);
  });
}

Initializer variance_scaling_initializer(const VarianceScalingOptions& o) {
  const char* what = "variance_scaling_initializer";
  if (!(o.scale > 0.0)) throw ValueError(std::string(what) + ": `scale` must be positive float.");
  if (o.mode != "fan_in" && o.mode != "fan_out" && o.mode != "fan_avg") {
    throw ValueError(std::string(what) + ": Invalid `mode` argument: " + o.mode);
  }
  const std::string distribution = lower(o.distribution);
  if (distribution != "normal" && distribution != "truncated_normal" &&
      distribution != "untruncated_normal" && distribution != "uniform") {
    throw ValueError(std::string(what) + ": Invalid `distribution` argument: " + o.distribution);
  }
  internal::check_float_dtype(o.dtype, what);
  const std::optional<int64_t> op_seed = o.seed;
  const double scale = o.scale;
  const std::string mode = o.mode;
  return Initializer(o.dtype, [=](const TensorShape& shape, DType dtype, const PartitionInfo* p) {
    internal::check_float_dtype(dtype, what);
    const Fans fans = compute_fans(scale_shape(shape, p));
    double n = mode == "fan_in"    ? fans.in
               : mode == "fan_out" ? fans.out
                                   : (fans.in + fans.out) / 2.0;
    const double s = scale / std::max(1.0, n);
    const SeedPair seeds = resolve_seed(op_seed);  // a new random op per call
    if (distribution == "uniform") return uniform(what, shape, dtype, seeds, std::sqrt(3.0 * s), p);
    if (distribution == "untruncated_normal") {
      return normal(RandomDistribution::kNormal, what, shape, dtype, seeds, std::sqrt(s), p);
    }
    // Divided by the stddev of a unit normal truncated to [-2, 2].
    return normal(RandomDistribution::kTruncatedNormal, what, shape, dtype, seeds,
                  std::sqrt(s) / 0.87962566103423978, p);
  });
}

Initializer glorot_uniform_initializer(const GlorotOptions& o) {
  return variance_scaling_initializer({.scale = 1.0,
                                       .mode = "fan_avg",
                                       .distribution = "uniform",
                                       .seed = o.seed,
                                       .dtype = o.dtype});
}

Initializer glorot_normal_initializer(const GlorotOptions& o) {
  return variance_scaling_initializer({.scale = 1.0,
                                       .mode = "fan_avg",
                                       .distribution = "truncated_normal",
                                       .seed = o.seed,
                                       .dtype = o.dtype});
}

}  // namespace varstate
