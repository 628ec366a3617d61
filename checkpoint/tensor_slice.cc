#include "varstate/tensor_slice.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "varstate/error.h"

namespace varstate {
namespace {

std::vector<std::string_view> split_skip_empty(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t next = s.find(sep, pos);
    if (next == std::string_view::npos) next = s.size();
    if (next > pos) out.push_back(s.substr(pos, next - pos));
    pos = next + 1;
  }
  return out;
}

bool parse_int64(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

TensorSlice TensorSlice::full(int rank) {
  return TensorSlice(std::vector<Extent>(static_cast<size_t>(rank)));
}

TensorSlice TensorSlice::parse(std::string_view spec) {
  std::vector<Extent> extents;
  for (std::string_view item : split_skip_empty(spec, ':')) {
    if (item == "-") {
      extents.push_back(Extent{});
      continue;
    }
    size_t comma = item.find(',');
    int64_t start = 0, length = 0;
    if (comma == std::string_view::npos || !parse_int64(item.substr(0, comma), &start) ||
        !parse_int64(item.substr(comma + 1), &length)) {
      throw InvalidArgumentError("Expected a pair of numbers or '-' but got '" + std::string(item) +
                                 "': string = " + std::string(spec));
    }
    if (start < 0 || length <= 0) {
      throw InvalidArgumentError(
          "Expected non-negative start and positive length but got start = " +
          std::to_string(start) + ", length = " + std::to_string(length) +
          ": string = " + std::string(spec));
    }
    extents.push_back(Extent{start, length});
  }
  return TensorSlice(std::move(extents));
}

bool TensorSlice::is_full() const {
  return std::all_of(extents_.begin(), extents_.end(),
                     [](const Extent& e) { return e.length == kFullExtent; });
}

int64_t TensorSlice::length_at(int d, std::span<const int64_t> full_shape) const {
  return is_full_at(d) ? full_shape[static_cast<size_t>(d)] : extent(d).length;
}

std::vector<int64_t> TensorSlice::slice_shape(std::span<const int64_t> full_shape) const {
  if (static_cast<size_t>(rank()) != full_shape.size()) {
    throw InvalidArgumentError("slice " + quoted(to_string()) + " has rank " +
                               std::to_string(rank()) + " but the tensor has shape " +
                               shape_string(full_shape));
  }
  std::vector<int64_t> shape(full_shape.size());
  for (int d = 0; d < rank(); ++d) {
    int64_t dim = full_shape[static_cast<size_t>(d)];
    if (is_full_at(d)) {
      shape[static_cast<size_t>(d)] = dim;
      continue;
    }
    const Extent& e = extent(d);
    if (e.start < 0 || e.length < 0 || e.start > dim || e.length > dim - e.start) {
      throw InvalidArgumentError("Extent in dimension " + std::to_string(d) +
                                 " out of bounds: shape = " + shape_string(full_shape) +
                                 ", slice = " + to_string());
    }
    shape[static_cast<size_t>(d)] = e.length;
  }
  return shape;
}

bool TensorSlice::covers(std::span<const int64_t> full_shape) const {
  if (static_cast<size_t>(rank()) != full_shape.size()) return false;
  for (int d = 0; d < rank(); ++d) {
    if (!is_full_at(d) &&
        (extent(d).start != 0 || extent(d).length != full_shape[static_cast<size_t>(d)])) {
      return false;
    }
  }
  return true;
}

std::optional<TensorSlice> TensorSlice::intersect(const TensorSlice& other,
                                                  std::span<const int64_t> full_shape) const {
  std::vector<Extent> out(extents_.size());
  for (int d = 0; d < rank(); ++d) {
    if (is_full_at(d) && other.is_full_at(d)) continue;
    int64_t lo = std::max(start_at(d), other.start_at(d));
    int64_t hi = std::min(start_at(d) + length_at(d, full_shape),
                          other.start_at(d) + other.length_at(d, full_shape));
    if (lo >= hi) return std::nullopt;
    out[static_cast<size_t>(d)] = Extent{lo, hi - lo};
  }
  return TensorSlice(std::move(out));
}

std::string TensorSlice::to_string() const {
  std::string s;
  for (int d = 0; d < rank(); ++d) {
    if (d > 0) s += ':';
    if (is_full_at(d)) {
      s += '-';
    } else {
      s += std::to_string(extent(d).start) + ',' + std::to_string(extent(d).length);
    }
  }
  return s;
}

ShapeAndSlice parse_shape_and_slice(std::string_view spec) {
  std::vector<std::string_view> items = split_skip_empty(spec, ' ');
  if (items.size() < 2) {
    throw InvalidArgumentError("Need least two elements in shape_and_slice specification: " +
                               std::string(spec));
  }
  ShapeAndSlice out;
  for (size_t i = 0; i + 1 < items.size(); ++i) {
    int64_t dim = 0;
    if (!parse_int64(items[i], &dim) || dim < 0) {
      throw InvalidArgumentError("Non numerical dimension in shape_and_slice: " +
                                 std::string(spec));
    }
    out.full_shape.push_back(dim);
  }
  out.slice = TensorSlice::parse(items.back());
  if (static_cast<size_t>(out.slice.rank()) != out.full_shape.size()) {
    throw InvalidArgumentError("shape_and_slice " + quoted(spec) + ": slice has rank " +
                               std::to_string(out.slice.rank()) + " but the shape has rank " +
                               std::to_string(out.full_shape.size()));
  }
  out.slice.slice_shape(out.full_shape);  // bounds check
  return out;
}

void check_slice_to_write(const TensorSlice& slice, std::span<const int64_t> full_shape,
                          std::span<const int64_t> values_shape, const std::string& what) {
  std::vector<int64_t> sliced_shape;
  try {
    num_elements(full_shape);
    sliced_shape = slice.slice_shape(full_shape);
  } catch (...) {
    rethrow_with_context(what);
  }
  if (!std::equal(sliced_shape.begin(), sliced_shape.end(), values_shape.begin(),
                  values_shape.end())) {
    throw InvalidArgumentError(what +
                               ": Slice in shape_and_slice specification does not match the "
                               "shape of the tensor to save: slice shape " +
                               shape_string(sliced_shape) + ", tensor shape " +
                               shape_string(values_shape));
  }
}

std::string shape_and_slice_string(std::span<const int64_t> full_shape, const TensorSlice& slice) {
  std::string s;
  for (int64_t d : full_shape) s += std::to_string(d) + ' ';
  return s + slice.to_string();
}

void copy_slice_region(const TensorData& src, const TensorSlice& src_slice, TensorData& dst,
                       const TensorSlice& dst_slice, const TensorSlice& region,
                       std::span<const int64_t> full_shape) {
  const int rank = region.rank();
  std::vector<int64_t> src_shape = src_slice.slice_shape(full_shape);
  std::vector<int64_t> dst_shape = dst_slice.slice_shape(full_shape);
  std::vector<int64_t> len = region.slice_shape(full_shape);
  if (num_elements(len) == 0) return;

  // Row-major strides (in elements) and the region's first element in each.
  std::vector<int64_t> src_stride(static_cast<size_t>(rank), 1),
      dst_stride(static_cast<size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d) {
    src_stride[static_cast<size_t>(d)] =
        src_stride[static_cast<size_t>(d) + 1] * src_shape[static_cast<size_t>(d) + 1];
    dst_stride[static_cast<size_t>(d)] =
        dst_stride[static_cast<size_t>(d) + 1] * dst_shape[static_cast<size_t>(d) + 1];
  }
  int64_t src_base = 0, dst_base = 0;
  for (int d = 0; d < rank; ++d) {
    src_base += (region.start_at(d) - src_slice.start_at(d)) * src_stride[static_cast<size_t>(d)];
    dst_base += (region.start_at(d) - dst_slice.start_at(d)) * dst_stride[static_cast<size_t>(d)];
  }
  const int64_t run = rank == 0 ? 1 : len.back();
  const bool strings = src.dtype == DType::kString;
  const size_t elem = strings ? 0 : dtype_size(src.dtype);

  std::vector<int64_t> idx(static_cast<size_t>(std::max(rank - 1, 0)), 0);
  while (true) {
    int64_t s = src_base, t = dst_base;
    for (size_t d = 0; d < idx.size(); ++d) {
      s += idx[d] * src_stride[d];
      t += idx[d] * dst_stride[d];
    }
    if (strings) {
      std::copy_n(src.strings.begin() + s, run, dst.strings.begin() + t);
    } else {
      std::memcpy(dst.bytes.data() + static_cast<size_t>(t) * elem,
                  src.bytes.data() + static_cast<size_t>(s) * elem,
                  static_cast<size_t>(run) * elem);
    }
    int d = static_cast<int>(idx.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < len[static_cast<size_t>(d)]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
    if (d < 0) break;
  }
}

}  // namespace varstate
