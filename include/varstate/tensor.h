// Tensor: a dtype, a shape and a contiguous row-major buffer on one device.
//
// Tensors are cheap handles: copying one shares its buffer (reference
// counted), as TensorFlow's Tensor does; clone() makes a deep copy. A GPU
// tensor's buffer is written by work enqueued on its device's stream; host
// reads (to_host, to_vector, printing) wait for that work.
//
// Creation from host values:
//   Tensor s = 3.0f;                           // scalar float32
//   Tensor v = Tensor({1, 2, 3});              // int32 vector [3]
//   Tensor m = Tensor({{1.f, 2.f}, {3.f, 4.f}});  // float32 [2,2]
//   Tensor t = Tensor::from_vector<double>(data, {2, 3});
//   Tensor g = m.to(DeviceManager::instance().gpu(0));
// String tensors (DType::kString) live on the CPU only.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "varstate/device.h"
#include "varstate/dtype.h"
#include "varstate/error.h"
#include "varstate/tensor_shape.h"

namespace varstate {

class Tensor;

namespace internal {
class Buffer;                                      // runtime/tensor_internal.h
bool grow_rows_in_place(Tensor& t, int64_t rows);  // runtime/tensor_internal.h
}  // namespace internal

namespace detail {
// Host-side element types a Tensor can be built from (C++ types with a DType).
template <typename T>
concept TensorElement = requires {
  DTypeOf<std::remove_cvref_t<T>>::value;
};
template <typename T>
concept HostScalar = TensorElement<T> || std::is_same_v < std::remove_cvref_t<T>,
const char* > ;
}  // namespace detail

class Tensor {
 public:
  // An empty handle (dtype kInvalid); valid() is false.
  Tensor() = default;
  // An uninitialized tensor of `shape` (fully defined) on `device` (default
  // CPU). Throws ValueError for a partially unknown shape,
  // InvalidArgumentError for a string tensor off the CPU, and
  // ResourceExhaustedError when memory runs out.
  Tensor(DType dtype, const TensorShape& shape);
  Tensor(DType dtype, const TensorShape& shape, Device& device);

  // Scalars: Tensor(1.5f), Tensor(int64_t{7}), Tensor(true), Tensor("abc").
  template <detail::TensorElement T>
  Tensor(T value);            // NOLINT: implicit, as tf.convert_to_tensor
  Tensor(const char* value);  // NOLINT: string scalar
  // Vectors and nested lists, row-major; ragged lists throw ValueError.
  template <detail::TensorElement T>
  Tensor(std::initializer_list<T> values);
  template <detail::TensorElement T>
  Tensor(std::initializer_list<std::initializer_list<T>> values);
  template <detail::TensorElement T>
  Tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> values);

  // A CPU tensor holding `values` with `shape` (default: a vector). Throws
  // ValueError when the element count does not match the shape.
  template <detail::TensorElement T>
  static Tensor from_vector(const std::vector<T>& values, const TensorShape& shape);
  template <detail::TensorElement T>
  static Tensor from_vector(const std::vector<T>& values);
  static Tensor zeros(DType dtype, const TensorShape& shape, Device& device);
  static Tensor zeros(DType dtype, const TensorShape& shape);
  // `value` (a scalar of any dtype) converted to dtype and repeated.
  static Tensor filled(DType dtype, const TensorShape& shape, const Tensor& value, Device& device);

  bool valid() const { return dtype_ != DType::kInvalid; }
  DType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t num_elements() const { return num_elements_; }
  size_t nbytes() const { return static_cast<size_t>(num_elements_) * dtype_size(dtype_); }
  // The device holding the buffer (CPU for an empty handle).
  Device& device() const;
  bool on_cpu() const { return device().is_cpu(); }

