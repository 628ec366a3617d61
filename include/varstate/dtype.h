// Element types of tensors and variables.
//
// DType carries TensorFlow's DataType enum numbers (types.proto), so a value
// can be written to and read from TensorFlow protos and checkpoints as is.
// One X-macro list (VARSTATE_DTYPES_* below) names every type varstate stores
// with its C++ storage type, its name and its category; names, sizes,
// categories and all dtype dispatch are generated from it, so adding a dtype
// touches one place (and the DType enum for its number).
//
// half and bfloat16 are 16-bit storage types with float conversions; kernels
// reinterpret them as their native types (__half / Eigen::half, ...). The
// quantized types (qint8, quint8, qint16, quint16, qint32) are stored and
// computed on as their underlying integers.
#pragma once

#include <complex>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace varstate {

enum class DType : int {
  kInvalid = 0,
  kFloat = 1,
  kDouble = 2,
  kInt32 = 3,
  kUInt8 = 4,
  kInt16 = 5,
  kInt8 = 6,
  kString = 7,
  kComplex64 = 8,
  kInt64 = 9,
  kBool = 10,
  kQInt8 = 11,
  kQUInt8 = 12,
  kQInt32 = 13,
  kBFloat16 = 14,
  kQInt16 = 15,
  kQUInt16 = 16,
  kUInt16 = 17,
  kComplex128 = 18,
  kHalf = 19,
  kUInt32 = 22,
  kUInt64 = 23,
};

// IEEE 754 binary16, stored as bits. Conversions round to nearest even.
struct half {
  uint16_t bits = 0;
  half() = default;
  explicit half(float f);
  explicit operator float() const;
  static half from_bits(uint16_t b) {
    half h;
    h.bits = b;
    return h;
  }
};

// bfloat16: the upper 16 bits of a float32. Conversion rounds to nearest even.
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float f);
  explicit operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  static bfloat16 from_bits(uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
};

inline bool operator==(half a, half b) { return float(a) == float(b); }
inline bool operator==(bfloat16 a, bfloat16 b) { return float(a) == float(b); }

using complex64 = std::complex<float>;
using complex128 = std::complex<double>;

// The dtype list: F(X, DType enumerator, C++ storage type, Python name) for
// every type varstate stores, one list per category. Names, sizes, the
// dtype_is_*() categories, DTypeOf and all dispatch are generated from it,
// so adding a dtype means adding one line here. F is an adapter macro that
// receives the user's X (see VARSTATE_DTYPE_ENTRY below).
#define VARSTATE_DTYPES_FLOATING(F, X)     \
  F(X, kFloat, float, "float32")           \
  F(X, kDouble, double, "float64")         \
  F(X, kHalf, ::varstate::half, "float16") \
  F(X, kBFloat16, ::varstate::bfloat16, "bfloat16")
#define VARSTATE_DTYPES_INTEGER(F, X) \
  F(X, kInt8, int8_t, "int8")         \
  F(X, kInt16, int16_t, "int16")      \
  F(X, kInt32, int32_t, "int32")      \
  F(X, kInt64, int64_t, "int64")      \
  F(X, kUInt8, uint8_t, "uint8")      \
  F(X, kUInt16, uint16_t, "uint16")   \
  F(X, kUInt32, uint32_t, "uint32")   \
  F(X, kUInt64, uint64_t, "uint64")
#define VARSTATE_DTYPES_COMPLEX(F, X)                  \
  F(X, kComplex64, ::varstate::complex64, "complex64") \
  F(X, kComplex128, ::varstate::complex128, "complex128")
// Quantized types are stored and computed on as their underlying integers.
#define VARSTATE_DTYPES_QUANTIZED(F, X) \
  F(X, kQInt8, int8_t, "qint8")         \
  F(X, kQUInt8, uint8_t, "quint8")      \
  F(X, kQInt16, int16_t, "qint16")      \
  F(X, kQUInt16, uint16_t, "quint16")   \
  F(X, kQInt32, int32_t, "qint32")
#define VARSTATE_DTYPES_OTHER(F, X) \
  F(X, kBool, bool, "bool")         \
  F(X, kString, std::string, "string")

// Adapters: X(enumerator, storage type), or X(enumerator, storage type, name).
#define VARSTATE_DTYPE_ENTRY(X, E, T, N) X(E, T)
#define VARSTATE_DTYPE_ENTRY_NAMED(X, E, T, N) X(E, T, N)

