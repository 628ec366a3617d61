#include "kernels/cpu/random.h"

#include <type_traits>

#include "kernels/cpu/eigen_internal.h"
#include "kernels/random_distributions.h"

namespace varstate::kernels::cpu {
namespace {

using rng::Arith;
using rng::PhiloxStream;

// Cost of one group (measured, FMA build, x86-64), for Eigen's decision to
// go parallel.
template <typename D> constexpr double kCyclesPerGroup = 400;  // truncated normal
template <typename T> constexpr double kCyclesPerGroup<rng::NormalDistribution<T>> = 300;
template <typename T> constexpr double kCyclesPerGroup<rng::UniformDistribution<T>> = 70;
template <typename T> constexpr double kCyclesPerGroup<rng::UniformIntDistribution<T>> = 70;

// Writes the elements [first, first + n) of dist's tensor that lie in groups
// [group_begin, group_end) to out; groups cut by the ends of the range are
// computed whole and clipped.
template <typename D>
[[gnu::always_inline]] inline void fill_groups(const D& dist, typename D::Bits* out,
                                               int64_t first, int64_t end, int64_t group_begin,
                                               int64_t group_end) {
  constexpr int kGroup = D::kGroupSize;
  for (int64_t g = group_begin; g < group_end; ++g) {
    const int64_t e = g * kGroup;
    if (e >= first && e + kGroup <= end) {
      dist(static_cast<uint64_t>(g), out + (e - first));
      continue;
    }
    typename D::Bits v[kGroup];
    dist(static_cast<uint64_t>(g), v);
    for (int j = 0; j < kGroup; ++j) {
      if (e + j >= first && e + j < end) out[e + j - first] = v[j];
    }
  }
}

template <typename D>
void fill_groups_generic(const D& dist, typename D::Bits* out, int64_t first, int64_t end,
                         int64_t group_begin, int64_t group_end) {
  fill_groups(dist, out, first, end, group_begin, group_end);
}

// The transforms compute with fma_rn, which without FMA instructions is a
// libm call. An FMA build of the loop, used when the CPU has FMA, gives the
// same bits (an fma is correctly rounded either way) 2-3x faster. Only the
// code inlined into it uses FMA instructions; -ffp-contract=off keeps the
// compiler from fusing anything else.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__FMA__)
#define VARSTATE_RANDOM_FMA_CLONE 1
template <typename D>
[[gnu::target("fma")]] void fill_groups_fma(const D& dist, typename D::Bits* out,
                                            int64_t first, int64_t end, int64_t group_begin,
                                            int64_t group_end) {
  fill_groups(dist, out, first, end, group_begin, group_end);
}

bool cpu_has_fma() {
  static const bool has = __builtin_cpu_supports("fma");
  return has;
}
#endif

// Writes the elements [first, first + n) of dist's tensor to out, on the
// Eigen pool when large enough.
template <typename D>
void fill(const D& dist, typename D::Bits* out, int64_t n, int64_t first) {
  using Bits = typename D::Bits;
  constexpr int kGroup = D::kGroupSize;
  if (n <= 0) return;
  const int64_t end = first + n;
  const int64_t group_begin = first / kGroup;
  const int64_t group_end = (end + kGroup - 1) / kGroup;
  auto* fill_range = &fill_groups_generic<D>;
#if defined(VARSTATE_RANDOM_FMA_CLONE)
  if (cpu_has_fma()) fill_range = &fill_groups_fma<D>;
#endif
  auto run = [&](int64_t begin, int64_t stop) {
    fill_range(dist, out, first, end, group_begin + begin, group_begin + stop);
  };
  const Eigen::TensorOpCost cost(0, kGroup * sizeof(Bits), kCyclesPerGroup<D>);
  eigen_device().parallelFor(group_end - group_begin, cost, run);
}

template <typename T>
typename Arith<T>::Compute compute_value(T x) {
  return static_cast<typename Arith<T>::Compute>(x);
}

template <typename T>
typename Arith<T>::Bits* bits_ptr(T* out) {
  return reinterpret_cast<typename Arith<T>::Bits*>(out);
}

}  // namespace

template <typename T>
void random_uniform(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2,
                    T minval, T maxval) {
  const PhiloxStream stream = PhiloxStream::from_seeds(seed, seed2);
  if constexpr (std::is_integral_v<T>) {
    using Range = std::make_unsigned_t<T>;
    const rng::UniformIntDistribution<T> dist{
        stream, minval, static_cast<Range>(Range(maxval) - Range(minval))};
    fill(dist, out, n, first_element);
  } else {
    const auto lo = compute_value(minval);
    const auto range = Arith<T>::round(compute_value(maxval) - lo);
    fill(rng::UniformDistribution<T>{stream, lo, range}, bits_ptr(out), n, first_element);
  }
}

template <typename T>
void random_normal(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2,
                   T mean, T stddev) {
  const rng::NormalDistribution<T> dist{PhiloxStream::from_seeds(seed, seed2),
                                        compute_value(mean), compute_value(stddev)};
  fill(dist, bits_ptr(out), n, first_element);
}

template <typename T>
void truncated_normal(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2,
                      T mean, T stddev) {
  const rng::TruncatedNormalDistribution<T> dist{PhiloxStream::from_seeds(seed, seed2),
                                                 compute_value(mean), compute_value(stddev)};
  fill(dist, bits_ptr(out), n, first_element);
}

#define VARSTATE_INSTANTIATE_FLOAT(T)                                                     \
  template void random_uniform<T>(T*, int64_t, int64_t, uint64_t, uint64_t, T, T);     \
  template void random_normal<T>(T*, int64_t, int64_t, uint64_t, uint64_t, T, T);      \
  template void truncated_normal<T>(T*, int64_t, int64_t, uint64_t, uint64_t, T, T);
VARSTATE_INSTANTIATE_FLOAT(half)
VARSTATE_INSTANTIATE_FLOAT(bfloat16)
VARSTATE_INSTANTIATE_FLOAT(float)
VARSTATE_INSTANTIATE_FLOAT(double)
#undef VARSTATE_INSTANTIATE_FLOAT
template void random_uniform<int32_t>(int32_t*, int64_t, int64_t, uint64_t, uint64_t, int32_t,
                                      int32_t);
template void random_uniform<int64_t>(int64_t*, int64_t, int64_t, uint64_t, uint64_t, int64_t,
                                      int64_t);

}  // namespace varstate::kernels::cpu
