#include "varstate/tensor.h"

#include <cmath>
#include <complex>
#include <cstdio>
#include <limits>
#include <sstream>
#include <utility>

#include "runtime/tensor_internal.h"
#include "varstate/cast.h"
#include "varstate/device_manager.h"

namespace varstate {

// ---------------------------------------------------------------------------
// Buffer

namespace internal {

Buffer::Buffer(Device& device, DType dtype, int64_t num_elements)
    : device_(&device), dtype_(dtype), num_elements_(num_elements), bytes_(0), data_(nullptr) {
  if (dtype == DType::kString) {
    if (!device.is_cpu()) {
      throw InvalidArgumentError("string tensors can only live on the CPU, not on " +
                                 device.name());
    }
    bytes_ = static_cast<size_t>(num_elements) * sizeof(std::string);
    data_ = device.allocate(bytes_);
    auto* s = static_cast<std::string*>(data_);
    for (int64_t i = 0; i < num_elements; ++i) new (s + i) std::string();
    return;
  }
  bytes_ = static_cast<size_t>(num_elements) * dtype_size(dtype);
  data_ = device.allocate(bytes_);
}

bool Buffer::grow(int64_t num_elements) {
  if (dtype_ == DType::kString || num_elements < num_elements_) return false;
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(num_elements), dtype_size(dtype_), &bytes)) {
    return false;
  }
  void* grown = device_->grow(data_, bytes);
  if (grown == nullptr) return false;
  data_ = grown;
  bytes_ = bytes;
  num_elements_ = num_elements;
  return true;
}

bool grow_rows_in_place(Tensor& t, int64_t rows) {
  if (!t.sole_owner() || t.shape_.rank() < 1 || rows < t.shape_.dim(0)) return false;
  const TensorShape row_shape = t.shape_.tail(1);
  int64_t elements = 0;
  if (__builtin_mul_overflow(rows, row_shape.num_elements(), &elements)) return false;
  TensorShape shape = TensorShape({rows}).concatenate(row_shape);  // before the buffer changes
  if (elements == 0 || !t.buffer_->grow(elements)) return false;
  t.shape_ = std::move(shape);
  t.num_elements_ = elements;
  return true;
}

Buffer::~Buffer() {
  if (dtype_ == DType::kString) {
    auto* s = static_cast<std::string*>(data_);
    for (int64_t i = 0; i < num_elements_; ++i) s[i].~basic_string();
  }
  device_->deallocate(data_);
}

}  // namespace internal

// ---------------------------------------------------------------------------
// Construction

Tensor::Tensor(DType dtype, const TensorShape& shape)
    : Tensor(dtype, shape, DeviceManager::instance().cpu()) {}

Tensor::Tensor(DType dtype, const TensorShape& shape, Device& device)
    : dtype_(dtype), shape_(shape) {
  if (!dtype_is_valid(static_cast<int>(dtype))) {
    throw InvalidArgumentError("cannot create a tensor of dtype " + std::string(dtype_name(dtype)) +
                               " (enum " + std::to_string(static_cast<int>(dtype)) + ")");
  }
  if (!shape.is_fully_defined()) {
    throw ValueError("cannot create a tensor of partially known shape " + shape.to_string());
  }
  num_elements_ = shape.num_elements();
  // Element count x element size, checked: a product that wraps around
  // would allocate a small buffer for a huge tensor.
  const size_t element_bytes = dtype == DType::kString ? sizeof(std::string) : dtype_size(dtype);
  auto oom = [&](const std::string& detail) {
    return ResourceExhaustedError("OOM when allocating tensor with shape " + shape.to_string() +
                                  " and type " + std::string(dtype_name(dtype)) + " on " +
                                  device.name() + detail);
  };
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(num_elements_), element_bytes, &bytes)) {
    throw oom(": " + std::to_string(num_elements_) + " elements of " +
              std::to_string(element_bytes) + " bytes need 2^64 bytes or more");
  }
  try {
    buffer_ = std::make_shared<internal::Buffer>(device, dtype, num_elements_);
  } catch (const ResourceExhaustedError& e) {
    throw oom(" (" + std::to_string(bytes) + " bytes): " + e.what());
  } catch (const std::bad_alloc&) {
    throw oom(" (" + std::to_string(bytes) + " bytes)");
  }
}

Tensor::Tensor(const char* value) : Tensor(from_vector<std::string>({std::string(value)}, {})) {
  weak_ = true;
}

