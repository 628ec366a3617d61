#include "varstate/tensor_shape.h"

#include <limits>

#include "varstate/error.h"

namespace varstate {
namespace {

void check_dims(const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < TensorShape::kUnknownDim) {
      throw ValueError("dimension " + std::to_string(i) +
                       " of a shape must be >= 0 or unknown (-1), got " + std::to_string(dims[i]));
    }
  }
}

}  // namespace

TensorShape::TensorShape(std::initializer_list<int64_t> dims) : dims_(dims) { check_dims(dims_); }

TensorShape::TensorShape(std::vector<int64_t> dims) : dims_(std::move(dims)) { check_dims(dims_); }

TensorShape TensorShape::unknown() {
  TensorShape s;
  s.unknown_rank_ = true;
  return s;
}

int64_t TensorShape::dim(int i) const {
  if (i < 0 || i >= rank()) {
    throw OutOfRangeError("dimension " + std::to_string(i) + " is out of range for shape " +
                          to_string());
  }
  return dims_[i];
}

bool TensorShape::is_fully_defined() const {
  if (unknown_rank_) return false;
  for (int64_t d : dims_) {
    if (d == kUnknownDim) return false;
  }
  return true;
}

int64_t TensorShape::num_elements() const {
  if (!is_fully_defined()) {
    throw ValueError("shape " + to_string() + " is not fully defined: it has no element count");
  }
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      throw InvalidArgumentError("shape " + to_string() + " has more than 2^63-1 elements");
    }
    n *= d;
  }
  return n;
}

bool TensorShape::is_compatible_with(const TensorShape& other) const {
  if (unknown_rank_ || other.unknown_rank_) return true;
  if (dims_.size() != other.dims_.size()) return false;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i] != kUnknownDim && other.dims_[i] != kUnknownDim && dims_[i] != other.dims_[i]) {
      return false;
    }
  }
  return true;
}

TensorShape TensorShape::tail(int from) const {
  if (unknown_rank_) return unknown();
  if (from < 0 || from > rank()) {
    throw OutOfRangeError("cannot drop " + std::to_string(from) + " dimensions from shape " +
                          to_string());
  }
  return TensorShape(std::vector<int64_t>(dims_.begin() + from, dims_.end()));
}

TensorShape TensorShape::concatenate(const TensorShape& other) const {
  if (unknown_rank_ || other.unknown_rank_) return unknown();
  std::vector<int64_t> dims = dims_;
  dims.insert(dims.end(), other.dims_.begin(), other.dims_.end());
  return TensorShape(std::move(dims));
}

std::string TensorShape::to_string() const {
  if (unknown_rank_) return "<unknown>";
  std::string out = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) out += ",";
    out += dims_[i] == kUnknownDim ? "?" : std::to_string(dims_[i]);
  }
  return out + "]";
}

std::ostream& operator<<(std::ostream& os, const TensorShape& shape) {
  return os << shape.to_string();
}

}  // namespace varstate
