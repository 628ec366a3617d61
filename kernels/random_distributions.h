// The random distributions of the random kernels, written once for the CPU
// and CUDA kernels: each maps a group index to the values of that group.
//
// Index -> counter scheme. Output element i of a tensor (row-major flat
// index) belongs to group g = i / kGroupSize and is value i % kGroupSize of
// that group; a group depends only on (seed, seed2, g), so any element can
// be computed alone, by any thread, in any order. As in TensorFlow:
//   - uniform and normal: group g is the sample at counter base + g, with 4
//     values per group for 32- and 16-bit types (one word each; normals pair
//     words 0,1 and 2,3 for Box-Muller) and 2 for 64-bit types (two words
//     each; a double normal pair uses all four words);
//   - truncated normal: group g owns the window of kWindow samples starting
//     at counter base + g * kWindow (256 for 4-value groups, 128 for double),
//     reads Box-Muller pairs from it in order and keeps the values with
//     |v| < 2 until the group is full (TensorFlow's scheme, bounded by the
//     window). The window runs out only if more than 1020 of its 1024
//     normal values (float) or 252 of 256 (double) land beyond 2 stddev,
//     probability below 10^-300; the missing values are then 0 (the mean).
// A shard that starts at element `first` of the full tensor therefore
// holds exactly the values of the full tensor.
//
// Values are scaled in the output type as TensorFlow's Python layer does:
// uniform x * (maxval - minval) + minval, normals x * stddev + mean, each
// operation rounded to the type (16-bit types compute in float and round
// after each operation).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/philox.h"
#include "varstate/dtype.h"

namespace varstate::kernels::rng {

// How a storage type computes: Compute is the arithmetic type, Bits what is
// stored (the raw 16 bits for half/bfloat16).
template <typename T>
struct Arith {
  using Compute = T;
  using Bits = T;
  static VARSTATE_HOST_DEVICE Compute round(Compute x) { return x; }
  static VARSTATE_HOST_DEVICE Bits store(Compute x) { return x; }
};
template <>
struct Arith<half> {
  using Compute = float;
  using Bits = uint16_t;
  static VARSTATE_HOST_DEVICE float round(float x) { return half_value(half_bits(x)); }
  static VARSTATE_HOST_DEVICE uint16_t store(float x) { return half_bits(x); }
};
template <>
struct Arith<bfloat16> {
  using Compute = float;
  using Bits = uint16_t;
  static VARSTATE_HOST_DEVICE float round(float x) { return bfloat16_value(bfloat16_bits(x)); }
  static VARSTATE_HOST_DEVICE uint16_t store(float x) { return bfloat16_bits(x); }
};

// x * scale + shift, each operation rounded to T.
template <typename T>
VARSTATE_HOST_DEVICE typename Arith<T>::Bits scale_shift(typename Arith<T>::Compute x,
                                                         typename Arith<T>::Compute scale,
                                                         typename Arith<T>::Compute shift) {
  using A = Arith<T>;
  return A::store(add_rn(A::round(mul_rn(x, scale)), shift));
}

// Uniform floats in [lo, lo + range).
template <typename T>
struct UniformDistribution {
  using Compute = typename Arith<T>::Compute;
  using Bits = typename Arith<T>::Bits;
  static constexpr int kGroupSize = sizeof(T) == 8 ? 2 : 4;

  PhiloxStream stream;
  Compute lo;
  Compute range;

  VARSTATE_HOST_DEVICE void operator()(uint64_t group, Bits* out) const {
    const Philox4x32 x = stream.sample(group);
    for (int j = 0; j < kGroupSize; ++j) {
      if constexpr (std::is_same_v<T, float>) {
        out[j] = scale_shift<T>(uniform_float(x.w[j]), range, lo);
      } else if constexpr (std::is_same_v<T, half>) {
        out[j] = scale_shift<T>(uniform_half(x.w[j]), range, lo);
      } else if constexpr (std::is_same_v<T, bfloat16>) {
        out[j] = scale_shift<T>(uniform_bfloat16(x.w[j]), range, lo);
      } else {
        static_assert(std::is_same_v<T, double>, "no uniform float distribution for this type");
        out[j] = scale_shift<T>(uniform_double(x.w[2 * j], x.w[2 * j + 1]), range, lo);
      }
    }
  }
};

// Uniform integers in [lo, lo + range), range > 0 as unsigned.
template <typename T>
struct UniformIntDistribution {
  static_assert(std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>);
  using Bits = T;
  using Range = std::make_unsigned_t<T>;
  static constexpr int kGroupSize = sizeof(T) == 8 ? 2 : 4;

