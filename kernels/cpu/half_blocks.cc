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

template <bool kSubtract, bool kScalar>
__attribute__((target("avx,f16c"))) void add_to_f16c(half* dst, const half* src, int64_t n) {
  const __m256 scalar = _mm256_set1_ps(host16_to_float(src[0]));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dst + i)));
    const __m256 y =
        kScalar ? scalar
                : _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    const __m256 r = kSubtract ? _mm256_sub_ps(x, y) : _mm256_add_ps(x, y);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) {
    const float x = host16_to_float(dst[i]), y = host16_to_float(kScalar ? src[0] : src[i]);
    dst[i] = host16_from_float<half>(kSubtract ? x - y : x + y);
  }
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

namespace varstate::kernels::cpu {

void add_to_halves(half* dst, const half* src, int64_t n, bool subtract, bool src_is_scalar) {
#ifdef VARSTATE_HAVE_F16C_BUILD
  if (use_f16c()) {
    if (subtract) {
      return src_is_scalar ? add_to_f16c<true, true>(dst, src, n)
                           : add_to_f16c<true, false>(dst, src, n);
    }
    return src_is_scalar ? add_to_f16c<false, true>(dst, src, n)
                         : add_to_f16c<false, false>(dst, src, n);
  }
#endif
  for (int64_t i = 0; i < n; ++i) {
    const float x = host16_to_float(dst[i]), y = host16_to_float(src_is_scalar ? src[0] : src[i]);
    dst[i] = host16_from_float<half>(subtract ? x - y : x + y);
  }
}

}  // namespace varstate::kernels::cpu
