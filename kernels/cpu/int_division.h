// Integer floor division and floor modulo without the divide instruction,
// bit for bit FloorDivFn and FloorModFn (kernels/elementwise_functors.h):
//
//  - by one divisor for a whole tensor (`ids % buckets`, `ids // shards`):
//    a multiplication by a precomputed reciprocal, after Granlund and
//    Montgomery, "Division by invariant integers using multiplication"
//    (PLDI 1994), figure 4.1, which is exact for every dividend of the
//    word's width;
//  - element by element for types of up to 32 bits: in double precision.
//    For |a| < 2^53 and b != 0, floor(fl(a / b)) == floor(a / b): when a / b
//    is not an integer, it lies at least 1/|b| from the integers around it,
//    and the division's rounding error, at most 2^-53 |a / b|, is smaller.
//
// A 64-bit `div` costs tens of cycles and never vectorizes; these loops run
// at a few cycles per element and, for 32-bit words, vectorize.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace varstate::kernels::cpu {

// The unsigned word an integer type T computes in: 32 bits for types up
// to 32 bits, else 64.
template <typename T>
using DivisionWord = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;

// n / d for every n of the word U, d fixed (1 <= d).
template <typename U>
class UnsignedDivisor {
  static_assert(std::is_same_v<U, uint32_t> || std::is_same_v<U, uint64_t>);
  using Wide = std::conditional_t<std::is_same_v<U, uint32_t>, uint64_t, unsigned __int128>;
  static constexpr int kBits = sizeof(U) * 8;

 public:
  explicit UnsignedDivisor(U d) {
    // l = ceil(log2 d); m = floor(2^N (2^l - d) / d) + 1 (fits in N bits).
    const int l = d == 1 ? 0 : kBits - std::countl_zero(static_cast<U>(d - 1));
    const U two_l_minus_d = l == kBits ? static_cast<U>(U(0) - d) : static_cast<U>((U(1) << l) - d);
    magic_ = static_cast<U>(((static_cast<Wide>(two_l_minus_d) << kBits) / d) + 1);
    shift1_ = std::min(l, 1);
    shift2_ = std::max(l - 1, 0);
  }

  // kHalves: the high word of a 64-bit product from four 32 x 32-bit
  // products, which vectorize (one 64 x 64-bit multiply does not).
  template <bool kHalves = false>
  U divide(U n) const {
    const U t = high_word<kHalves>(magic_, n);
    return static_cast<U>((t + static_cast<U>((n - t) >> shift1_)) >> shift2_);
  }

 private:
  template <bool kHalves>
  static U high_word(U x, U y) {
    if constexpr (kHalves && sizeof(U) == 8) {
      const uint64_t x_lo = x & 0xffffffffu, x_hi = x >> 32;
      const uint64_t y_lo = y & 0xffffffffu, y_hi = y >> 32;
      const uint64_t cross = x_hi * y_lo + ((x_lo * y_lo) >> 32);   // < 2^64
      const uint64_t middle = (cross & 0xffffffffu) + x_lo * y_hi;  // < 2^64
      return x_hi * y_hi + (cross >> 32) + (middle >> 32);
    } else {
      return static_cast<U>((static_cast<Wide>(x) * y) >> kBits);
    }
  }

  U magic_ = 0;
  int shift1_ = 0, shift2_ = 0;
};

// floor(a / d) and a - floor(a / d) * d for one nonzero divisor d of an
// integer type T (wrapping like FloorDivFn: INT_MIN // -1 == INT_MIN).
// Branch-free: the signs of random ids would defeat a branch predictor.
template <typename T>
class FloorDivisor {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  using U = DivisionWord<T>;
  using S = std::make_signed_t<U>;

 public:
  explicit FloorDivisor(T d)
      : d_(static_cast<U>(d)),
        d_sign_(sign_mask(d)),
        // |d| - 1: added to |a| when the signs differ, so that the unsigned
        // quotient rounds up (ceil(|a| / |d|) == (|a| + |d| - 1) / |d|).
        // |a| <= 2^(N-1) and |d| - 1 < 2^(N-1): the sum fits in N bits.
        round_up_(static_cast<U>(magnitude(d) - 1)),
        divisor_(magnitude(d)) {}

  template <bool kHalves = false>
  T divide(T a) const {
    return static_cast<T>(quotient<kHalves>(a));
  }

  template <bool kHalves = false>
  T modulo(T a) const {
    return static_cast<T>(static_cast<U>(static_cast<U>(a) - quotient<kHalves>(a) * d_));
  }

 private:
  // All ones for a negative v, else 0.
  static U sign_mask(T v) {
    if constexpr (std::is_signed_v<T>) {
      return static_cast<U>(static_cast<S>(v) >> (sizeof(U) * 8 - 1));
    } else {
      return 0;
    }
  }
  // |v| in the unsigned word (2^(N-1) for the most negative value).
  static U magnitude(T v) {
    const U sign = sign_mask(v);
    return static_cast<U>((static_cast<U>(v) ^ sign) - sign);
  }
  // floor(a / d) in the unsigned word: |a| / |d| rounded toward zero when
  // the signs agree, else -ceil(|a| / |d|) (a conditional negation by mask).
  template <bool kHalves>
  U quotient(T a) const {
    const U flip = sign_mask(a) ^ d_sign_;
    const U q =
        divisor_.template divide<kHalves>(static_cast<U>(magnitude(a) + (round_up_ & flip)));
    return static_cast<U>((q ^ flip) - flip);
  }

  U d_;
  U d_sign_;
  U round_up_;
  UnsignedDivisor<U> divisor_;
};

// floor(a / b) for b != 0 of a type of up to 32 bits, through one double
// division (exact: see the top of the file). b == -1 negates with
// wraparound, as FloorDivFn.
template <typename T>
inline T floor_divide_through_double(T a, T b) {
  static_assert(std::is_integral_v<T> && sizeof(T) <= 4);
  const double q = std::floor(static_cast<double>(a) / static_cast<double>(b));
  if constexpr (std::is_signed_v<T>) {
    using U = DivisionWord<T>;
    // Every quotient but INT_MIN / -1 fits int32; the clamp keeps that
    // one's (discarded) conversion defined.
    const auto quotient = static_cast<int32_t>(std::min(q, 2147483647.0));
    return b == T(-1) ? static_cast<T>(U(0) - static_cast<U>(a)) : static_cast<T>(quotient);
  } else {
    return static_cast<T>(static_cast<uint32_t>(q));  // 0 <= q <= a < 2^32
  }
}

// a - floor(a / b) * b, wrapping (the exact result always fits T).
template <typename T>
inline T floor_modulo_through_double(T a, T b) {
  using U = DivisionWord<T>;
  const U q = static_cast<U>(floor_divide_through_double(a, b));
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - q * static_cast<U>(b)));
}

}  // namespace varstate::kernels::cpu
