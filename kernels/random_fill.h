// The set-up of the random kernels, written once for the CPU and CUDA
// kernels (kernels/cpu/random.cc, kernels/cuda/random.cu): the distribution
// each op draws from and how it is built from the op's parameters, the
// groups a slice [first, first + n) of the tensor touches, and the dtypes
// each op is built for. A backend supplies only a fill policy: an object
// whose call
//
//   template <typename D>
//   void operator()(const D& dist, typename D::Bits* out, ElementRange range) const;
//
// computes the groups of dist (kernels/random_distributions.h) that hold
// elements of `range` and stores element e at out[e - range.first] (the
// CPU: a multithreaded loop over blocks of groups; CUDA: a grid-stride
// kernel). A new distribution is a group functor in random_distributions.h
// plus its maker here; the backends' fill policies take it as it is.
//
// Host and device code: translation units that include this header must not
// contract floating-point operations (see kernels/random_math.h).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/random_distributions.h"

namespace varstate::kernels::rng {

// Elements [first, end) of the row-major flattened tensor, and the groups of
// kGroup elements they fall in.
struct ElementRange {
  int64_t first;
  int64_t end;

  // Groups [group_begin, group_end) hold at least one element of the range.
  template <int kGroup>
  VARSTATE_HOST_DEVICE int64_t group_begin() const {
    return first / kGroup;
  }
  template <int kGroup>
  VARSTATE_HOST_DEVICE int64_t group_end() const {
    return (end + kGroup - 1) / kGroup;
  }
  // Groups [whole_begin, whole_end) lie entirely inside the range (empty
  // when whole_end <= whole_begin).
  template <int kGroup>
  VARSTATE_HOST_DEVICE int64_t whole_begin() const {
    return (first + kGroup - 1) / kGroup;
  }
  template <int kGroup>
  VARSTATE_HOST_DEVICE int64_t whole_end() const {
    return end / kGroup;
  }

  // Whether elements [e, e + size) all lie inside the range.
  VARSTATE_HOST_DEVICE bool holds(int64_t e, int64_t size) const {
    return e >= first && e + size <= end;
  }
};

// Stores the elements of v[0, kSize), elements [e, e + kSize) of the
// tensor, that lie inside `range`.
template <int kSize, typename Bits>
VARSTATE_HOST_DEVICE void store_clipped(const Bits* v, int64_t e, ElementRange range, Bits* out) {
  for (int j = 0; j < kSize; ++j) {
    if (e + j >= range.first && e + j < range.end) out[e + j - range.first] = v[j];
  }
}

// ---- The distribution of each op --------------------------------------------
// Parameters arrive in the storage type and are widened to the type the
// transforms compute in (float for half and bfloat16).

template <typename T>
typename Arith<T>::Compute compute_value(T x) {
  return static_cast<typename Arith<T>::Compute>(x);
}

// RandomUniform (floats) and RandomUniformInt (int32, int64) in
// [minval, maxval); for floats the range is rounded to T as TensorFlow's
// Python layer computes maxval - minval in T.
template <typename T>
auto uniform_distribution(uint64_t seed, uint64_t seed2, T minval, T maxval) {
  const PhiloxStream stream = PhiloxStream::from_seeds(seed, seed2);
  if constexpr (std::is_integral_v<T>) {
    using Range = std::make_unsigned_t<T>;
    return UniformIntDistribution<T>{stream, minval,
                                     static_cast<Range>(Range(maxval) - Range(minval))};
  } else {
    const auto lo = compute_value(minval);
    return UniformDistribution<T>{stream, lo, Arith<T>::round(compute_value(maxval) - lo)};
  }
}

template <typename T>
NormalDistribution<T> normal_distribution(uint64_t seed, uint64_t seed2, T mean, T stddev) {
  return {PhiloxStream::from_seeds(seed, seed2), compute_value(mean), compute_value(stddev)};
}

template <typename T>
TruncatedNormalDistribution<T> truncated_normal_distribution(uint64_t seed, uint64_t seed2, T mean,
                                                             T stddev) {
  return {PhiloxStream::from_seeds(seed, seed2), compute_value(mean), compute_value(stddev)};
}

// Fills out[0, n) with elements [first, first + n) of dist's tensor through
// the backend's fill policy; out is reinterpreted as the bits dist stores.
template <typename Fill, typename D, typename T>
void fill_random(const Fill& fill, const D& dist, T* out, int64_t n, int64_t first) {
  using Bits = typename D::Bits;
  static_assert(sizeof(Bits) == sizeof(T));
  if (n <= 0) return;
  fill(dist, reinterpret_cast<Bits*>(out), ElementRange{first, first + n});
}

}  // namespace varstate::kernels::rng

// The dtypes the ops are built for, one list for both backends: X(T) for
// each. Floats have every op; integers only the uniform one.
#define VARSTATE_RANDOM_FLOAT_TYPES(X) X(varstate::half) X(varstate::bfloat16) X(float) X(double)
#define VARSTATE_RANDOM_INT_TYPES(X) X(int32_t) X(int64_t)
