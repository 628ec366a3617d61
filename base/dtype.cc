#include "varstate/dtype.h"

#include <bit>

#include "varstate/error.h"

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
#define VARSTATE_CASE(E, T, N) \
  case DType::E:               \
    return N;
    VARSTATE_DTYPES_FLOATING(VARSTATE_DTYPE_ENTRY_NAMED, VARSTATE_CASE)
    VARSTATE_DTYPES_INTEGER(VARSTATE_DTYPE_ENTRY_NAMED, VARSTATE_CASE)
    VARSTATE_DTYPES_COMPLEX(VARSTATE_DTYPE_ENTRY_NAMED, VARSTATE_CASE)
    VARSTATE_DTYPES_QUANTIZED(VARSTATE_DTYPE_ENTRY_NAMED, VARSTATE_CASE)
    VARSTATE_DTYPES_OTHER(VARSTATE_DTYPE_ENTRY_NAMED, VARSTATE_CASE)
#undef VARSTATE_CASE
    case DType::kInvalid:
      break;
  }
  return "invalid";
}

bool dtype_is_valid(int value) {
  switch (static_cast<DType>(value)) {
#define VARSTATE_CASE(E, T) case DType::E:
    VARSTATE_FOR_EACH_DTYPE(VARSTATE_CASE)
#undef VARSTATE_CASE
    return true;
    default:
      return false;
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
  case DType::E:            \
    return sizeof(T);
    VARSTATE_FOR_EACH_NUMERIC_DTYPE(VARSTATE_CASE)
#undef VARSTATE_CASE
    case DType::kBool:
      return 1;
    default:
      return 0;
  }
}

// True if d is in the category list LIST of dtype.h.
#define VARSTATE_CATEGORY_CASE(E, T) case DType::E:
#define VARSTATE_IN_CATEGORY(LIST, d)                  \
  switch (d) {                                         \
    LIST(VARSTATE_DTYPE_ENTRY, VARSTATE_CATEGORY_CASE) \
    return true;                                       \
    default:                                           \
      return false;                                    \
  }

bool dtype_is_floating(DType d) { VARSTATE_IN_CATEGORY(VARSTATE_DTYPES_FLOATING, d) }
bool dtype_is_complex(DType d) { VARSTATE_IN_CATEGORY(VARSTATE_DTYPES_COMPLEX, d) }
bool dtype_is_quantized(DType d) { VARSTATE_IN_CATEGORY(VARSTATE_DTYPES_QUANTIZED, d) }
bool dtype_is_integer(DType d) {
  if (dtype_is_quantized(d)) return true;
  VARSTATE_IN_CATEGORY(VARSTATE_DTYPES_INTEGER, d)
}
#undef VARSTATE_IN_CATEGORY
#undef VARSTATE_CATEGORY_CASE
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
