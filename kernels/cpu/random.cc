#include "kernels/cpu/random.h"

#include <algorithm>

#include "kernels/cpu/eigen_support.h"
#include "kernels/random_fill.h"

namespace varstate::kernels::cpu {
namespace {

using rng::Arith;
using rng::ElementRange;

// Cost of an element relative to a uniform float (cycles per group,
// measured, AVX-512 build, x86-64: uniform 15, normal 40, truncated normal
// 60, uniform int 70), so that one threshold in uniform-element units
// serves every distribution.
template <typename D>
constexpr int64_t kCostPerElement = 4;  // truncated normal
template <typename T>
constexpr int64_t kCostPerElement<rng::NormalDistribution<T>> = 3;
template <typename T>
constexpr int64_t kCostPerElement<rng::UniformDistribution<T>> = 1;
template <typename T>
constexpr int64_t kCostPerElement<rng::UniformIntDistribution<T>> = 5;

// Groups computed together. The per-group transforms run in a loop over the
// groups of a batch, which GCC vectorizes (one group per SIMD lane) with the
// operations unchanged, so each lane gets the bits the scalar code gives.
constexpr int kBatch = 16;

template <typename D>
struct Batch {
  static constexpr int kGroups = kBatch;

  [[gnu::always_inline]] static void run(const D& dist, uint64_t g0,
                                         typename D::Bits* __restrict out) {
    for (int l = 0; l < kBatch; ++l) dist(g0 + l, out + l * D::kGroupSize);
  }
};

// Truncated normals: the first sample of each group's window is computed for
// the batch at once and fills about 83% (float) of the groups; the groups
// left short take their second sample in vectorized batches too, and the
// very rare group still short after that is recomputed alone.
template <typename T>
struct Batch<rng::TruncatedNormalDistribution<T>> {
  using D = rng::TruncatedNormalDistribution<T>;
  using Compute = typename D::Compute;
  using Bits = typename D::Bits;
  static constexpr int kGroup = D::kGroupSize;
  static constexpr int kShift = D::kWindow == 256 ? 8 : 7;
  static constexpr int kGroups = 4 * kBatch;

  // For sample s of the windows of groups g[0, kBatch): each group's values
  // scaled, and bit j of `accept` set when value j lies within 2 stddev.
  [[gnu::always_inline]] static void window_values(const D& dist, const uint64_t* g, uint64_t s,
                                                   Bits (*__restrict scaled)[kGroup],
                                                   uint32_t* __restrict accept) {
    for (int l = 0; l < kBatch; ++l) {
      Compute v[kGroup];
      rng::normal_values<T>(dist.stream.sample((g[l] << kShift) + s, g[l] >> (64 - kShift)), v);
      uint32_t bits = 0;
      for (int j = 0; j < kGroup; ++j) {
        scaled[l][j] = rng::scale_shift<T>(Arith<T>::round(v[j]), dist.stddev, dist.mean);
        bits |= (v[j] < Compute(2) && v[j] > Compute(-2)) ? 1u << j : 0u;
      }
      accept[l] = bits;
    }
  }

  // Appends the accepted values to out[kept, kGroup).
  [[gnu::always_inline]] static void keep(const Bits* scaled, uint32_t accept, Bits* out,
                                          int& kept) {
    if (accept == (1u << kGroup) - 1 && kept == 0) {
      for (int j = 0; j < kGroup; ++j) out[j] = scaled[j];
      kept = kGroup;
      return;
    }
    for (int j = 0; j < kGroup; ++j) {
      if ((accept >> j & 1u) && kept < kGroup) out[kept++] = scaled[j];
    }
  }