Tensor Tensor::zeros(DType dtype, const TensorShape& shape, Device& device) {
  Tensor t(dtype, shape, device);
  if (dtype != DType::kString) device.memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::zeros(DType dtype, const TensorShape& shape) {
  return zeros(dtype, shape, DeviceManager::instance().cpu());
}

Device& Tensor::device() const {
  return buffer_ ? buffer_->device() : DeviceManager::instance().cpu();
}

void* Tensor::raw_data() const { return buffer_ ? buffer_->data() : nullptr; }

// ---------------------------------------------------------------------------
// Copies and views

Tensor Tensor::to(Device& target) const {
  if (!valid()) throw InvalidArgumentError("Tensor::to: empty tensor handle");
  Tensor out(dtype_, shape_, target);
  if (dtype_ == DType::kString) {
    if (!target.is_cpu()) {
      throw InvalidArgumentError("string tensors can only live on the CPU, not on " +
                                 target.name());
    }
    const auto* src = static_cast<const std::string*>(raw_data());
    auto* dst = static_cast<std::string*>(out.raw_data());
    for (int64_t i = 0; i < num_elements_; ++i) dst[i] = src[i];
    return out;
  }
  copy_bytes(target, out.raw_data(), device(), raw_data(), nbytes());
  return out;
}

Tensor Tensor::to_host() const { return on(DeviceManager::instance().cpu()); }

Tensor Tensor::on(Device& target) const {
  if (!valid() || &device() == &target) return *this;
  return to(target);
}

Tensor Tensor::reshaped(const TensorShape& shape) const {
  if (!shape.is_fully_defined() || shape.num_elements() != num_elements_) {
    throw InvalidArgumentError("cannot reshape a tensor of shape " + shape_.to_string() + " (" +
                               std::to_string(num_elements_) + " elements) to " +
                               shape.to_string());
  }
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::cast(DType dtype) const { return cast_tensor(*this, dtype); }

Tensor Tensor::filled(DType dtype, const TensorShape& shape, const Tensor& value, Device& device) {
  if (value.num_elements() != 1) {
    throw InvalidArgumentError("Tensor::filled: the fill value must have one element, got shape " +
                               value.shape().to_string());
  }
  Tensor scalar = value.cast(dtype).to_host();
  Tensor host(dtype, shape);
  dispatch_all(dtype, "Tensor::filled", [&](auto tag) {
    using T = decltype(tag);
    const T v = static_cast<const T*>(scalar.raw_data())[0];
    T* out = static_cast<T*>(host.raw_data());
    for (int64_t i = 0; i < host.num_elements(); ++i) out[i] = v;
    return 0;
  });
  return host.on(device);
}

Tensor convert_to_dtype(const Tensor& t, DType dtype, std::string_view what) {
  if (t.dtype() == dtype) return t;
  auto kind_fits = [&] {
    DType from = t.dtype();
    if (dtype_is_integer(from)) return dtype_is_numeric(dtype);
    if (dtype_is_floating(from)) return dtype_is_floating(dtype) || dtype_is_complex(dtype);
    if (dtype_is_complex(from)) return dtype_is_complex(dtype);
    return false;
  };
  if (!t.weakly_typed() || !kind_fits()) {
    throw TypeError(std::string(what) + ": expected dtype " + std::string(dtype_name(dtype)) +
                    ", got " + std::string(dtype_name(t.dtype())) +
                    (t.weakly_typed() ? " value that does not convert" : " tensor"));
  }
  if (dtype_is_integer(t.dtype()) && dtype_is_integer(dtype)) check_integers_fit(t, dtype, what);
  return t.cast(dtype);
}

void check_integers_fit(const Tensor& t, DType dtype, std::string_view what) {
  const Tensor host = t.to_host();
  dispatch_all(dtype, what, [&](auto to_tag) {
    using To = decltype(to_tag);
    if constexpr (std::is_integral_v<To> && !std::is_same_v<To, bool>) {
      dispatch_all(host.dtype(), what, [&](auto from_tag) {
        using From = decltype(from_tag);
        if constexpr (std::is_integral_v<From> && !std::is_same_v<From, bool>) {
          const From* values = static_cast<const From*>(host.raw_data());
          for (int64_t i = 0; i < host.num_elements(); ++i) {
            if (!std::in_range<To>(values[i])) {
              throw ValueError(std::string(what) + ": Can't convert the integer " +
                               std::to_string(values[i]) + " to a " +
                               std::string(dtype_name(dtype)) + " tensor: out of range [" +
                               std::to_string(std::numeric_limits<To>::min()) + ", " +
                               std::to_string(std::numeric_limits<To>::max()) + "]");
            }
          }
        }
        return 0;
      });
    }
    return 0;
  });
}

namespace detail {

void throw_dtype_mismatch(DType actual, DType requested, const char* what) {
  throw TypeError(std::string(what) + ": tensor has dtype " + std::string(dtype_name(actual)) +
                  ", requested element type is " + std::string(dtype_name(requested)));
}

void check_on_cpu(const Tensor& t, const char* what) {
  if (t.on_cpu()) return;
  throw FailedPreconditionError(std::string(what) + ": the tensor is on " + t.device().name() +
                                ", not the CPU: use raw_data() for a device pointer, to_host() "
                                "for host values (" +
                                t.debug_string() + ")");
}

void check_storage_type(DType actual, DType requested, size_t requested_size, const char* what) {
  if (actual == requested) return;
  // Quantized dtypes are read through their storage integers.
  if (dtype_is_quantized(actual) && dtype_is_integer(requested) &&
      dtype_size(actual) == requested_size &&
      (requested == DType::kInt8 || requested == DType::kUInt8 || requested == DType::kInt16 ||
       requested == DType::kUInt16 || requested == DType::kInt32)) {
    bool is_signed =
        actual == DType::kQInt8 || actual == DType::kQInt16 || actual == DType::kQInt32;
    bool req_signed =
        requested == DType::kInt8 || requested == DType::kInt16 || requested == DType::kInt32;
    if (is_signed == req_signed) return;
  }
  throw_dtype_mismatch(actual, requested, what);
}

}  // namespace detail

// ---------------------------------------------------------------------------
// Printing

namespace {

template <typename T>
std::string format_element(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return "b'" + v + "'";
  } else if constexpr (std::is_same_v<T, complex64> || std::is_same_v<T, complex128>) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.8g%+.8gj", static_cast<double>(v.real()),
                  static_cast<double>(v.imag()));
    return buf;
  } else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16> ||
                       std::is_floating_point_v<T>) {
    double d = static_cast<double>(
        static_cast<std::conditional_t<std::is_floating_point_v<T>, T, float>>(v));
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.8g", d);
    std::string s = buf;
    // NumPy marks integral floats with a trailing dot: "1." not "1".
    if (s.find_first_of(".en") == std::string::npos) s += ".";
    return s;
  } else if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>) {
    return std::to_string(static_cast<int>(v));
  } else {
    return std::to_string(v);
  }
}

