// Slices of tensors: which box of a full tensor a saved piece holds.
//
// A partitioned variable is saved as several slices of one full tensor.
// TensorSlice is TensorFlow's notion: per dimension an extent (start,
// length), where length kFullExtent means "the whole dimension". Slices are
// written as TensorFlow's spec strings -- "-" or "start,length" per
// dimension joined by ':' ("0,5:-") -- and, together with the full shape, as
// the shape-and-slice strings of SaveV2/RestoreV2 ("10 20 0,5:-").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "varstate/tensor_data.h"

namespace varstate {

class TensorSlice {
 public:
  static constexpr int64_t kFullExtent = -1;

  struct Extent {
    int64_t start = 0;
    int64_t length = kFullExtent;
    bool operator==(const Extent&) const = default;
  };

  TensorSlice() = default;
  explicit TensorSlice(std::vector<Extent> extents) : extents_(std::move(extents)) {}

  // The slice covering every element of a tensor of rank `rank`.
  static TensorSlice full(int rank);
  // Parses "0,5:-" style specs; "" is the full slice of rank 0. Throws
  // InvalidArgumentError quoting the spec.
  static TensorSlice parse(std::string_view spec);

  int rank() const { return static_cast<int>(extents_.size()); }
  const std::vector<Extent>& extents() const { return extents_; }
  const Extent& extent(int d) const { return extents_[static_cast<size_t>(d)]; }

  bool is_full_at(int d) const { return extent(d).length == kFullExtent; }
  // True when every extent is kFullExtent (an explicit (0, dim) is not).
  bool is_full() const;
  // Start and length of dimension d within a tensor of shape `full_shape`.
  int64_t start_at(int d) const { return is_full_at(d) ? 0 : extent(d).start; }
  int64_t length_at(int d, std::span<const int64_t> full_shape) const;

  // The shape of this slice of a tensor of shape `full_shape`. Throws
  // InvalidArgumentError if the ranks differ or an extent leaves the shape.
  std::vector<int64_t> slice_shape(std::span<const int64_t> full_shape) const;
  // Whether slice_shape(full_shape) == full_shape (no error checks beyond it).
  bool covers(std::span<const int64_t> full_shape) const;

  // The box both slices cover, or nullopt if they do not overlap (as
  // slices of a tensor of shape `full_shape`; ranks must match).
  std::optional<TensorSlice> intersect(const TensorSlice& other,
                                       std::span<const int64_t> full_shape) const;

  // "0,5:-"; "" for rank 0.
  std::string to_string() const;

  bool operator==(const TensorSlice&) const = default;

 private:
  std::vector<Extent> extents_;
};

// A parsed shape-and-slice string.
struct ShapeAndSlice {
  std::vector<int64_t> full_shape;
  TensorSlice slice;
};

// Parses "10 20 0,5:-" (full shape, then the slice). Throws
// InvalidArgumentError with TensorFlow's wording on malformed input.
ShapeAndSlice parse_shape_and_slice(std::string_view spec);
// "10 20 0,5:-".
std::string shape_and_slice_string(std::span<const int64_t> full_shape, const TensorSlice& slice);

// Checks, for writing, that `slice` lies in `full_shape` and has the shape
// of the values to write, `values_shape`. Throws InvalidArgumentError
// naming `what` (TensorFlow's wording for a shape mismatch).
void check_slice_to_write(const TensorSlice& slice, std::span<const int64_t> full_shape,
                          std::span<const int64_t> values_shape, const std::string& what);

// Copies the elements of `region` (a slice of a tensor of shape
// `full_shape`) from `src`, which holds slice `src_slice`, into `dst`, which
// holds slice `dst_slice`. `region` must lie inside both; dtypes must match.
void copy_slice_region(const TensorData& src, const TensorSlice& src_slice, TensorData& dst,
                       const TensorSlice& dst_slice, const TensorSlice& region,
                       std::span<const int64_t> full_shape);

}  // namespace varstate
