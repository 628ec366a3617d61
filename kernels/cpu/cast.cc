#include "kernels/cpu/cast.h"

#include <type_traits>

#include "kernels/cast_value.h"
#include "kernels/cpu/half_blocks.h"
#include "kernels/cpu/isa_variants.h"
#include "kernels/cpu/parallel.h"

namespace varstate::kernels::cpu {

namespace {

template <typename From, typename To>
void cast_range(const From* __restrict in, To* __restrict out, int64_t first, int64_t last) {
  for (int64_t i = first; i < last; ++i) out[i] = cast_value<To>(in[i]);
}

}  // namespace

// Split over the pool as the element-wise ops are (bytes read + written).
template <typename From, typename To>
void cast(const From* in, To* out, int64_t n) {
  const auto bytes = static_cast<int64_t>(sizeof(From) + sizeof(To));
  for_ranges(n, 64, n * bytes, parallel_thresholds().elementwise_bytes,
             [&](int64_t first, int64_t last) {
               // Between floating types, built per instruction set
               // (isa_variants.h): float16's rounding is a dozen integer
               // operations an element, and vectorizes.
               if constexpr (std::is_same_v<From, half> && std::is_same_v<To, float>) {
                 widen_halves(in + first, out + first, last - first);  // F16C
               } else if constexpr (std::is_same_v<From, float> && std::is_same_v<To, half>) {
                 round_to_halves(in + first, out + first, last - first);
               } else if constexpr (kIsFloating<From> && kIsFloating<To>) {
                 for_cpu_isa([&] { cast_range(in, out, first, last); });
               } else {
                 cast_range(in, out, first, last);
               }
             });
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
