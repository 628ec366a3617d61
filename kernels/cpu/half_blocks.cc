#include "kernels/cpu/half_blocks.h"

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/f16c_inline.h"
#include "kernels/elementwise_functors.h"
#include "kernels/host16.h"

#ifdef VARSTATE_F16C_INLINE
#include <cpuid.h>
#define VARSTATE_HAVE_F16C_BUILD 1
#endif

namespace varstate::kernels::cpu {
namespace {

#ifdef VARSTATE_HAVE_F16C_BUILD
bool use_f16c() {
  // CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports has no
  // "f16c"). AVX's OS support comes with cpu_isa()'s AVX2 or AVX-512.
  static const bool f16c = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return cpu_isa() != Isa::kBaseline && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
           (ecx & bit_F16C) != 0;
  }();
  return f16c;
}

template <bool kSubtract, bool kScalar>
__attribute__((target("avx,f16c"))) void add_to_f16c(half* dst, const half* src, int64_t n) {
  const __m256 scalar = _mm256_set1_ps(host16_to_float(src[0]));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = f16c_load8(dst + i);
    const __m256 y = kScalar ? scalar : f16c_load8(src + i);
    f16c_store8<false>(dst + i, kSubtract ? _mm256_sub_ps(x, y) : _mm256_add_ps(x, y));
  }
  for (; i < n; ++i) {
    const float x = host16_to_float(dst[i]), y = host16_to_float(kScalar ? src[0] : src[i]);
    dst[i] = host16_from_float<half>(kSubtract ? x - y : x + y);
  }
}

// The scalar op: elementwise_functors.h's functor, as the other kernels.
template <HalfBinaryOp kOp>
float binary_value(float x, float y) {
  switch (kOp) {
    case HalfBinaryOp::kAdd:
      return AddFn{}(x, y, nullptr);
    case HalfBinaryOp::kSub:
      return SubFn{}(x, y, nullptr);
    case HalfBinaryOp::kMul:
      return MulFn{}(x, y, nullptr);
    case HalfBinaryOp::kDiv:
      return DivFn{}(x, y, nullptr);
    case HalfBinaryOp::kMaximum:
      return MaximumFn{}(x, y, nullptr);
    case HalfBinaryOp::kMinimum:
      return MinimumFn{}(x, y, nullptr);
  }
  return x;
}

template <HalfBinaryOp kOp>
__attribute__((target("avx,f16c"))) __m256 binary_vector(__m256 x, __m256 y) {
  switch (kOp) {
    case HalfBinaryOp::kAdd:
      return _mm256_add_ps(x, y);
    case HalfBinaryOp::kSub:
      return _mm256_sub_ps(x, y);
    case HalfBinaryOp::kMul:
      return _mm256_mul_ps(x, y);
    case HalfBinaryOp::kDiv:
      return _mm256_div_ps(x, y);
    case HalfBinaryOp::kMaximum:
    case HalfBinaryOp::kMinimum: {
      // x where x is NaN or beats y, else y (binary_value's select).
      const __m256 beats = kOp == HalfBinaryOp::kMaximum ? _mm256_cmp_ps(x, y, _CMP_GT_OQ)
                                                         : _mm256_cmp_ps(x, y, _CMP_LT_OQ);
      const __m256 take_x = _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), beats);
      // A bitwise select (GCC 12 turns _mm256_blendv_ps on a compare's
      // mask into a select per lane).
      return _mm256_or_ps(_mm256_and_ps(take_x, x), _mm256_andnot_ps(take_x, y));
    }
  }
  return x;
}

template <HalfBinaryOp kOp, bool kScalarA, bool kScalarB>
__attribute__((target("avx,f16c"))) void binary_f16c(const half* a, const half* b, half* out,
                                                     int64_t n) {
  const __m256 sa = _mm256_set1_ps(host16_to_float(a[0]));
  const __m256 sb = _mm256_set1_ps(host16_to_float(b[0]));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    f16c_store8<false>(out + i, binary_vector<kOp>(kScalarA ? sa : f16c_load8(a + i),
                                                   kScalarB ? sb : f16c_load8(b + i)));
  }
  for (; i < n; ++i) {
    const float x = host16_to_float(a[kScalarA ? 0 : i]), y = host16_to_float(b[kScalarB ? 0 : i]);
    out[i] = host16_from_float<half>(binary_value<kOp>(x, y));
  }
}

