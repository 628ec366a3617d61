#include "varstate/initializers.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

#include "runtime/initializer_recipe.h"
#include "runtime/random_ops_internal.h"
#include "varstate/cast.h"
#include "varstate/dense_update.h"
#include "varstate/placement.h"

namespace varstate {
namespace {

using internal::InitializerKind;
using internal::InitializerRecipe;
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
Tensor generate(const internal::RandomOpForm& form, const TensorShape& shape, DType dtype,
                SeedPair seeds, const PartitionInfo* p, int64_t run) {
  const bool uniform = form.distribution == RandomDistribution::kUniform;
  const bool truncated = form.distribution == RandomDistribution::kTruncatedNormal;
  Device& device = place({uniform     ? "random_uniform"
                          : truncated ? "truncated_normal"
                                      : "random_normal",
                          form.op_type});
  if (p == nullptr) {
    return internal::generate_random(form.distribution, dtype, shape, seeds, form.a, form.b, device,
                                     nullptr, run);
  }
  const internal::RandomSlice slice{p->full_shape, p->var_offset};
  return internal::generate_random(form.distribution, dtype, shape, seeds, form.a, form.b, device,
                                   &slice, run);
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
  return host.on(device);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

namespace internal {

struct InitializerAccess {
  static const std::shared_ptr<const InitializerRecipe>& recipe(const Initializer& init) {
    return init.recipe_;
  }
  static Initializer make(std::shared_ptr<const InitializerRecipe> recipe) {
    Initializer init;
    init.dtype_ = recipe->dtype;
    init.recipe_ = std::move(recipe);
    return init;
  }
};

bool is_random(InitializerKind kind) {
  return kind == InitializerKind::kRandomUniform || kind == InitializerKind::kRandomNormal ||
         kind == InitializerKind::kTruncatedNormal ||
         kind == InitializerKind::kUniformUnitScaling || kind == InitializerKind::kVarianceScaling;
}

const std::shared_ptr<const InitializerRecipe>& recipe_of(const Initializer& init) {
  return InitializerAccess::recipe(init);
}

Initializer make_initializer(std::shared_ptr<const InitializerRecipe> recipe) {
  return InitializerAccess::make(std::move(recipe));
}

RandomOpForm random_op_form(const InitializerRecipe& r, const TensorShape& full_shape,
                            DType dtype) {
  const char* what = "initializer";
  auto uniform = [&](double limit) {
    return RandomOpForm{RandomDistribution::kUniform, "RandomUniform",
                        scalar_param(Tensor(-limit), dtype, what, "minval"),
                        scalar_param(Tensor(limit), dtype, what, "maxval")};
  };
  auto normal = [&](RandomDistribution distribution, double stddev) {
    return RandomOpForm{
        distribution,
        distribution == RandomDistribution::kNormal ? "RandomStandardNormal" : "TruncatedNormal",
        scalar_param(Tensor(0.0), dtype, what, "mean"),
        scalar_param(Tensor(stddev), dtype, what, "stddev")};
  };
  switch (r.kind) {
    case InitializerKind::kRandomUniform:
      return {RandomDistribution::kUniform,
              dtype_is_integer(dtype) ? "RandomUniformInt" : "RandomUniform",
              scalar_param(r.a, dtype, "random_uniform_initializer", "minval"),
              scalar_param(r.b, dtype, "random_uniform_initializer", "maxval")};
    case InitializerKind::kRandomNormal:
      return {RandomDistribution::kNormal, "RandomStandardNormal",
              scalar_param(r.a, dtype, "random_normal_initializer", "mean"),
              scalar_param(r.b, dtype, "random_normal_initializer", "stddev")};
    case InitializerKind::kTruncatedNormal:
      return {RandomDistribution::kTruncatedNormal, "TruncatedNormal",
              scalar_param(r.a, dtype, "truncated_normal_initializer", "mean"),
              scalar_param(r.b, dtype, "truncated_normal_initializer", "stddev")};
    case InitializerKind::kUniformUnitScaling: {
      const auto& dims = full_shape.dims();
      double input_size = 1.0;
      for (size_t k = 0; k + 1 < dims.size(); ++k) input_size *= double(dims[k]);
      return uniform(std::sqrt(3.0 / std::max(input_size, 1.0)) * r.scale);
    }
    case InitializerKind::kVarianceScaling: {
      const Fans fans = compute_fans(full_shape);
      const double n = r.mode == "fan_in"    ? fans.in
                       : r.mode == "fan_out" ? fans.out
                                             : (fans.in + fans.out) / 2.0;
      const double s = r.scale / std::max(1.0, n);
      if (r.distribution == "uniform") return uniform(std::sqrt(3.0 * s));
      if (r.distribution == "untruncated_normal") {
        return normal(RandomDistribution::kNormal, std::sqrt(s));
      }
      // Divided by the stddev of a unit normal truncated to [-2, 2].
      return normal(RandomDistribution::kTruncatedNormal, std::sqrt(s) / 0.87962566103423978);
    }
    default:
      throw InternalError("initializer: random_op_form of a recipe that is not random");
  }
}

Tensor run_recipe(const InitializerRecipe& r, const TensorShape& shape, DType dtype,
                  const PartitionInfo* p, SeedPair seeds, int64_t run) {
  switch (r.kind) {
    case InitializerKind::kCustom:
      return r.custom(shape, dtype, p);
    case InitializerKind::kZeros:
      return Tensor::zeros(dtype, shape, place({"zeros", "Fill"}, dtype));
    case InitializerKind::kOnes:
      return filled_on(place({"ones", "Fill"}, dtype), dtype, shape, Tensor(1).cast(dtype));
    case InitializerKind::kConstant:
      return constant_value(r.value, shape, dtype);
    default:
      break;
  }
  const char* what = r.kind == InitializerKind::kRandomUniform     ? "random_uniform_initializer"
                     : r.kind == InitializerKind::kRandomNormal    ? "random_normal_initializer"
                     : r.kind == InitializerKind::kTruncatedNormal ? "truncated_normal_initializer"
                     : r.kind == InitializerKind::kUniformUnitScaling
                         ? "uniform_unit_scaling_initializer"
                         : "variance_scaling_initializer";
  if (r.kind == InitializerKind::kRandomUniform) {
    check_uniform_dtype(dtype, r.has_maxval, what);
  } else {
    check_float_dtype(dtype, what);
  }
  const RandomOpForm form = random_op_form(r, scale_shape(shape, p), dtype);
  if (r.kind == InitializerKind::kRandomUniform) check_uniform_range(form.a, form.b, what);
  return generate(form, shape, dtype, seeds, p, run);
}

BoundInitializer::BoundInitializer(Initializer init, TensorShape shape, DType dtype,
                                   std::optional<PartitionInfo> partition_info)
    : init_(std::move(init)),
      shape_(std::move(shape)),
      dtype_(dtype),
      partition_info_(std::move(partition_info)) {}

SeedPair BoundInitializer::seeds_locked() {
  if (!seeds_) {
    const InitializerRecipe& r = recipe();
    seeds_ = r.seeds ? *r.seeds : is_random(r.kind) ? resolve_seed(r.op_seed) : SeedPair{};
  }
  return *seeds_;
}

SeedPair BoundInitializer::seeds() {
  std::lock_guard lock(mu_);
  return seeds_locked();
}

Tensor BoundInitializer::run() {
  const PartitionInfo* p = partition_info_ ? &*partition_info_ : nullptr;
  // Validates before the run counts.
  if (!init_) throw ValueError("initializer: calling an empty Initializer");
  if (!shape_.is_fully_defined()) {
    throw ValueError("initializer: shape " + shape_.to_string() + " is not fully defined");
  }
  if (p) check_partition(shape_, *p);
  SeedPair seeds;
  int64_t run;
  {
    std::lock_guard lock(mu_);
    seeds = seeds_locked();
    run = runs_;
  }
  Tensor out = run_recipe(recipe(), shape_, dtype_, p, seeds, run);
  std::lock_guard lock(mu_);
  runs_ = std::max(runs_, run + 1);
  return out;
}

std::shared_ptr<BoundInitializer> bound_initializer(const InitialValueFn& fn) {
  const auto* bound = fn.target<BoundInitializerFn>();
  return bound ? bound->bound : nullptr;
}

}  // namespace internal

Initializer::Initializer(DType dtype, Fn fn) : dtype_(dtype) {
  if (!fn) return;
  auto r = std::make_shared<InitializerRecipe>();
  r->dtype = dtype;
  r->custom = std::move(fn);
  recipe_ = std::move(r);
}

Tensor Initializer::operator()(const TensorShape& shape, DType dtype,
                               const PartitionInfo* partition_info) const {
  if (!recipe_) throw ValueError("initializer: calling an empty Initializer");
  if (!shape.is_fully_defined()) {
    throw ValueError("initializer: shape " + shape.to_string() + " is not fully defined");
  }
  if (partition_info) check_partition(shape, *partition_info);
  const InitializerRecipe& r = *recipe_;
  SeedPair seeds;
  if (r.seeds) {
    seeds = *r.seeds;
  } else if (internal::is_random(r.kind)) {
    seeds = resolve_seed(r.op_seed);  // a new random op per call
  }
  return internal::run_recipe(r, shape, dtype, partition_info, seeds, 0);
}

InitialValueFn bind(const Initializer& init, TensorShape shape, DType dtype,
                    std::optional<PartitionInfo> partition_info) {
  return internal::BoundInitializerFn{std::make_shared<internal::BoundInitializer>(
      init, std::move(shape), dtype, std::move(partition_info))};
}

namespace {
Initializer from_recipe(InitializerRecipe r) {
  return internal::make_initializer(std::make_shared<const InitializerRecipe>(std::move(r)));
}
}  // namespace

Initializer constant_initializer(Tensor value, DType dtype) {
  if (!value.valid()) throw ValueError("constant_initializer: the value is an empty tensor handle");
  return from_recipe(
      {.kind = InitializerKind::kConstant, .dtype = dtype, .value = value.to_host()});
}

Initializer zeros_initializer(DType dtype) {
  return from_recipe({.kind = InitializerKind::kZeros, .dtype = dtype});
}

Initializer ones_initializer(DType dtype) {
  return from_recipe({.kind = InitializerKind::kOnes, .dtype = dtype});
}

namespace {

Initializer normal_family(InitializerKind kind, const char* what,
                          const RandomNormalInitializerOptions& o) {
  internal::check_float_dtype(o.dtype, what);
  internal::scalar_param(o.mean, o.dtype, what, "mean");
  internal::scalar_param(o.stddev, o.dtype, what, "stddev");
  return from_recipe({.kind = kind,
                      .dtype = o.dtype,
                      .a = o.mean.to_host(),
                      .b = o.stddev.to_host(),
                      .op_seed = o.seed});
}

}  // namespace

Initializer random_normal_initializer(const RandomNormalInitializerOptions& options) {
  return normal_family(InitializerKind::kRandomNormal, "random_normal_initializer", options);
}

Initializer truncated_normal_initializer(const RandomNormalInitializerOptions& options) {
  return normal_family(InitializerKind::kTruncatedNormal, "truncated_normal_initializer", options);
}

Initializer random_uniform_initializer(const RandomUniformInitializerOptions& o) {
  const char* what = "random_uniform_initializer";
  const bool has_max = o.maxval.has_value();
  internal::check_uniform_dtype(o.dtype, has_max, what);
  const Tensor minval = o.minval.valid() ? o.minval.to_host() : o.minval;
  const Tensor maxval = has_max ? (o.maxval->valid() ? o.maxval->to_host() : *o.maxval) : Tensor(1);
  internal::check_uniform_range(internal::scalar_param(minval, o.dtype, what, "minval"),
                                internal::scalar_param(maxval, o.dtype, what, "maxval"), what);
  return from_recipe({.kind = InitializerKind::kRandomUniform,
                      .dtype = o.dtype,
                      .a = minval,
                      .b = maxval,
                      .has_maxval = has_max,
                      .op_seed = o.seed});
}

Initializer uniform_unit_scaling_initializer(const UniformUnitScalingOptions& o) {
  internal::check_float_dtype(o.dtype, "uniform_unit_scaling_initializer");
  return from_recipe({.kind = InitializerKind::kUniformUnitScaling,
                      .dtype = o.dtype,
                      .scale = o.factor,
                      .op_seed = o.seed});
}

Initializer variance_scaling_initializer(const VarianceScalingOptions& o) {
  const char* what = "variance_scaling_initializer";
  if (!(o.scale > 0.0)) throw ValueError(std::string(what) + ": `scale` must be positive float.");
  if (o.mode != "fan_in" && o.mode != "fan_out" && o.mode != "fan_avg") {
    throw ValueError(std::string(what) + ": Invalid `mode` argument: " + o.mode);
  }
  std::string distribution = lower(o.distribution);
  if (distribution != "normal" && distribution != "truncated_normal" &&
      distribution != "untruncated_normal" && distribution != "uniform") {
    throw ValueError(std::string(what) + ": Invalid `distribution` argument: " + o.distribution);
  }
  internal::check_float_dtype(o.dtype, what);
  return from_recipe({.kind = InitializerKind::kVarianceScaling,
                      .dtype = o.dtype,
                      .scale = o.scale,
                      .mode = o.mode,
                      .distribution = std::move(distribution),
                      .op_seed = o.seed});
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