  PhiloxStream stream;
  T lo;
  Range range;

  VARSTATE_HOST_DEVICE void operator()(uint64_t group, T* out) const {
    const Philox4x32 x = stream.sample(group);
    for (int j = 0; j < kGroupSize; ++j) {
      if constexpr (sizeof(T) == 4) {
        out[j] = uniform_int32(x.w[j], lo, range);
      } else {
        out[j] = uniform_int64(x.w[2 * j], x.w[2 * j + 1], lo, range);
      }
    }
  }
};

// Normal values of the group's sample(s): Box-Muller pairs, float math for
// the 16- and 32-bit types, double math for double.
template <typename T>
VARSTATE_HOST_DEVICE void normal_values(const Philox4x32& x, typename Arith<T>::Compute* v) {
  if constexpr (std::is_same_v<T, double>) {
    box_muller(x.w[0], x.w[1], x.w[2], x.w[3], &v[0], &v[1]);
  } else {
    box_muller(x.w[0], x.w[1], &v[0], &v[1]);
    box_muller(x.w[2], x.w[3], &v[2], &v[3]);
  }
}

template <typename T>
struct NormalDistribution {
  using Compute = typename Arith<T>::Compute;
  using Bits = typename Arith<T>::Bits;
  static constexpr int kGroupSize = sizeof(T) == 8 ? 2 : 4;

  PhiloxStream stream;
  Compute mean;
  Compute stddev;

  VARSTATE_HOST_DEVICE void operator()(uint64_t group, Bits* out) const {
    Compute v[kGroupSize];
    normal_values<T>(stream.sample(group), v);
    for (int j = 0; j < kGroupSize; ++j) {
      out[j] = scale_shift<T>(Arith<T>::round(v[j]), stddev, mean);
    }
  }
};

template <typename T>
struct TruncatedNormalDistribution {
  using Compute = typename Arith<T>::Compute;
  using Bits = typename Arith<T>::Bits;
  static constexpr int kGroupSize = sizeof(T) == 8 ? 2 : 4;
  // Samples reserved per group: 256 words per output value, as TensorFlow.
  static constexpr uint64_t kWindow = 256 * kGroupSize / 4;

  PhiloxStream stream;
  Compute mean;
  Compute stddev;

  VARSTATE_HOST_DEVICE void operator()(uint64_t group, Bits* out) const {
    // group * kWindow as a 128-bit offset (kWindow is a power of two).
    constexpr int kShift = kWindow == 256 ? 8 : 7;
    const uint64_t offset_lo = group << kShift;
    const uint64_t offset_hi = group >> (64 - kShift);
    int kept = 0;
    for (uint64_t s = 0; s < kWindow && kept < kGroupSize; ++s) {
      const Philox4x32 x = stream.sample(offset_lo + s, offset_hi);  // no carry: s < kWindow
      Compute v[kGroupSize];
      normal_values<T>(x, v);
      // Pairs in order; a pair's second value is used only if still needed.
      for (int j = 0; j < kGroupSize; ++j) {
        if (v[j] < Compute(2) && v[j] > Compute(-2)) {
          const Bits value = scale_shift<T>(Arith<T>::round(v[j]), stddev, mean);
          // Constant indices keep a device's out[] in registers.
          for (int i = 0; i < kGroupSize; ++i) {
            if (i == kept) out[i] = value;
          }
          ++kept;
        }
      }
    }
    for (int i = 0; i < kGroupSize; ++i) {
      if (i >= kept) out[i] = Arith<T>::store(mean);
    }
  }
};

}  // namespace varstate::kernels::rng
