#include "varstate/slice.h"

#include <algorithm>
#include <string>

#include "kernels/common.h"
#include "kernels/cpu/slice.h"
#include "varstate/error.h"
#ifdef VARSTATE_HAVE_CUDA
#include "kernels/cuda/slice.h"
#endif

namespace varstate {
namespace {

using kernels::StridedCopy;

// Per input dimension: the first index, the step and how many are taken.
struct Selection {
  std::vector<int64_t> starts, steps, counts;
  std::vector<int64_t> out_dims;  // counts without the index dims, with newaxis 1s
};

// The specs with the ellipsis (or, without one, the trailing dims)
// expanded to whole dims: one spec per input dim, plus the newaxis specs.
std::vector<SliceSpec> expand(const std::string& prefix, const TensorShape& shape,
                              const std::vector<SliceSpec>& specs) {
  const int rank = shape.rank();
  int64_t consumed = 0, ellipses = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const SliceSpec& spec = specs[i];
    if (int{spec.is_index} + int{spec.is_ellipsis} + int{spec.is_newaxis} > 1) {
      throw InvalidArgumentError(prefix + "slice spec " + std::to_string(i) +
                                 " is more than one of index, ellipsis and newaxis");
    }
    ellipses += spec.is_ellipsis;
    consumed += !spec.is_ellipsis && !spec.is_newaxis;
  }
  if (ellipses > 1) throw ValueError(prefix + "Multiple ellipses in slice spec not allowed");
  if (consumed > rank) {
    throw InvalidArgumentError(prefix + "too many indices: " + std::to_string(consumed) +
                               " for a tensor of shape " + shape.to_string());
  }
  std::vector<SliceSpec> out;
  for (const SliceSpec& spec : specs) {
    if (spec.is_ellipsis) {
      out.insert(out.end(), rank - consumed, Slice::all());
    } else {
      out.push_back(spec);
    }
  }
  if (ellipses == 0) out.insert(out.end(), rank - consumed, Slice::all());
  return out;
}

// Appends dimension `d` (of size `dim`) of the selection `spec` makes to `s`.
void select_dim(const std::string& prefix, const TensorShape& shape, int d, const SliceSpec& spec,
                Selection& s) {
  const int64_t dim = shape.dim(d);
  if (spec.is_index) {
    int64_t i = spec.begin.value_or(0);
    if (i < -dim || i >= dim) {
      throw InvalidArgumentError(prefix + "slice index " + std::to_string(i) + " of dimension " +
                                 std::to_string(d) + " out of bounds for shape " +
                                 shape.to_string());
    }
    if (i < 0) i += dim;
    s.starts.push_back(i);
    s.steps.push_back(1);
    s.counts.push_back(1);
    return;
  }
  const int64_t step = spec.step.value_or(1);
  if (step == 0) {
    throw ValueError(prefix + "slice step of dimension " + std::to_string(d) + " cannot be zero");
  }
  auto normalize = [&](int64_t v, int64_t lo, int64_t hi) {
    if (v < 0) v += dim;
    return std::clamp(v, lo, hi);
  };
  int64_t begin, end, count;
  if (step > 0) {
    begin = spec.begin ? normalize(*spec.begin, 0, dim) : 0;
    end = spec.end ? normalize(*spec.end, 0, dim) : dim;
    if (end < begin) {
      throw ValueError(prefix + "slice range " + std::to_string(begin) + ":" + std::to_string(end) +
                       " of dimension " + std::to_string(d) + " has negative size");
    }
    // 1 + (extent - 1) / step: the textbook (extent + step - 1) / step
    // overflows for steps near INT64_MAX.
    count = end > begin ? 1 + (end - begin - 1) / step : 0;
  } else {
    begin = spec.begin ? normalize(*spec.begin, -1, dim - 1) : dim - 1;
    end = spec.end ? normalize(*spec.end, -1, dim - 1) : -1;
    if (begin < end) {
      throw ValueError(prefix + "slice range " + std::to_string(begin) + ":" + std::to_string(end) +
                       ":" + std::to_string(step) + " of dimension " + std::to_string(d) +
                       " has negative size");
    }
    // Unsigned magnitude: -step overflows for INT64_MIN.
    const uint64_t magnitude = uint64_t{0} - static_cast<uint64_t>(step);
    count = begin > end
                ? 1 + static_cast<int64_t>(static_cast<uint64_t>(begin - end - 1) / magnitude)
                : 0;
  }
  s.starts.push_back(begin);
  s.steps.push_back(step);
  s.counts.push_back(count);
  s.out_dims.push_back(count);
}

// The selection as tf.strided_slice's dense spec: the input dims' ranges
// for the copy, the newaxis dims only in the result's shape. The copy, and
// so the CPU and CUDA kernels, never see a newaxis.
Selection select(std::string_view who, const TensorShape& shape,
                 const std::vector<SliceSpec>& specs) {
  const std::string prefix = std::string(who) + ": ";
  if (!shape.is_fully_defined()) {
    throw InvalidArgumentError(prefix + "cannot slice a tensor of unknown shape " +
                               shape.to_string());
  }
  Selection s;
  int d = 0;
  for (const SliceSpec& spec : expand(prefix, shape, specs)) {
    if (spec.is_newaxis) {
      s.out_dims.push_back(1);
    } else {
      select_dim(prefix, shape, d++, spec, s);
    }
  }
  return s;
}

// The copy between the selected region of a tensor of `shape` (the
// "sliced" view) and a contiguous tensor of the selection's shape. Size-1
// dims are dropped and dims contiguous in both views merged.
StridedCopy make_copy(std::string_view who, const TensorShape& shape, const Selection& s,
                      bool sliced_is_src) {
  const int rank = shape.rank();
  std::vector<int64_t> full_strides(rank);
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    full_strides[d] = stride;
    stride *= shape.dim(d);
  }
  StridedCopy c;
  c.n = 1;
  int64_t offset = 0;
  std::vector<int64_t> dims, sliced, dense;  // innermost first
  int64_t dense_stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    c.n *= s.counts[d];
    offset += s.starts[d] * full_strides[d];
    if (s.counts[d] == 1) continue;
    const int64_t ss = s.steps[d] * full_strides[d];
    if (!dims.empty() && ss == sliced.back() * dims.back() &&
        dense_stride == dense.back() * dims.back()) {
      dims.back() *= s.counts[d];
    } else {
      dims.push_back(s.counts[d]);
      sliced.push_back(ss);
      dense.push_back(dense_stride);
    }
    dense_stride *= s.counts[d];
  }
  if (dims.size() > static_cast<size_t>(StridedCopy::kMaxDims)) {
    throw UnimplementedError(std::string(who) + ": slicing a tensor of shape " + shape.to_string() +
                             " needs more than " + std::to_string(StridedCopy::kMaxDims) +
                             " strided dimensions");
  }
  c.rank = static_cast<int>(dims.size());
  kernels::StridedView sliced_view, dense_view;
  sliced_view.rank = dense_view.rank = c.rank;
  sliced_view.offset = offset;
  for (int i = 0; i < c.rank; ++i) {
    c.dims[i] = dims[c.rank - 1 - i];
    sliced_view.strides[i] = sliced[c.rank - 1 - i];
    dense_view.strides[i] = dense[c.rank - 1 - i];
  }
  c.src = sliced_is_src ? sliced_view : dense_view;
  c.dst = sliced_is_src ? dense_view : sliced_view;
  return c;
}

