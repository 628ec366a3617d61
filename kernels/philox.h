// Philox4x32-10, the counter-based random number generator TensorFlow's
// stateful random ops use, and TensorFlow's rules for turning its 32-bit
// words into numbers (uniform floats of every width, Box-Muller normals,
// uniform integers). One header compiled for the host and for CUDA devices,
// so that the CPU and GPU kernels produce the same bits.
//
// Layout as TensorFlow's PhiloxRandom (see shared/reference/formats.md 6.1):
// a 128-bit counter of four words, word 0 least significant, and a 64-bit
// key of two words. A generator seeded with (seed, seed2) has
//   key     = (low32(seed), high32(seed))
//   counter = (0, 0, low32(seed2), high32(seed2))
// and its i-th 128-bit sample is philox4x32_10(counter + i, key).
//
// The float transforms that need log, sin, cos and sqrt use
// kernels/random_math.h, whose results are the same on both sides.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include "kernels/random_math.h"

namespace varstate::kernels::rng {

// Four 32-bit words: a counter (word 0 least significant) or one sample.
struct Philox4x32 {
  uint32_t w[4];
};

struct PhiloxKey {
  uint32_t k[2];
};

// counter + (hi * 2^64 + lo), modulo 2^128.
VARSTATE_HOST_DEVICE Philox4x32 philox_add(Philox4x32 c, uint64_t lo, uint64_t hi = 0) {
  const uint64_t c_lo = (static_cast<uint64_t>(c.w[1]) << 32) | c.w[0];
  const uint64_t c_hi = (static_cast<uint64_t>(c.w[3]) << 32) | c.w[2];
  const uint64_t sum_lo = c_lo + lo;
  const uint64_t sum_hi = c_hi + hi + (sum_lo < lo ? 1 : 0);
  return {{static_cast<uint32_t>(sum_lo), static_cast<uint32_t>(sum_lo >> 32),
           static_cast<uint32_t>(sum_hi), static_cast<uint32_t>(sum_hi >> 32)}};
}

// The Philox4x32 bijection with 10 rounds: the sample for `counter`.
VARSTATE_HOST_DEVICE Philox4x32 philox4x32_10(Philox4x32 counter, PhiloxKey key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  uint32_t c0 = counter.w[0], c1 = counter.w[1], c2 = counter.w[2], c3 = counter.w[3];
  uint32_t k0 = key.k[0], k1 = key.k[1];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += kW0;
    k1 += kW1;
  }
  return {{c0, c1, c2, c3}};
}

// The sample stream of a generator seeded with (seed, seed2) as TensorFlow's
// PhiloxRandom(seed, seed2): sample(i) is what the generator returns after
// skipping i samples.
struct PhiloxStream {
  PhiloxKey key;
  Philox4x32 base;

  static VARSTATE_HOST_DEVICE PhiloxStream from_seeds(uint64_t seed, uint64_t seed2) {
    return {{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}},
            {{0u, 0u, static_cast<uint32_t>(seed2), static_cast<uint32_t>(seed2 >> 32)}}};
  }

  // Sample at counter offset hi * 2^64 + lo.
  VARSTATE_HOST_DEVICE Philox4x32 sample(uint64_t lo, uint64_t hi = 0) const {
    return philox4x32_10(philox_add(base, lo, hi), key);
  }
};

// ---- Words to uniform numbers in [0, 1) -----------------------------------
// Each puts random bits in the mantissa of a number in [1, 2) and subtracts
// 1, as TensorFlow does; the subtraction is exact.

// 23 low bits of w.
VARSTATE_HOST_DEVICE float uniform_float(uint32_t w) {
  return sub_rn(bits_float(0x3f800000u | (w & 0x007fffffu)), 1.0f);
}

// 20 low bits of w_hi above the 32 bits of w_lo.
VARSTATE_HOST_DEVICE double uniform_double(uint32_t w_hi, uint32_t w_lo) {
  const uint64_t mantissa = (static_cast<uint64_t>(w_hi & 0xfffffu) << 32) | w_lo;
  return sub_rn(bits_double(0x3ff0000000000000ull | mantissa), 1.0);
}

// A float16 in [0, 1) from the 10 low bits of w, returned as the float of
// equal value (every value is exact in both).
VARSTATE_HOST_DEVICE float uniform_half(uint32_t w) {
  return sub_rn(bits_float(0x3f800000u | ((w & 0x3ffu) << 13)), 1.0f);
}

// A bfloat16 in [0, 1) from the 7 low bits of w, as the float of equal value.
VARSTATE_HOST_DEVICE float uniform_bfloat16(uint32_t w) {
  return sub_rn(bits_float(0x3f800000u | ((w & 0x7fu) << 16)), 1.0f);
}

