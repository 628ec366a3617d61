#include "varstate/tensor_data.h"

namespace varstate {

int64_t num_elements(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw InvalidArgumentError("shape " + shape_string(shape) + " has a negative dimension");
    if (__builtin_mul_overflow(n, d, &n)) {
      throw InvalidArgumentError("shape " + shape_string(shape) + " has more than 2^63 elements");
    }
  }
  return n;
}

std::string shape_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

void validate_tensor_view(const TensorView& view, std::string_view what) {
  auto fail = [&](const std::string& msg) {
    throw InvalidArgumentError(std::string(what) + ": " + msg);
  };
  if (!dtype_is_valid(static_cast<int>(view.dtype))) {
    fail("unsupported dtype " + std::to_string(static_cast<int>(view.dtype)));
  }
  int64_t n = num_elements(view.shape);
  if (view.dtype == DType::kString) {
    if (static_cast<int64_t>(view.strings.size()) != n) {
      fail("string tensor of shape " + shape_string(view.shape) + " needs " + std::to_string(n) +
           " strings, got " + std::to_string(view.strings.size()));
    }
    return;
  }
  uint64_t expected = static_cast<uint64_t>(n) * dtype_size(view.dtype);
  if (view.bytes.size() != expected) {
    fail(std::string(dtype_name(view.dtype)) + " tensor of shape " + shape_string(view.shape) +
         " needs " + std::to_string(expected) + " bytes, got " + std::to_string(view.bytes.size()));
  }
}

}  // namespace varstate
