// TensorShape: the dimensions of a tensor, possibly partially unknown.
//
// A shape has a known rank and a list of dimensions, each a size >= 0 or
// kUnknownDim; or it has unknown rank altogether. Shapes print as
// TensorFlow's do in messages: "[2,3]", "[?,3]", "<unknown>", "[]" (scalar).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

namespace varstate {

class TensorShape {
 public:
  static constexpr int64_t kUnknownDim = -1;

  TensorShape() = default;  // a scalar: rank 0
  TensorShape(std::initializer_list<int64_t> dims);
  explicit TensorShape(std::vector<int64_t> dims);
  static TensorShape unknown();  // unknown rank

  bool unknown_rank() const { return unknown_rank_; }
  // -1 for unknown rank.
  int rank() const { return unknown_rank_ ? -1 : static_cast<int>(dims_.size()); }
  // Throws OutOfRangeError for i outside [0, rank).
  int64_t dim(int i) const;
  const std::vector<int64_t>& dims() const { return dims_; }
  bool is_fully_defined() const;
  bool is_scalar() const { return !unknown_rank_ && dims_.empty(); }

  // Product of the dimensions (1 for a scalar). Throws ValueError if the
  // shape is not fully defined.
  int64_t num_elements() const;

  // True if some fully defined shape is compatible with both (unknown
  // dimensions and unknown rank match anything).
  bool is_compatible_with(const TensorShape& other) const;

  // The shape with dimension `i` dropped from the front: [a,b,c].tail(1) = [b,c].
  TensorShape tail(int from) const;
  TensorShape concatenate(const TensorShape& other) const;

  std::string to_string() const;
  bool operator==(const TensorShape& other) const = default;

 private:
  std::vector<int64_t> dims_;
  bool unknown_rank_ = false;
};

std::ostream& operator<<(std::ostream& os, const TensorShape& shape);

}  // namespace varstate
