#include "kernels/cpu/cast.h"

#include "kernels/cast_value.h"

namespace varstate::kernels::cpu {

template <typename From, typename To>
void cast(const From* in, To* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = cast_value<To>(in[i]);
}

// Instantiate every (From, To) pair of numeric storage types and bool.
#define VARSTATE_CAST_PAIRS(E, From)                                       \
  template void cast<From, float>(const From*, float*, int64_t);           \
  template void cast<From, double>(const From*, double*, int64_t);         \
  template void cast<From, half>(const From*, half*, int64_t);             \
  template void cast<From, bfloat16>(const From*, bfloat16*, int64_t);     \
  template void cast<From, int8_t>(const From*, int8_t*, int64_t);         \
  template void cast<From, int16_t>(const From*, int16_t*, int64_t);       \
  template void cast<From, int32_t>(const From*, int32_t*, int64_t);       \
  template void cast<From, int64_t>(const From*, int64_t*, int64_t);       \
  template void cast<From, uint8_t>(const From*, uint8_t*, int64_t);       \
  template void cast<From, uint16_t>(const From*, uint16_t*, int64_t);     \
  template void cast<From, uint32_t>(const From*, uint32_t*, int64_t);     \
  template void cast<From, uint64_t>(const From*, uint64_t*, int64_t);     \
  template void cast<From, complex64>(const From*, complex64*, int64_t);   \
  template void cast<From, complex128>(const From*, complex128*, int64_t); \
  template void cast<From, bool>(const From*, bool*, int64_t);
VARSTATE_FOR_EACH_NUMERIC_STORAGE_TYPE(VARSTATE_CAST_PAIRS)
VARSTATE_CAST_PAIRS(kBool, bool)
#undef VARSTATE_CAST_PAIRS

}  // namespace varstate::kernels::cpu
