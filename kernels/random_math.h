// Floating-point arithmetic that gives the same bits on the host and on a
// CUDA device, for the random-number transforms of kernels/philox.h.
//
// Every operation here is one IEEE 754 operation rounded to nearest even
// (add, multiply, fused multiply-add, divide, square root), spelled with the
// CUDA intrinsic on the device and the plain operator or std:: function on
// the host. The logarithm and sine/cosine are built from those operations
// only (argument reduction + polynomial), never from libm or CUDA's math
// library, which disagree in the last bits. Translation units that include
// this header must not contract a*b+c into an fma on their own: nvcc runs
// with --fmad=false, and host files are compiled with -ffp-contract=off.
//
// Accuracy on the inputs of the Box-Muller transform (measured by
// test_kernels_random: every float input, 2^19 random double inputs; run it
// with -s to print the figures), max error in ulps:
//            float   double    glibc on the same inputs: float, double
//   log      0.90    1.07      0.79, 0.52
//   sin      0.94    0.91      0.56, 0.52
//   cos      0.95    0.92      0.56, 0.52
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

// Inlined everywhere: on the host too, so that the CPU kernels' FMA build
// (kernels/cpu/random.cc) gets the transforms inlined into it.
#if defined(__CUDACC__)
#define VARSTATE_HOST_DEVICE __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define VARSTATE_HOST_DEVICE inline __attribute__((always_inline))
#else
#define VARSTATE_HOST_DEVICE inline
#endif