// X(DType enumerator, C++ storage type) for each distinct numeric storage
// type: what kernels are instantiated for.
#define VARSTATE_FOR_EACH_NUMERIC_STORAGE_TYPE(X)   \
  VARSTATE_DTYPES_FLOATING(VARSTATE_DTYPE_ENTRY, X) \
  VARSTATE_DTYPES_INTEGER(VARSTATE_DTYPE_ENTRY, X)  \
  VARSTATE_DTYPES_COMPLEX(VARSTATE_DTYPE_ENTRY, X)

// Every numeric dtype (no bool, no string): the storage types above plus the
// quantized types, which are stored as their underlying integers.
#define VARSTATE_FOR_EACH_NUMERIC_DTYPE(X)  \
  VARSTATE_FOR_EACH_NUMERIC_STORAGE_TYPE(X) \
  VARSTATE_DTYPES_QUANTIZED(VARSTATE_DTYPE_ENTRY, X)

// Every storable type: the numeric ones plus bool and string.
#define VARSTATE_FOR_EACH_DTYPE(X)   \
  VARSTATE_FOR_EACH_NUMERIC_DTYPE(X) \
  VARSTATE_DTYPES_OTHER(VARSTATE_DTYPE_ENTRY, X)

// "float32", "int64", "bfloat16", ... (TensorFlow's Python names).
std::string_view dtype_name(DType dtype);
// Parses a name from dtype_name() (also "float"/"double"/"half" aliases);
// throws InvalidArgumentError quoting the name when it is unknown.
DType dtype_from_name(std::string_view name);
// Bytes per element; 0 for kString (variable length) and kInvalid.
size_t dtype_size(DType dtype);
// True for a value of the DType enum that varstate stores.
bool dtype_is_valid(int value);

bool dtype_is_floating(DType dtype);  // half, bfloat16, float, double
bool dtype_is_complex(DType dtype);
bool dtype_is_integer(DType dtype);  // signed/unsigned and quantized ints
bool dtype_is_quantized(DType dtype);
bool dtype_is_numeric(DType dtype);  // everything but bool and string
// False for the dtypes whose tensors live on the CPU only (string).
bool dtype_has_gpu_kernels(DType dtype);

// The DType of a C++ storage type (float -> kFloat, int32_t -> kInt32, ...).
// For types shared by a quantized dtype, the plain integer dtype.
template <typename T>
struct DTypeOf;
#define VARSTATE_DTYPE_OF(E, T)              \
  template <>                                \
  struct DTypeOf<T> {                        \
    static constexpr DType value = DType::E; \
  };
VARSTATE_FOR_EACH_NUMERIC_STORAGE_TYPE(VARSTATE_DTYPE_OF)
VARSTATE_DTYPES_OTHER(VARSTATE_DTYPE_ENTRY, VARSTATE_DTYPE_OF)
#undef VARSTATE_DTYPE_OF
template <typename T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

// Calls fn(T{}) -- a value-initialised object of dtype's storage type -- and
// returns its result. Throws InvalidArgumentError for dtypes not in the list.
// `what` names the operation for the error message.
template <typename Fn>
decltype(auto) dispatch_numeric(DType dtype, std::string_view what, Fn&& fn);
template <typename Fn>
decltype(auto) dispatch_all(DType dtype, std::string_view what, Fn&& fn);

[[noreturn]] void throw_unsupported_dtype(DType dtype, std::string_view what);

template <typename Fn>
decltype(auto) dispatch_numeric(DType dtype, std::string_view what, Fn&& fn) {
  switch (dtype) {
#define VARSTATE_CASE(E, T) \
  case DType::E:            \
    return fn(T{});
    VARSTATE_FOR_EACH_NUMERIC_DTYPE(VARSTATE_CASE)
#undef VARSTATE_CASE
    default:
      throw_unsupported_dtype(dtype, what);
  }
}

template <typename Fn>
decltype(auto) dispatch_all(DType dtype, std::string_view what, Fn&& fn) {
  switch (dtype) {
#define VARSTATE_CASE(E, T) \
  case DType::E:            \
    return fn(T{});
    VARSTATE_FOR_EACH_DTYPE(VARSTATE_CASE)
#undef VARSTATE_CASE
    default:
      throw_unsupported_dtype(dtype, what);
  }
}

}  // namespace varstate
