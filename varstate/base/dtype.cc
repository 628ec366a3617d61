#include "varstate/base/dtype.h"

#include <bit>

#include "varstate/base/error.h"

namespace varstate {

half::half(float f) {
  // Round-to-nearest-even float32 -> binary16, handling subnormals, inf, NaN.
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    bits = static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    return;
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14)
    // Scale into the subnormal range using float arithmetic, which rounds to
    // nearest even exactly once: 2^-24 is the subnormal half's unit.
    float a = std::bit_cast<float>(abs);
    float scaled = a * 16777216.0f;  // a / 2^-24
    uint32_t m = static_cast<uint32_t>(scaled);
    float rem = scaled - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    bits = static_cast<uint16_t>(sign | m);
    return;
  }
  uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
  bits = static_cast<uint16_t>(sign | (abs >> 13));
}

half::operator float() const {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: value = mant * 2^-24
      float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
      out = sign | std::bit_cast<uint32_t>(v);
    }
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(out);
}

bfloat16::bfloat16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet
    bits = static_cast<uint16_t>((x >> 16) | 0x40u);
    return;
  }
  x += 0x7fffu + ((x >> 16) & 1u);
  bits = static_cast<uint16_t>(x >> 16);
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kInvalid: return "invalid";
    case DType::kFloat: return "float32";
    case DType::kDouble: return "float64";
    case DType::kInt32: return "int32";
    case DType::kUInt8: return "uint8";
    case DType::kInt16: return "int16";
    case DType::kInt8: return "int8";
    case DType::kString: return "string";
    case DType::kComplex64: return "complex64";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
    case DType::kQInt8: return "qint8";
    case DType::kQUInt8: return "quint8";
    case DType::kQInt32: return "qint32";
    case DType::kBFloat16: return "bfloat16";
    case DType::kQInt16: return "qint16";
    case DType::kQUInt16: return "quint16";
    case DType::kUInt16: return "uint16";
    case DType::kComplex128: return "complex128";
    case DType::kHalf: return "float16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
  }
  return "invalid";
}

bool dtype_is_valid(int value) {
  switch (static_cast<DType>(value)) {
#define VARSTATE_CASE(E, T) case DType::E:
    VARSTATE_FOR_EACH_DTYPE(VARSTATE_CASE)
#undef VARSTATE_CASE
    return true;
    default: return false;
  }
}

DType dtype_from_name(std::string_view name) {
  if (name == "float") return DType::kFloat;
  if (name == "double") return DType::kDouble;
  if (name == "half") return DType::kHalf;
#define VARSTATE_CASE(E, T) \
  if (name == dtype_name(DType::E)) return DType::E;
  VARSTATE_FOR_EACH_DTYPE(VARSTATE_CASE)
#undef VARSTATE_CASE
  throw InvalidArgumentError("unknown dtype name " + quoted(name));
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
#define VARSTATE_CASE(E, T) \
  case DType::E: return sizeof(T);
    VARSTATE_FOR_EACH_NUMERIC_DTYPE(VARSTATE_CASE)
#undef VARSTATE_CASE
    case DType::kBool: return 1;
    default: return 0;
  }
}

bool dtype_is_floating(DType d) {
  return d == DType::kFloat || d == DType::kDouble || d == DType::kHalf ||
         d == DType::kBFloat16;
}
bool dtype_is_complex(DType d) {
  return d == DType::kComplex64 || d == DType::kComplex128;
}
bool dtype_is_quantized(DType d) {
  return d == DType::kQInt8 || d == DType::kQUInt8 || d == DType::kQInt16 ||
         d == DType::kQUInt16 || d == DType::kQInt32;
}
bool dtype_is_integer(DType d) {
  switch (d) {
    case DType::kInt8: case DType::kInt16: case DType::kInt32:
    case DType::kInt64: case DType::kUInt8: case DType::kUInt16:
    case DType::kUInt32: case DType::kUInt64:
      return true;
    default:
      return dtype_is_quantized(d);
  }
}
bool dtype_is_numeric(DType d) {
  return dtype_is_floating(d) || dtype_is_complex(d) || dtype_is_integer(d);
}

bool dtype_has_gpu_kernels(DType d) { return d != DType::kString; }

void throw_unsupported_dtype(DType dtype, std::string_view what) {
  throw InvalidArgumentError(std::string(what) + ": unsupported dtype " +
                             std::string(dtype_name(dtype)) + " (enum " +
                             std::to_string(static_cast<int>(dtype)) + ")");
}

}  // namespace varstate