namespace varstate::kernels::rng {

VARSTATE_HOST_DEVICE uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

VARSTATE_HOST_DEVICE float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

VARSTATE_HOST_DEVICE uint64_t double_bits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

VARSTATE_HOST_DEVICE double bits_double(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// Single correctly rounded operations. The device intrinsics are never
// contracted or approximated, whatever the compiler flags.
#if defined(__CUDA_ARCH__)
VARSTATE_HOST_DEVICE float add_rn(float a, float b) { return __fadd_rn(a, b); }
VARSTATE_HOST_DEVICE float sub_rn(float a, float b) { return __fsub_rn(a, b); }
VARSTATE_HOST_DEVICE float mul_rn(float a, float b) { return __fmul_rn(a, b); }
VARSTATE_HOST_DEVICE float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
VARSTATE_HOST_DEVICE float div_rn(float a, float b) { return __fdiv_rn(a, b); }
VARSTATE_HOST_DEVICE float sqrt_rn(float a) { return __fsqrt_rn(a); }
VARSTATE_HOST_DEVICE double add_rn(double a, double b) { return __dadd_rn(a, b); }
VARSTATE_HOST_DEVICE double sub_rn(double a, double b) { return __dsub_rn(a, b); }
VARSTATE_HOST_DEVICE double mul_rn(double a, double b) { return __dmul_rn(a, b); }
VARSTATE_HOST_DEVICE double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }
VARSTATE_HOST_DEVICE double div_rn(double a, double b) { return __ddiv_rn(a, b); }
VARSTATE_HOST_DEVICE double sqrt_rn(double a) { return __dsqrt_rn(a); }
#else
VARSTATE_HOST_DEVICE float add_rn(float a, float b) { return a + b; }
VARSTATE_HOST_DEVICE float sub_rn(float a, float b) { return a - b; }
VARSTATE_HOST_DEVICE float mul_rn(float a, float b) { return a * b; }
VARSTATE_HOST_DEVICE float fma_rn(float a, float b, float c) { return std::fma(a, b, c); }
VARSTATE_HOST_DEVICE float div_rn(float a, float b) { return a / b; }
VARSTATE_HOST_DEVICE float sqrt_rn(float a) { return std::sqrt(a); }
VARSTATE_HOST_DEVICE double add_rn(double a, double b) { return a + b; }
VARSTATE_HOST_DEVICE double sub_rn(double a, double b) { return a - b; }
VARSTATE_HOST_DEVICE double mul_rn(double a, double b) { return a * b; }
VARSTATE_HOST_DEVICE double fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
VARSTATE_HOST_DEVICE double div_rn(double a, double b) { return a / b; }
VARSTATE_HOST_DEVICE double sqrt_rn(double a) { return std::sqrt(a); }
#endif

// Natural logarithm of a positive, finite, normal x.
//
// x = 2^e * m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact), and
// log(m) = 2 atanh(s) with s = f / (2 + f), |s| < 0.172. Written as
// log(m) = f - s * (f - R(s^2)), R = 2s^2/3 + 2s^4/5 + ..., so that the
// rounding error of s is damped by |s|. Taylor coefficients (exact
// fractions rounded once); the truncation error is below 2^-28 (float) and
// 2^-60 (double) relative. e*ln2 is added in two parts, the high part with
// enough trailing zero bits that e*ln2_hi is exact.
VARSTATE_HOST_DEVICE float portable_log(float x) {
  const uint32_t ix = float_bits(x);
  const int32_t e = static_cast<int32_t>(ix - 0x3f3504f3u) >> 23;  // sqrt(1/2)
  const float m = bits_float(ix - (static_cast<uint32_t>(e) << 23));
  const float f = sub_rn(m, 1.0f);
  const float s = div_rn(f, add_rn(2.0f, f));
  const float z = mul_rn(s, s);
  float r = fma_rn(z, 0x1.c71c72p-3f, 0x1.24924ap-2f);  // 2/9, 2/7
  r = fma_rn(z, r, 0x1.99999ap-2f);                     // 2/5
  r = fma_rn(z, r, 0x1.555556p-1f);                     // 2/3
  r = mul_rn(z, r);
  const float log_m = fma_rn(-s, sub_rn(f, r), f);
  const float fe = static_cast<float>(e);
  return fma_rn(fe, 0x1.62e4p-1f, fma_rn(fe, 0x1.7f7d1cp-20f, log_m));  // ln2 hi, lo
}

VARSTATE_HOST_DEVICE double portable_log(double x) {
  const uint64_t ix = double_bits(x);
  const int64_t e = static_cast<int64_t>(ix - 0x3fe6a09e667f3bcdull) >> 52;  // sqrt(1/2)
  const double m = bits_double(ix - (static_cast<uint64_t>(e) << 52));
  const double f = sub_rn(m, 1.0);
  const double s = div_rn(f, add_rn(2.0, f));
  const double z = mul_rn(s, s);
  double r = fma_rn(z, 0x1.8618618618618p-4, 0x1.af286bca1af28p-4);  // 2/21, 2/19
  r = fma_rn(z, r, 0x1.e1e1e1e1e1e1ep-4);                            // 2/17
  r = fma_rn(z, r, 0x1.1111111111111p-3);                            // 2/15
  r = fma_rn(z, r, 0x1.3b13b13b13b14p-3);                            // 2/13
  r = fma_rn(z, r, 0x1.745d1745d1746p-3);                            // 2/11
  r = fma_rn(z, r, 0x1.c71c71c71c71cp-3);                            // 2/9
  r = fma_rn(z, r, 0x1.2492492492492p-2);                            // 2/7
  r = fma_rn(z, r, 0x1.999999999999ap-2);                            // 2/5
  r = fma_rn(z, r, 0x1.5555555555555p-1);                            // 2/3
  r = mul_rn(z, r);
  const double log_m = fma_rn(-s, sub_rn(f, r), f);
  const double fe = static_cast<double>(e);
  return fma_rn(fe, 0x1.62e42fefa38p-1, fma_rn(fe, 0x1.ef35793c7673p-45, log_m));
}

// sin(x) and cos(x) for |x| <= 64 (the Box-Muller angle is in [0, 2*pi)).
//
// x = k*pi/2 + r with |r| <= pi/4: k by rounding x*2/pi with the 1.5*2^23
// (2^52) shifter, r by subtracting k*pi/2 in three parts (the first
// subtraction is exact for the k that occur). Then Taylor polynomials in
// r^2, up to r^9 / r^10 (float) and r^17 / r^16 (double), whose truncation
// error is below 2^-28 / 2^-57 relative, with the low part of r added to
// the first-order terms; the quadrant k mod 4 picks and negates.
VARSTATE_HOST_DEVICE void portable_sincos(float x, float* sin_x, float* cos_x) {
  const float shifted = add_rn(mul_rn(x, 0x1.45f306p-1f), 0x1.8p23f);  // 2/pi
  const float k = sub_rn(shifted, 0x1.8p23f);
  const uint32_t quadrant = float_bits(shifted) & 3u;
  // r + r_lo = x - k*pi/2 to about 2^-48 relative, pi/2 = C1 + C2 + C3:
  // x - k*C1 is exact, the rest is an exact product split and a TwoSum.
  const float r1 = fma_rn(-k, 0x1.921fb6p+0f, x);
  const float p = mul_rn(k, -0x1.777a5cp-25f);
  const float p_err = fma_rn(k, -0x1.777a5cp-25f, -p);
  const float r = sub_rn(r1, p);
  const float t = sub_rn(r, r1);
  const float sum_err = add_rn(sub_rn(r1, sub_rn(r, t)), sub_rn(-p, t));
  const float r_lo = fma_rn(-k, -0x1.ee59dap-50f, sub_rn(sum_err, p_err));
  const float z = mul_rn(r, r);
  const float z_lo = fma_rn(r, r, -z);
  float ps = fma_rn(z, 0x1.71de3ap-19f, -0x1.a01a02p-13f);  // 1/9!, -1/7!
  ps = fma_rn(z, ps, 0x1.111112p-7f);                       // 1/5!
  ps = fma_rn(z, ps, -0x1.555556p-3f);                      // -1/3!
  // sin(r + r_lo) = r + r^3 ps(r^2) + r_lo cos(r), cos(r) ~ 1 - r^2/2.
  const float s = add_rn(r, fma_rn(mul_rn(r, z), ps, fma_rn(mul_rn(-0.5f, z), r_lo, r_lo)));
  float pc = fma_rn(z, -0x1.27e4fcp-22f, 0x1.a01a02p-16f);  // -1/10!, 1/8!
  pc = fma_rn(z, pc, -0x1.6c16c2p-10f);                     // -1/6!
  pc = fma_rn(z, pc, 0x1.555556p-5f);                       // 1/4!
  pc = fma_rn(z, pc, -0.5f);
  // cos(r + r_lo) = 1 + z pc(z) - z_lo/2 - r r_lo, z + z_lo = r^2 exactly.
  const float c = add_rn(1.0f, fma_rn(z, pc, fma_rn(-r, r_lo, mul_rn(-0.5f, z_lo))));
  const float sin_r = (quadrant & 1u) ? c : s;
  const float cos_r = (quadrant & 1u) ? s : c;
  *sin_x = (quadrant & 2u) ? -sin_r : sin_r;
  *cos_x = ((quadrant + 1u) & 2u) ? -cos_r : cos_r;
}

VARSTATE_HOST_DEVICE void portable_sincos(double x, double* sin_x, double* cos_x) {
  const double shifted = add_rn(mul_rn(x, 0x1.45f306dc9c883p-1), 0x1.8p52);  // 2/pi
  const double k = sub_rn(shifted, 0x1.8p52);
  const uint32_t quadrant = static_cast<uint32_t>(double_bits(shifted)) & 3u;
  const double r1 = fma_rn(-k, 0x1.921fb54442d18p+0, x);  // as for float
  const double p = mul_rn(k, 0x1.1a62633145c07p-54);
  const double p_err = fma_rn(k, 0x1.1a62633145c07p-54, -p);
  const double r = sub_rn(r1, p);
  const double t = sub_rn(r, r1);
  const double sum_err = add_rn(sub_rn(r1, sub_rn(r, t)), sub_rn(-p, t));
  const double r_lo = fma_rn(-k, -0x1.f1976b7ed8fbcp-110, sub_rn(sum_err, p_err));
  const double z = mul_rn(r, r);
  const double z_lo = fma_rn(r, r, -z);
  double ps = fma_rn(z, 0x1.952c77030ad4ap-49, -0x1.ae7f3e733b81fp-41);  // 1/17!, -1/15!
  ps = fma_rn(z, ps, 0x1.6124613a86d09p-33);                             // 1/13!
  ps = fma_rn(z, ps, -0x1.ae64567f544e4p-26);                            // -1/11!
  ps = fma_rn(z, ps, 0x1.71de3a556c734p-19);                             // 1/9!
  ps = fma_rn(z, ps, -0x1.a01a01a01a01ap-13);                            // -1/7!
  ps = fma_rn(z, ps, 0x1.1111111111111p-7);                              // 1/5!
  ps = fma_rn(z, ps, -0x1.5555555555555p-3);                             // -1/3!
  const double s = add_rn(r, fma_rn(mul_rn(r, z), ps, fma_rn(mul_rn(-0.5, z), r_lo, r_lo)));
  double pc = fma_rn(z, 0x1.ae7f3e733b81fp-45, -0x1.93974a8c07c9dp-37);  // 1/16!, -1/14!
  pc = fma_rn(z, pc, 0x1.1eed8eff8d898p-29);                             // 1/12!
  pc = fma_rn(z, pc, -0x1.27e4fb7789f5cp-22);                            // -1/10!
  pc = fma_rn(z, pc, 0x1.a01a01a01a01ap-16);                             // 1/8!
  pc = fma_rn(z, pc, -0x1.6c16c16c16c17p-10);                            // -1/6!
  pc = fma_rn(z, pc, 0x1.5555555555555p-5);                              // 1/4!
  pc = fma_rn(z, pc, -0.5);
  const double c = add_rn(1.0, fma_rn(z, pc, fma_rn(-r, r_lo, mul_rn(-0.5, z_lo))));
  const double sin_r = (quadrant & 1u) ? c : s;
  const double cos_r = (quadrant & 1u) ? s : c;
  *sin_x = (quadrant & 2u) ? -sin_r : sin_r;
  *cos_x = ((quadrant + 1u) & 2u) ? -cos_r : cos_r;
}

}  // namespace varstate::kernels::rng