  // The buffer, in the memory of device(): a device pointer for a GPU
  // tensor, for kernels and copies on that device. Null for zero elements.
  void* raw_data() const;
  // Typed host pointer to the elements of a CPU tensor. Throws TypeError
  // when T is not the storage type of dtype(), and FailedPreconditionError,
  // naming the device, when the tensor is not on the CPU (use raw_data()
  // for a device pointer, to_host() or to_vector() to read the values).
  template <typename T>
  T* data() const;
  // True if this handle is the only one referring to its buffer (so the
  // buffer may be overwritten without anyone else seeing it).
  bool sole_owner() const { return buffer_ && buffer_.use_count() == 1; }
  // True if both handles share one buffer.
  bool shares_buffer_with(const Tensor& other) const { return buffer_ && buffer_ == other.buffer_; }

  // A deep copy on `device` (same device: still a new buffer).
  Tensor to(Device& device) const;
  // This tensor if it is on the CPU, else a copy there (waits for the GPU).
  Tensor to_host() const;
  // This tensor if it is on `device` (the same buffer), else a copy there.
  Tensor on(Device& device) const;
  Tensor clone() const { return to(device()); }
  // The same buffer seen with another shape of the same element count;
  // throws InvalidArgumentError otherwise.
  Tensor reshaped(const TensorShape& shape) const;
  // Element-wise conversion to another dtype (numeric and bool), on the
  // tensor's device; throws TypeError for string <-> number.
  Tensor cast(DType dtype) const;

  // Host copies of the elements; T must be the storage type of dtype().
  template <typename T>
  std::vector<T> to_vector() const;
  // The single element of a one-element tensor.
  template <typename T>
  T scalar() const;

  // True for a tensor built implicitly from C++ literals (Tensor(1.0),
  // Tensor({1, 2})): like a Python number passed to a TensorFlow op, it
  // converts to the dtype the op needs (see convert_to_dtype) instead of
  // raising TypeError. Copies and results of ops are strongly typed.
  bool weakly_typed() const { return weak_; }
  Tensor strongly_typed() const {
    Tensor t = *this;
    t.weak_ = false;
    return t;
  }

  // NumPy-style text: "[[1. 2.]\n [3. 4.]]"; long tensors are summarized.
  std::string to_string() const;
  // "Tensor(shape=[2,2], dtype=float32, device=/device:CPU:0)".
  std::string debug_string() const;

 private:
  DType dtype_ = DType::kInvalid;
  TensorShape shape_;
  int64_t num_elements_ = 0;
  std::shared_ptr<internal::Buffer> buffer_;
  bool weak_ = false;

