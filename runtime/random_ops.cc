#include "varstate/random_ops.h"

#include <string>
#include <type_traits>

#include "kernels/cpu/random.h"
#include "runtime/random_ops_internal.h"
#include "varstate/placement.h"
#ifdef VARSTATE_HAVE_CUDA
#include "kernels/cuda/random.h"
#endif

namespace varstate {
namespace internal {
namespace {

// The dtypes the random kernels are instantiated for.
template <typename Fn>
void dispatch_random(DType dtype, std::string_view what, Fn&& fn) {
  switch (dtype) {
    case DType::kHalf:
      return fn(half{});
    case DType::kBFloat16:
      return fn(bfloat16{});
    case DType::kFloat:
      return fn(float{});
    case DType::kDouble:
      return fn(double{});
    case DType::kInt32:
      return fn(int32_t{});
    case DType::kInt64:
      return fn(int64_t{});
    default:
      throw ValueError(std::string(what) + ": Invalid dtype " + std::string(dtype_name(dtype)));
  }
}

// Fills out[0, n) with elements [first, first + n) of the full tensor.
template <typename T>
void fill_run(RandomDistribution distribution, Device& device, T* out, int64_t n, int64_t first,
              SeedPair seeds, T a, T b) {
  const auto seed = static_cast<uint64_t>(seeds.seed);
  const auto seed2 = static_cast<uint64_t>(seeds.seed2);
  if (device.is_cpu()) {
    if constexpr (std::is_integral_v<T>) {
      kernels::cpu::random_uniform<T>(out, n, first, seed, seed2, a, b);
    } else if (distribution == RandomDistribution::kUniform) {
      kernels::cpu::random_uniform<T>(out, n, first, seed, seed2, a, b);
    } else if (distribution == RandomDistribution::kNormal) {
      kernels::cpu::random_normal<T>(out, n, first, seed, seed2, a, b);
    } else {
      kernels::cpu::truncated_normal<T>(out, n, first, seed, seed2, a, b);
    }
    return;
  }
#ifdef VARSTATE_HAVE_CUDA
  cudaStream_t stream = device.stream();
  DeviceGuard guard(device);
  if constexpr (std::is_integral_v<T>) {
    kernels::cuda::random_uniform<T>(out, n, first, seed, seed2, a, b, stream);
  } else if (distribution == RandomDistribution::kUniform) {
    kernels::cuda::random_uniform<T>(out, n, first, seed, seed2, a, b, stream);
  } else if (distribution == RandomDistribution::kNormal) {
    kernels::cuda::random_normal<T>(out, n, first, seed, seed2, a, b, stream);
  } else {
    kernels::cuda::truncated_normal<T>(out, n, first, seed, seed2, a, b, stream);
  }
#else
  throw InternalError("random ops: device " + device.name() + " needs CUDA, not built in");
#endif
}

std::string dims_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

void check_slice(const TensorShape& shape, const RandomSlice& slice) {
  const TensorShape& full = slice.full_shape;
  auto fail = [&](const std::string& why) {
    throw ValueError("partition of shape " + shape.to_string() + " at offset " +
                     dims_string(slice.offset) + " of full shape " + full.to_string() + ": " + why);
  };
  if (!full.is_fully_defined()) fail("the full shape is not fully defined");
  if (full.rank() != shape.rank() || static_cast<int>(slice.offset.size()) != shape.rank()) {
    fail("ranks differ");
  }
  for (int k = 0; k < shape.rank(); ++k) {
    if (slice.offset[k] < 0 || slice.offset[k] + shape.dim(k) > full.dim(k)) {
      fail("dimension " + std::to_string(k) + " does not fit");
    }
  }
}

// Calls fn(out_offset, first_element, length) for each maximal run of the
// slice that is contiguous in the full tensor, in row-major order. Let j be
// the last axis where the slice is narrower than the full shape: the slice
// dims after j are whole, so each index of the axes before j gives one run
// of shape[j] * (elements per index of j). A partition along axis 0 is one
// run; along axis j > 0 it is prod(shape[0..j)) runs.
template <typename Fn>
void for_each_run(const TensorShape& shape, const RandomSlice* slice, Fn&& fn) {
  const int64_t n = shape.num_elements();
  if (n == 0) return;
  if (slice == nullptr) return fn(int64_t{0}, int64_t{0}, n);
  const auto& full = slice->full_shape.dims();
  const auto& offset = slice->offset;
  const int rank = shape.rank();
  std::vector<int64_t> stride(rank, 1);
  for (int k = rank - 2; k >= 0; --k) stride[k] = stride[k + 1] * full[k + 1];
  int j = rank - 1;
  while (j >= 0 && shape.dim(j) == full[j]) --j;
  if (j < 0) return fn(int64_t{0}, int64_t{0}, n);  // the whole tensor
  const int64_t run = shape.dim(j) * stride[j];
  std::vector<int64_t> index(j, 0);  // position in the slice's axes [0, j)
  for (int64_t out = 0; out < n; out += run) {
    int64_t first = offset[j] * stride[j];
    for (int k = 0; k < j; ++k) first += (offset[k] + index[k]) * stride[k];
    fn(out, first, run);
    for (int k = j - 1; k >= 0; --k) {
      if (++index[k] < shape.dim(k)) break;
      index[k] = 0;
    }
  }
}

}  // namespace

void check_float_dtype(DType dtype, std::string_view what) {
  if (dtype_is_floating(dtype)) return;
  throw ValueError(std::string(what) + ": Expected floating point type, got " +
                   std::string(dtype_name(dtype)) + ".");
}

void check_uniform_dtype(DType dtype, bool has_maxval, std::string_view what) {
  const bool is_int = dtype == DType::kInt32 || dtype == DType::kInt64;
  if (!is_int && !dtype_is_floating(dtype)) {
    throw ValueError(std::string(what) + ": Invalid dtype " + std::string(dtype_name(dtype)));
  }
  if (is_int && !has_maxval) {
    throw ValueError(std::string(what) + ": Must specify maxval for integer dtype " +
                     std::string(dtype_name(dtype)));
  }
}

void check_uniform_range(const Tensor& lo, const Tensor& hi, std::string_view what) {
  if (!dtype_is_integer(lo.dtype())) return;
  const int64_t l = lo.cast(DType::kInt64).scalar<int64_t>();
  const int64_t h = hi.cast(DType::kInt64).scalar<int64_t>();
  if (l >= h) {
    throw InvalidArgumentError(std::string(what) + ": Need minval < maxval, got " +
                               std::to_string(l) + " >= " + std::to_string(h));
  }
}

Tensor scalar_param(const Tensor& param, DType dtype, std::string_view what,
                    std::string_view param_name) {
  const std::string who = std::string(what) + ": " + std::string(param_name);
  if (!param.valid()) throw InvalidArgumentError(who + " is an empty tensor handle");
  if (param.num_elements() != 1) {
    throw InvalidArgumentError(who + " must be a scalar, got shape " + param.shape().to_string());
  }
  return convert_to_dtype(param, dtype, who).to_host().reshaped(TensorShape{});
}

int64_t random_run_offset(RandomDistribution distribution, DType dtype, int64_t full_elements,
                          int64_t run) {
  if (run == 0) return 0;
  // TensorFlow reserves 256 Philox samples per output element on each run.
  // Uniform and normal values take one sample per group of 4 (2 for 64-bit
  // types); a truncated normal group of 4 values (2 for double) owns a
  // window of 256 (128) samples, i.e. 64 samples per value.
  const int64_t group = dtype_size(dtype) == 8 ? 2 : 4;
  const int64_t per_element =
      distribution == RandomDistribution::kTruncatedNormal ? 4 : 256 * group;
  int64_t offset = 0;
  if (__builtin_mul_overflow(full_elements, per_element, &offset) ||
      __builtin_mul_overflow(offset, run, &offset) || offset > (int64_t{1} << 62) - full_elements) {
    throw OutOfRangeError("random op: run " + std::to_string(run) + " of a tensor of " +
                          std::to_string(full_elements) +
                          " elements is past the generator's 2^62 elements");
  }
  return offset;
}

Tensor generate_random(RandomDistribution distribution, DType dtype, const TensorShape& shape,
                       SeedPair seeds, const Tensor& a, const Tensor& b, Device& device,
                       const RandomSlice* slice, int64_t run) {
  if (!shape.is_fully_defined()) {
    throw ValueError("random op: shape " + shape.to_string() + " is not fully defined");
  }
  if (slice) check_slice(shape, *slice);
  const int64_t full_elements = slice ? slice->full_shape.num_elements() : shape.num_elements();
  const int64_t base = random_run_offset(distribution, dtype, full_elements, run);
  Tensor out(dtype, shape, device);
  dispatch_random(dtype, "random op", [&](auto tag) {
    using T = decltype(tag);
    const T a_value = a.scalar<T>();
    const T b_value = b.scalar<T>();
    T* data = static_cast<T*>(out.raw_data());  // on `device`
    for_each_run(shape, slice, [&](int64_t out_offset, int64_t first, int64_t length) {
      fill_run<T>(distribution, device, data + out_offset, length, base + first, seeds, a_value,
                  b_value);
    });
  });
  return out;
}

}  // namespace internal

namespace {

using internal::RandomDistribution;

void check_shape(const TensorShape& shape, const std::string& what) {
  if (!shape.is_fully_defined()) {
    throw ValueError(what + ": shape " + shape.to_string() + " is not fully defined");
  }
}

Tensor normal_op(RandomDistribution distribution, const TensorShape& shape,
                 const RandomNormalOptions& options, const char* default_name,
                 const char* op_type) {
  const std::string name = options.name.empty() ? default_name : options.name;
  if (!dtype_is_floating(options.dtype)) {
    // TypeError, as TensorFlow's op type check (the initializers raise
    // ValueError: check_float_dtype).
    throw TypeError(std::string(name) + ": Value passed to parameter 'dtype' has DataType " +
                    std::string(dtype_name(options.dtype)) +
                    " not in list of allowed values: float16, bfloat16, float32, float64");
  }
  check_shape(shape, name);
  Tensor mean = internal::scalar_param(options.mean, options.dtype, name, "mean");
  Tensor stddev = internal::scalar_param(options.stddev, options.dtype, name, "stddev");
  Device& device = place({name, op_type});
  return internal::generate_random(distribution, options.dtype, shape, resolve_seed(options.seed),
                                   mean, stddev, device);
}

}  // namespace

Tensor random_uniform(const TensorShape& shape, const RandomUniformOptions& options) {
  const std::string& name = options.name;
  const DType dtype = options.dtype;
  internal::check_uniform_dtype(dtype, options.maxval.has_value(), name);
  check_shape(shape, name);
  Tensor lo = internal::scalar_param(options.minval, dtype, name, "minval");
  Tensor hi =
      internal::scalar_param(options.maxval ? *options.maxval : Tensor(1), dtype, name, "maxval");
  internal::check_uniform_range(lo, hi, name);
  Device& device = place({name, dtype_is_integer(dtype) ? "RandomUniformInt" : "RandomUniform"});
  return internal::generate_random(RandomDistribution::kUniform, dtype, shape,
                                   resolve_seed(options.seed), lo, hi, device);
}

Tensor random_normal(const TensorShape& shape, const RandomNormalOptions& options) {
  return normal_op(RandomDistribution::kNormal, shape, options, "random_normal",
                   "RandomStandardNormal");
}

Tensor truncated_normal(const TensorShape& shape, const RandomNormalOptions& options) {
  return normal_op(RandomDistribution::kTruncatedNormal, shape, options, "truncated_normal",
                   "TruncatedNormal");
}

}  // namespace varstate
