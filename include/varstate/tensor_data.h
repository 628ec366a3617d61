// Host-side tensor contents as checkpoints store them.
//
// Until the runtime's Tensor exists, the checkpoint layer exchanges plain
// data: a dtype, a shape and the elements -- row-major little-endian bytes
// for fixed-width dtypes, one std::string per element for kString.
// TensorView borrows the elements (what writers take, so saving copies
// nothing); TensorData owns them (what readers return).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "varstate/dtype.h"
#include "varstate/error.h"

namespace varstate {

// Number of elements of `shape` (1 for a scalar). Throws
// InvalidArgumentError for a negative dimension or an element count that
// overflows int64.
int64_t num_elements(std::span<const int64_t> shape);

// "[2,3]"; "[]" for a scalar.
std::string shape_string(std::span<const int64_t> shape);

// Borrowed tensor contents. For fixed-width dtypes `bytes` holds
// num_elements(shape) * dtype_size(dtype) bytes; for kString `strings` holds
// num_elements(shape) strings.
struct TensorView {
  DType dtype = DType::kInvalid;
  std::vector<int64_t> shape;
  std::span<const std::byte> bytes;
  std::span<const std::string> strings;
};

// Owned tensor contents, laid out as in TensorView.
struct TensorData {
  DType dtype = DType::kInvalid;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
  std::vector<std::string> strings;

  TensorView view() const { return TensorView{dtype, shape, bytes, strings}; }
  int64_t num_elements() const { return varstate::num_elements(shape); }

  // A tensor of `shape` holding `values` (whose count must match) of the
  // C++ storage type T (float, int64_t, half, std::string, bool, ...).
  template <typename T>
  static TensorData from_values(std::vector<int64_t> shape, const std::vector<T>& values,
                                DType dtype = dtype_of<T>);

  // The elements as T, which must be dtype's storage type (same size for
  // numeric types). Throws InvalidArgumentError otherwise.
  template <typename T>
  std::vector<T> values() const;
};

// Checks that `view` is consistent: a storable dtype and as many bytes or
// strings as its shape implies. Throws InvalidArgumentError naming `what`.
void validate_tensor_view(const TensorView& view, std::string_view what);

template <typename T>
TensorData TensorData::from_values(std::vector<int64_t> shape, const std::vector<T>& values,
                                   DType dtype) {
  TensorData t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  if (static_cast<int64_t>(values.size()) != t.num_elements()) {
    throw InvalidArgumentError("TensorData of shape " + shape_string(t.shape) + " needs " +
                               std::to_string(t.num_elements()) + " values, got " +
                               std::to_string(values.size()));
  }
  if constexpr (std::is_same_v<T, std::string>) {
    t.strings = values;
  } else if constexpr (std::is_same_v<T, bool>) {
    t.bytes.resize(values.size());
    for (size_t i = 0; i < values.size(); ++i)
      t.bytes[i] = std::byte{values[i] ? uint8_t{1} : uint8_t{0}};
  } else {
    t.bytes.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  }
  return t;
}

template <typename T>
std::vector<T> TensorData::values() const {
  if constexpr (std::is_same_v<T, std::string>) {
    if (dtype != DType::kString) {
      throw InvalidArgumentError("TensorData::values<string> on a " +
                                 std::string(dtype_name(dtype)) + " tensor");
    }
    return strings;
  } else {
    if (dtype == DType::kString || dtype_size(dtype) != sizeof(T)) {
      throw InvalidArgumentError("TensorData::values: element type of size " +
                                 std::to_string(sizeof(T)) + " does not match dtype " +
                                 std::string(dtype_name(dtype)));
    }
    std::vector<T> out(bytes.size() / sizeof(T));
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = bytes[i] != std::byte{0};
    } else if (!out.empty()) {
      std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    }
    return out;
  }
}

}  // namespace varstate