template <HalfBinaryOp kOp, bool kScalar>
__attribute__((target("avx,f16c"))) void combine_f16c(half* dst, const half* src, int64_t n) {
  const __m256 scalar = _mm256_set1_ps(kScalar ? host16_to_float(src[0]) : 0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    f16c_store8<true>(
        dst + i, binary_vector<kOp>(f16c_load8(dst + i), kScalar ? scalar : f16c_load8(src + i)));
  }
  for (; i < n; ++i) {
    const float x = host16_to_float(dst[i]), y = host16_to_float(src[kScalar ? 0 : i]);
    dst[i] = host16_from_float<half>(binary_value<kOp>(x, y));
  }
}

template <HalfBinaryOp kOp>
void binary_f16c_for(const half* a, bool a_is_scalar, const half* b, bool b_is_scalar, half* out,
                     int64_t n) {
  if (a_is_scalar) return binary_f16c<kOp, true, false>(a, b, out, n);
  if (b_is_scalar) return binary_f16c<kOp, false, true>(a, b, out, n);
  binary_f16c<kOp, false, false>(a, b, out, n);
}
#endif

}  // namespace

void widen_halves(const half* in, float* out, int64_t n) {
#ifdef VARSTATE_HAVE_F16C_BUILD
  if (use_f16c()) return f16c_widen(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = host16_to_float(in[i]);
}

void round_to_halves(const float* in, half* out, int64_t n) {
#ifdef VARSTATE_HAVE_F16C_BUILD
  if (use_f16c()) return f16c_round<false>(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = host16_from_float<half>(in[i]);
}

void round_to_halves_portable_nans(const float* in, half* out, int64_t n) {
#ifdef VARSTATE_HAVE_F16C_BUILD
  if (use_f16c()) return f16c_round<true>(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = host16_from_float<half>(in[i]);
}

bool halves_convert_in_hardware() {
#ifdef VARSTATE_HAVE_F16C_BUILD
  return use_f16c();
#else
  return false;
#endif
}

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

bool binary_halves_f16c(HalfBinaryOp op, const half* a, bool a_is_scalar, const half* b,
                        bool b_is_scalar, half* out, int64_t n) {
#ifdef VARSTATE_HAVE_F16C_BUILD
  if (!use_f16c() || (a_is_scalar && b_is_scalar)) return false;
  using Kernel = void (*)(const half*, bool, const half*, bool, half*, int64_t);
  // In HalfBinaryOp's order.
  static constexpr Kernel kKernels[] = {
      binary_f16c_for<HalfBinaryOp::kAdd>,     binary_f16c_for<HalfBinaryOp::kSub>,
      binary_f16c_for<HalfBinaryOp::kMul>,     binary_f16c_for<HalfBinaryOp::kDiv>,
      binary_f16c_for<HalfBinaryOp::kMaximum>, binary_f16c_for<HalfBinaryOp::kMinimum>};
  kKernels[static_cast<int>(op)](a, a_is_scalar, b, b_is_scalar, out, n);
  return true;
#else
  (void)op, (void)a, (void)a_is_scalar, (void)b, (void)b_is_scalar, (void)out, (void)n;
#endif
  return false;
}

bool combine_halves_f16c(HalfBinaryOp op, half* dst, const half* src, bool src_is_scalar,
                         int64_t n) {
#ifdef VARSTATE_HAVE_F16C_BUILD
  if (!use_f16c() || op == HalfBinaryOp::kMaximum || op == HalfBinaryOp::kMinimum) return false;
  using Kernel = void (*)(half*, const half*, int64_t);
  // In HalfBinaryOp's order; [op][src_is_scalar].
  static constexpr Kernel kKernels[][2] = {
      {combine_f16c<HalfBinaryOp::kAdd, false>, combine_f16c<HalfBinaryOp::kAdd, true>},
      {combine_f16c<HalfBinaryOp::kSub, false>, combine_f16c<HalfBinaryOp::kSub, true>},
      {combine_f16c<HalfBinaryOp::kMul, false>, combine_f16c<HalfBinaryOp::kMul, true>},
      {combine_f16c<HalfBinaryOp::kDiv, false>, combine_f16c<HalfBinaryOp::kDiv, true>}};
  kKernels[static_cast<int>(op)][src_is_scalar ? 1 : 0](dst, src, n);
  return true;
#else
  (void)op, (void)dst, (void)src, (void)src_is_scalar, (void)n;
#endif
  return false;
}

}  // namespace varstate::kernels::cpu