  [[gnu::always_inline]] static void run(const D& dist, uint64_t g0, Bits* __restrict out) {
    uint64_t g[kGroups];
    Bits scaled[kGroups][kGroup];
    uint32_t accept[kGroups];
    for (int l = 0; l < kGroups; ++l) g[l] = g0 + l;
    for (int b = 0; b < kGroups; b += kBatch) window_values(dist, g + b, 0, scaled + b, accept + b);
    // Groups still short after the first sample, padded to whole batches.
    uint64_t short_g[kGroups];
    int short_kept[kGroups];
    int n_short = 0;
    for (int l = 0; l < kGroups; ++l) {
      int kept = 0;
      keep(scaled[l], accept[l], out + l * kGroup, kept);
      if (kept < kGroup) {
        short_g[n_short] = g[l];
        short_kept[n_short++] = kept;
      }
    }
    if (n_short == 0) return;
    for (int i = n_short; i < kGroups; ++i) short_g[i] = short_g[0];
    for (int b = 0; b < n_short; b += kBatch) {
      window_values(dist, short_g + b, 1, scaled + b, accept + b);
    }
    for (int i = 0; i < n_short; ++i) {
      Bits* group_out = out + (short_g[i] - g0) * kGroup;
      keep(scaled[i], accept[i], group_out, short_kept[i]);
      if (short_kept[i] < kGroup) dist(short_g[i], group_out);
    }
  }
};

// Writes the elements of `range` that lie in groups [group_begin,
// group_end) to out; groups cut by the ends of the range are computed whole
// and clipped.
template <typename D>
[[gnu::always_inline]] inline void fill_groups(const D& dist, typename D::Bits* out,
                                               ElementRange range, int64_t group_begin,
                                               int64_t group_end) {
  constexpr int kGroup = D::kGroupSize;
  constexpr int kGroups = Batch<D>::kGroups;
  auto one_group = [&](int64_t g) {
    const int64_t e = g * kGroup;
    if (range.holds(e, kGroup)) {
      dist(static_cast<uint64_t>(g), out + (e - range.first));
      return;
    }
    typename D::Bits v[kGroup];
    dist(static_cast<uint64_t>(g), v);
    rng::store_clipped<kGroup>(v, e, range, out);
  };
  // Batches cover the groups that lie whole inside the range.
  const int64_t whole_begin = std::clamp(range.whole_begin<kGroup>(), group_begin, group_end);
  const int64_t whole_end = std::clamp(range.whole_end<kGroup>(), whole_begin, group_end);
  const int64_t batch_end = whole_begin + (whole_end - whole_begin) / kGroups * kGroups;
  for (int64_t g = group_begin; g < whole_begin; ++g) one_group(g);
  for (int64_t g = whole_begin; g < batch_end; g += kGroups) {
    Batch<D>::run(dist, static_cast<uint64_t>(g), out + (g * kGroup - range.first));
  }
  for (int64_t g = batch_end; g < group_end; ++g) one_group(g);
}

template <typename D>
void fill_groups_generic(const D& dist, typename D::Bits* out, ElementRange range,
                         int64_t group_begin, int64_t group_end) {
  fill_groups(dist, out, range, group_begin, group_end);
}

// The transforms compute with fma_rn, which without FMA instructions is a
// libm call. Builds of the loop for AVX2+FMA and AVX-512, used when the CPU
// has them, give the same bits (an fma is correctly rounded either way, and
// a vector lane rounds as a scalar operation does) many times faster. Only
// the code inlined into them uses FMA instructions; -ffp-contract=off keeps
// the compiler from fusing anything else.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX512F__)
#define VARSTATE_RANDOM_SIMD_CLONES 1
template <typename D>
[[gnu::target("avx2,fma")]] void fill_groups_avx2(const D& dist, typename D::Bits* out,
                                                  ElementRange range, int64_t group_begin,
                                                  int64_t group_end) {
  fill_groups(dist, out, range, group_begin, group_end);
}

template <typename D>
[[gnu::target("avx512f,avx512vl,avx512dq,avx512bw,fma")]] void fill_groups_avx512(
    const D& dist, typename D::Bits* out, ElementRange range, int64_t group_begin,
    int64_t group_end) {
  fill_groups(dist, out, range, group_begin, group_end);
}

enum class Simd {
  kNone,
  kAvx2,
  kAvx512
};

Simd cpu_simd() {
  static const Simd simd = [] {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw")) {
      return Simd::kAvx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Simd::kAvx2;
    return Simd::kNone;
  }();
  return simd;
}
#endif

// The CPU fill policy (kernels/random_fill.h): ranges of groups on the pool
// above the random threshold, each block in the widest SIMD build
// this CPU runs.
struct EigenFill {
  template <typename D>
  void operator()(const D& dist, typename D::Bits* out, ElementRange range) const {
    constexpr int kGroup = D::kGroupSize;
    const int64_t group_begin = range.group_begin<kGroup>();
    auto* fill_range = &fill_groups_generic<D>;
#if defined(VARSTATE_RANDOM_SIMD_CLONES)
    switch (cpu_simd()) {
      case Simd::kAvx512:
        fill_range = &fill_groups_avx512<D>;
        break;
      case Simd::kAvx2:
        fill_range = &fill_groups_avx2<D>;
        break;
      case Simd::kNone:
        break;
    }
#endif
    auto run = [&](int64_t begin, int64_t stop) {
      fill_range(dist, out, range, group_begin + begin, group_begin + stop);
    };
    // Ranges of whole batches, so that each thread's groups batch fully.
    const int64_t groups = range.group_end<kGroup>() - group_begin;
    for_ranges(groups, Batch<D>::kGroups, (range.end - range.first) * kCostPerElement<D>,
               parallel_thresholds().random_elements, run);
  }
};

}  // namespace

template <typename T>
void random_uniform(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2,
                    T minval, T maxval) {
  rng::fill_random(EigenFill{}, rng::uniform_distribution(seed, seed2, minval, maxval), out, n,
                   first_element);
}

template <typename T>
void random_normal(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2, T mean,
                   T stddev) {
  rng::fill_random(EigenFill{}, rng::normal_distribution(seed, seed2, mean, stddev), out, n,
                   first_element);
}

template <typename T>
void truncated_normal(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2,
                      T mean, T stddev) {
  rng::fill_random(EigenFill{}, rng::truncated_normal_distribution(seed, seed2, mean, stddev), out,
                   n, first_element);
}

#define VARSTATE_INSTANTIATE_FLOAT(T)                                              \
  template void random_uniform<T>(T*, int64_t, int64_t, uint64_t, uint64_t, T, T); \
  template void random_normal<T>(T*, int64_t, int64_t, uint64_t, uint64_t, T, T);  \
  template void truncated_normal<T>(T*, int64_t, int64_t, uint64_t, uint64_t, T, T);
#define VARSTATE_INSTANTIATE_INT(T) \
  template void random_uniform<T>(T*, int64_t, int64_t, uint64_t, uint64_t, T, T);
VARSTATE_RANDOM_FLOAT_TYPES(VARSTATE_INSTANTIATE_FLOAT)
VARSTATE_RANDOM_INT_TYPES(VARSTATE_INSTANTIATE_INT)
#undef VARSTATE_INSTANTIATE_FLOAT
#undef VARSTATE_INSTANTIATE_INT

}  // namespace varstate::kernels::cpu