// Summarize like NumPy past this many elements: 3 items at each edge.
constexpr int64_t kSummarizeThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

void print_level(std::ostringstream& os, const std::vector<std::string>& items,
                 const std::vector<int64_t>& dims, size_t level, int64_t offset, bool summarize,
                 size_t width) {
  if (level == dims.size()) {
    std::string s = items[offset];
    if (s.size() < width) s.insert(0, width - s.size(), ' ');
    os << s;
    return;
  }
  int64_t stride = 1;
  for (size_t i = level + 1; i < dims.size(); ++i) stride *= dims[i];
  os << "[";
  int64_t n = dims[level];
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      os << (level + 1 == dims.size() ? "... " : "...\n" + std::string(level + 1, ' '));
      i = n - kEdgeItems - 1;
      continue;
    }
    print_level(os, items, dims, level + 1, offset + i * stride, summarize, width);
    if (i + 1 < n) {
      if (level + 1 == dims.size()) {
        os << " ";
      } else {
        os << std::string(dims.size() - level - 1, '\n') << std::string(level + 1, ' ');
      }
    }
  }
  os << "]";
}

}  // namespace

std::string Tensor::to_string() const {
  if (!valid()) return "<empty tensor>";
  Tensor host = to_host();
  std::vector<std::string> items(num_elements_);
  dispatch_all(dtype_, "Tensor::to_string", [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(host.raw_data());
    for (int64_t i = 0; i < num_elements_; ++i) items[i] = format_element(p[i]);
    return 0;
  });
  if (shape_.rank() == 0) return items.empty() ? "" : items[0];
  size_t width = 0;
  for (auto& s : items) width = std::max(width, s.size());
  std::ostringstream os;
  print_level(os, items, shape_.dims(), 0, 0, num_elements_ > kSummarizeThreshold, width);
  return os.str();
}

std::string Tensor::debug_string() const {
  return "Tensor(shape=" + shape_.to_string() + ", dtype=" + std::string(dtype_name(dtype_)) +
         ", device=" + device().name() + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace varstate
