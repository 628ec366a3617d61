// float16 runs to and from float with the x86 F16C instructions, inline
// into a loop built for a target with F16C (for_f16c_isa, isa_variants.h)
// that converts short runs, such as the rows of a sparse float16 update,
// where a call per run to half_blocks.h's functions costs what the
// instructions save. Elsewhere they are calls. A caller must check at run
// time that the CPU has F16C (halves_convert_in_hardware) before it
// reaches these; they exist where VARSTATE_F16C_INLINE is defined (x86-64,
// GCC or clang).
//
// The values are kernels/host16.h's: exact widening; rounding to nearest
// even, with every NaN made the quiet NaN of its sign (0x7e00 / 0xfe00) as
// the portable conversion makes it, so that the bits are the same to the
// last one whatever the CPU.
#pragma once

#include <cstdint>

#include "kernels/host16.h"
#include "varstate/dtype.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define VARSTATE_F16C_INLINE 1
#endif

namespace varstate::kernels::cpu {

#ifdef VARSTATE_F16C_INLINE
#define VARSTATE_F16C_TARGET __attribute__((target("avx,f16c"))) inline

// Eight float16 values at p, widened.
VARSTATE_F16C_TARGET __m256 f16c_load8(const half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// r with each NaN lane made the float quiet NaN of its sign, which F16C
// rounds to 0x7e00 / 0xfe00: the portable conversion's NaN (host16.h).
VARSTATE_F16C_TARGET __m256 f16c_canonical_nans(__m256 r) {
  const __m256 nan = _mm256_cmp_ps(r, r, _CMP_UNORD_Q);
  const __m256 quiet = _mm256_or_ps(_mm256_and_ps(r, _mm256_set1_ps(-0.0f)),
                                    _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)));
  return _mm256_or_ps(_mm256_and_ps(nan, quiet), _mm256_andnot_ps(nan, r));
}

// r rounded to float16 (to nearest even) at p; with kPortableNans every
// NaN the portable conversion's, else F16C keeps its payload's high bits.
template <bool kPortableNans>
VARSTATE_F16C_TARGET void f16c_store8(half* p, __m256 r) {
  if constexpr (kPortableNans) r = f16c_canonical_nans(r);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
}

// out[i] = float(in[i]) for i in [0, n).
VARSTATE_F16C_TARGET void f16c_widen(const half* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, f16c_load8(in + i));
  for (; i < n; ++i) out[i] = host16_to_float(in[i]);
}

// out[i] = half(in[i]) for i in [0, n), as f16c_store8<kPortableNans>.
template <bool kPortableNans>
VARSTATE_F16C_TARGET void f16c_round(const float* in, half* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) f16c_store8<kPortableNans>(out + i, _mm256_loadu_ps(in + i));
  for (; i < n; ++i) out[i] = host16_from_float<half>(in[i]);
}

#undef VARSTATE_F16C_TARGET
#endif

}  // namespace varstate::kernels::cpu