template <typename T>
void copy_as(Device& device, const void* src, void* dst, const StridedCopy& c) {
  if (device.is_cpu()) {
    kernels::cpu::strided_copy<T>(static_cast<const T*>(src), static_cast<T*>(dst), c);
    return;
  }
#ifdef VARSTATE_HAVE_CUDA
  if constexpr (!std::is_same_v<T, std::string>) {
    DeviceGuard guard(device);
    kernels::cuda::strided_copy<T>(static_cast<const T*>(src), static_cast<T*>(dst), c,
                                   device.stream());
  }
#endif
}

void run_copy(DType dtype, Device& device, const void* src, void* dst, const StridedCopy& c) {
  if (c.n == 0) return;
  if (dtype == DType::kString) return copy_as<std::string>(device, src, dst, c);
  switch (dtype_size(dtype)) {
    case 1:
      return copy_as<kernels::Opaque<1>>(device, src, dst, c);
    case 2:
      return copy_as<kernels::Opaque<2>>(device, src, dst, c);
    case 4:
      return copy_as<kernels::Opaque<4>>(device, src, dst, c);
    case 8:
      return copy_as<kernels::Opaque<8>>(device, src, dst, c);
    case 16:
      return copy_as<kernels::Opaque<16>>(device, src, dst, c);
    default:
      throw_unsupported_dtype(dtype, "strided_slice");
  }
}

}  // namespace

TensorShape slice_shape(const TensorShape& shape, const std::vector<SliceSpec>& specs) {
  return TensorShape(select("StridedSlice", shape, specs).out_dims);
}

Tensor strided_slice(const Tensor& t, const std::vector<SliceSpec>& specs) {
  if (!t.valid()) throw InvalidArgumentError("StridedSlice: empty tensor handle");
  const Selection s = select("StridedSlice", t.shape(), specs);
  const StridedCopy c = make_copy("StridedSlice", t.shape(), s, /*sliced_is_src=*/true);
  Tensor out(t.dtype(), TensorShape(s.out_dims), t.device());
  run_copy(t.dtype(), t.device(), t.raw_data(), out.raw_data(), c);
  return out;
}

void strided_slice_assign(Tensor& target, const std::vector<SliceSpec>& specs, const Tensor& value,
                          std::string_view name) {
  const std::string who =
      name.empty() ? std::string("StridedSliceAssign") : "StridedSliceAssign to " + quoted(name);
  if (!target.valid()) throw InvalidArgumentError(who + ": the target is an empty tensor handle");
  if (!value.valid()) throw InvalidArgumentError(who + ": the value is an empty tensor handle");
  const Selection s = select(who, target.shape(), specs);
  Tensor v = convert_to_dtype(value, target.dtype(), who);
  const TensorShape lvalue(s.out_dims);
  if (v.shape() != lvalue) {
    throw InvalidArgumentError(who + ": sliced l-value shape " + lvalue.to_string() +
                               " does not match r-value shape " + v.shape().to_string() +
                               " (assignments do not broadcast)");
  }
  const StridedCopy c = make_copy(who, target.shape(), s, /*sliced_is_src=*/false);
  v = v.on(target.device());
  run_copy(target.dtype(), target.device(), v.raw_data(), target.raw_data(), c);
}

}  // namespace varstate