// ---- Rounding floats to 16-bit storage --------------------------------------

// float -> IEEE binary16 bits, round to nearest even (overflow -> inf).
VARSTATE_HOST_DEVICE uint16_t half_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(x));
#else
  // Every case computed and one selected, without a branch, so that the
  // CPU kernels' loops over 16-bit values vectorize.
  const uint32_t u = float_bits(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  // >= 65536 (and 65520 and up, by the rounding below): inf; NaN: quiet.
  const uint32_t inf_nan = a > 0x7f800000u ? 0x7e00u : 0x7c00u;
  // A normal half: rebias the exponent (-112 << 23), round 13 bits to
  // nearest even (0xfff plus the kept lowest bit, then truncate).
  const uint32_t normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
  // Below 2^-14, a subnormal half (or zero): adding 0.5 rounds a to a
  // multiple of 2^-24, the half's unit, to nearest even, in the float
  // adder; the bits above 0.5's are the half's.
  const uint32_t subnormal = float_bits(bits_float(a) + 0.5f) - 0x3f000000u;
  const uint32_t h = a >= 0x47800000u ? inf_nan : (a < 0x38800000u ? subnormal : normal);
  return static_cast<uint16_t>(sign | h);
#endif
}

// IEEE binary16 bits -> float (exact).
VARSTATE_HOST_DEVICE float half_value(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  // Without a branch, as half_bits.
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t bits = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t exponent = bits & 0x0f800000u;
  const uint32_t normal = bits + (112u << 23);     // rebias the exponent
  const uint32_t inf_nan = normal + (112u << 23);  // exponent 31 -> 255
  // Zero or subnormal: mantissa * 2^-24, exact, as 2^-14 + mantissa * 2^-24
  // less 2^-14.
  const uint32_t subnormal = float_bits(bits_float(normal + (1u << 23)) - bits_float(113u << 23));
  return bits_float(sign | (exponent == 0x0f800000u ? inf_nan
                            : exponent == 0         ? subnormal
                                                    : normal));
#endif
}

// float -> bfloat16 bits, round to nearest even (NaN stays NaN).
VARSTATE_HOST_DEVICE uint16_t bfloat16_bits(float x) {
  const uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

VARSTATE_HOST_DEVICE float bfloat16_value(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

// ---- Normal samples ---------------------------------------------------------

// Box-Muller on a word pair, as TensorFlow's BoxMullerFloat: u1 = uniform(x0)
// raised to at least 1e-7, v1 = 2*pi*uniform(x1) (product in double, rounded
// to float), r = sqrt(-2 log u1); returns r*sin(v1), r*cos(v1).
VARSTATE_HOST_DEVICE void box_muller(uint32_t x0, uint32_t x1, float* f0, float* f1) {
  constexpr double kTwoPi = 0x1.921fb54442d18p+2;
  float u1 = uniform_float(x0);
  if (u1 < 1.0e-7f) u1 = 1.0e-7f;
  const float v1 = static_cast<float>(mul_rn(kTwoPi, static_cast<double>(uniform_float(x1))));
  const float r = sqrt_rn(mul_rn(-2.0f, portable_log(u1)));
  float s, c;
  portable_sincos(v1, &s, &c);
  *f0 = mul_rn(s, r);
  *f1 = mul_rn(c, r);
}

// Box-Muller on two word pairs, as TensorFlow's BoxMullerDouble.
VARSTATE_HOST_DEVICE void box_muller(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3, double* d0,
                                     double* d1) {
  constexpr double kTwoPi = 0x1.921fb54442d18p+2;
  double u1 = uniform_double(x0, x1);
  if (u1 < 1.0e-7) u1 = 1.0e-7;
  const double v1 = mul_rn(kTwoPi, uniform_double(x2, x3));
  const double r = sqrt_rn(mul_rn(-2.0, portable_log(u1)));
  double s, c;
  portable_sincos(v1, &s, &c);
  *d0 = mul_rn(s, r);
  *d1 = mul_rn(c, r);
}

// ---- Uniform integers ---------------------------------------------------------
// lo + (bits mod range), range = hi - lo as unsigned (TensorFlow accepts the
// modulo bias). Requires lo < hi.

VARSTATE_HOST_DEVICE int32_t uniform_int32(uint32_t w, int32_t lo, uint32_t range) {
  return static_cast<int32_t>(static_cast<uint32_t>(lo) + w % range);
}

// 64 random bits from (w_lo, w_hi).
VARSTATE_HOST_DEVICE int64_t uniform_int64(uint32_t w_lo, uint32_t w_hi, int64_t lo,
                                           uint64_t range) {
  const uint64_t bits = (static_cast<uint64_t>(w_hi) << 32) | w_lo;
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + bits % range);
}

}  // namespace varstate::kernels::rng