  template <typename T>
  static Tensor from_flat(const std::vector<T>& flat, std::vector<int64_t> dims);
  friend bool internal::grow_rows_in_place(Tensor& t, int64_t rows);
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// `t` as a tensor of `dtype`, as tf.convert_to_tensor(t, dtype) does: the
// same tensor when the dtype already matches; a converted copy when `t` is
// weakly typed and its values fit the dtype's kind (integers to any numeric
// dtype, floats to float or complex dtypes, bool to bool); otherwise
// TypeError naming `what`, the expected and the actual dtype.
// Weakly typed integers must fit the dtype (ValueError otherwise, as
// TensorFlow refuses to convert a Python int out of the dtype's range);
// weakly typed floats convert as a cast does: a finite double beyond
// float32's range becomes +-inf, as in TensorFlow.
Tensor convert_to_dtype(const Tensor& t, DType dtype, std::string_view what);

// Throws ValueError naming `what` when an element of the integer tensor `t`
// is out of the range of the integer dtype `dtype`.
void check_integers_fit(const Tensor& t, DType dtype, std::string_view what);

// ---------------------------------------------------------------------------
// Template definitions.

namespace detail {
[[noreturn]] void throw_dtype_mismatch(DType actual, DType requested, const char* what);
void check_storage_type(DType actual, DType requested, size_t requested_size, const char* what);
// Throws FailedPreconditionError naming `what` and t's device unless t is on the CPU.
void check_on_cpu(const Tensor& t, const char* what);
template <typename T>
void flatten(std::initializer_list<std::initializer_list<T>> rows, std::vector<T>& flat,
             std::vector<int64_t>& dims);
}  // namespace detail

template <typename T>
T* Tensor::data() const {
  detail::check_storage_type(dtype_, dtype_of<T>, sizeof(T), "Tensor::data");
  detail::check_on_cpu(*this, "Tensor::data");
  return static_cast<T*>(raw_data());
}

template <typename T>
Tensor Tensor::from_flat(const std::vector<T>& flat, std::vector<int64_t> dims) {
  return from_vector<T>(flat, TensorShape(std::move(dims)));
}

template <detail::TensorElement T>
Tensor::Tensor(T value) : Tensor(from_vector<T>(std::vector<T>{value}, TensorShape{})) {
  weak_ = true;
}

template <detail::TensorElement T>
Tensor::Tensor(std::initializer_list<T> values) : Tensor(from_vector<T>(std::vector<T>(values))) {
  weak_ = true;
}

template <detail::TensorElement T>
Tensor::Tensor(std::initializer_list<std::initializer_list<T>> values) {
  std::vector<T> flat;
  std::vector<int64_t> dims;
  detail::flatten<T>(values, flat, dims);
  *this = from_flat<T>(flat, dims);
  weak_ = true;
}

template <detail::TensorElement T>
Tensor::Tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> values) {
  std::vector<T> flat;
  std::vector<int64_t> dims{static_cast<int64_t>(values.size()), 0, 0};
  bool first = true;
  for (auto plane : values) {
    std::vector<int64_t> inner;
    detail::flatten<T>(plane, flat, inner);
    if (first) {
      dims[1] = inner[0];
      dims[2] = inner[1];
      first = false;
    } else if (inner[0] != dims[1] || inner[1] != dims[2]) {
      throw ValueError("ragged nested list: planes of shape [" + std::to_string(dims[1]) + "," +
                       std::to_string(dims[2]) + "] and [" + std::to_string(inner[0]) + "," +
                       std::to_string(inner[1]) + "]");
    }
  }
  *this = from_flat<T>(flat, dims);
  weak_ = true;
}

template <detail::TensorElement T>
Tensor Tensor::from_vector(const std::vector<T>& values) {
  return from_vector<T>(values, TensorShape{static_cast<int64_t>(values.size())});
}

template <detail::TensorElement T>
Tensor Tensor::from_vector(const std::vector<T>& values, const TensorShape& shape) {
  Tensor t(dtype_of<T>, shape);
  if (t.num_elements() != static_cast<int64_t>(values.size())) {
    throw ValueError("cannot make a tensor of shape " + shape.to_string() + " (" +
                     std::to_string(t.num_elements()) + " elements) from " +
                     std::to_string(values.size()) + " values");
  }
  T* out = static_cast<T*>(t.raw_data());
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  detail::check_storage_type(dtype_, dtype_of<T>, sizeof(T), "Tensor::to_vector");
  Tensor host = to_host();
  const T* p = static_cast<const T*>(host.raw_data());
  return std::vector<T>(p, p + num_elements_);
}

template <typename T>
T Tensor::scalar() const {
  if (num_elements_ != 1) {
    throw InvalidArgumentError("Tensor::scalar: expected 1 element, tensor has shape " +
                               shape_.to_string());
  }
  return to_vector<T>()[0];
}

namespace detail {
template <typename T>
void flatten(std::initializer_list<std::initializer_list<T>> rows, std::vector<T>& flat,
             std::vector<int64_t>& dims) {
  dims = {static_cast<int64_t>(rows.size()), 0};
  bool first = true;
  for (auto row : rows) {
    if (first) {
      dims[1] = static_cast<int64_t>(row.size());
      first = false;
    } else if (static_cast<int64_t>(row.size()) != dims[1]) {
      throw ValueError("ragged nested list: rows of length " + std::to_string(dims[1]) + " and " +
                       std::to_string(row.size()));
    }
    flat.insert(flat.end(), row.begin(), row.end());
  }
}
}  // namespace detail

}  // namespace varstate
