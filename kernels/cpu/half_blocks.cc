#include "kernels/cpu/half_blocks.h"

#include "kernels/cpu/cpu_isa.h"
#include "kernels/host16.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define VARSTATE_HAVE_F16C_BUILD 1
#endif

namespace varstate::kernels::cpu {
namespace {

#ifdef VARSTATE_HAVE_F16C_BUILD
bool use_f16c() {
  static const bool f16c = [] {
    __builtin_cpu_init();
    return cpu_isa() != Isa::kBaseline && __builtin_cpu_supports("f16c");
  }();
  return f16c;
}

__attribute__((target("avx,f16c"))) void widen_f16c(const half* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = host16_to_float(in[i]);
}

__attribute__((target("avx,f16c"))) void round_f16c(const float* in, half* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = host16_from_float<half>(in[i]);
}
#endif

}  // namespace

void widen_halves(const half* in, float* out, int64_t n) {
#ifdef VARSTATE_HAVE_F16C_BUILD
  if (use_f16c()) return widen_f16c(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = host16_to_float(in[i]);
}

void round_to_halves(const float* in, half* out, int64_t n) {
#ifdef VARSTATE_HAVE_F16C_BUILD
  if (use_f16c()) return round_f16c(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = host16_from_float<half>(in[i]);
}

}  // namespace varstate::kernels::cpu
