#include "kernels/cuda/random.h"

#include <type_traits>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/random_distributions.h"

namespace varstate::kernels::cuda {
namespace {

using rng::Arith;
using rng::PhiloxStream;

struct RandomConfig {
  static constexpr int kThreads = 256;
  // Packets each thread takes per pass over a block's tile.
  static constexpr int kPacketsPerThread = 4;
  static constexpr int kVectorBytes = 16;
};

// A packet is the unit of one store: whole groups filling kVectorBytes
// (two groups of 16-bit values, one group otherwise).
template <typename D>
struct Packet {
  using Bits = typename D::Bits;
  static constexpr int kGroup = D::kGroupSize;
  static constexpr int kGroups =
      kGroup * sizeof(Bits) >= RandomConfig::kVectorBytes
          ? 1
          : RandomConfig::kVectorBytes / static_cast<int>(kGroup * sizeof(Bits));
  static constexpr int kSize = kGroups * kGroup;
  struct alignas(kSize * sizeof(Bits)) Vec {
    Bits v[kSize];
  };
};

// Packet q holds elements [base + q*kSize, base + (q+1)*kSize) of the tensor,
// of which [first, end) are written, to out[e - first]. In the vector
// variant, full packets are aligned and stored at once. Tiles of
// kThreads * kPacketsPerThread consecutive packets go round the grid; within
// a tile neighbouring threads take neighbouring packets, so stores coalesce.
template <typename D, bool kVector>
__global__ void __launch_bounds__(RandomConfig::kThreads)
    random_kernel(D dist, typename D::Bits* out, int64_t first, int64_t end, int64_t base,
                  int64_t packets) {
  using P = Packet<D>;
  const int64_t tile = static_cast<int64_t>(blockDim.x) * RandomConfig::kPacketsPerThread;
  const int64_t base_group = base / P::kGroup;  // base is a multiple of kGroup
  for (int64_t t = blockIdx.x * tile; t < packets; t += static_cast<int64_t>(gridDim.x) * tile) {
#pragma unroll
    for (int k = 0; k < RandomConfig::kPacketsPerThread; ++k) {
      const int64_t q = t + k * static_cast<int64_t>(blockDim.x) + threadIdx.x;
      if (q >= packets) break;
      const int64_t e = base + q * P::kSize;
      typename P::Vec v;
#pragma unroll
      for (int g = 0; g < P::kGroups; ++g) {
        dist(static_cast<uint64_t>(base_group + q * P::kGroups + g), v.v + g * P::kGroup);
      }
      if (kVector && e >= first && e + P::kSize <= end) {
        *reinterpret_cast<typename P::Vec*>(out + (e - first)) = v;
      } else {
#pragma unroll
        for (int j = 0; j < P::kSize; ++j) {
          if (e + j >= first && e + j < end) out[e + j - first] = v.v[j];
        }
      }
    }
  }
}

template <typename D>
void launch(const D& dist, typename D::Bits* out, int64_t n, int64_t first, cudaStream_t stream) {
  using P = Packet<D>;
  using Bits = typename D::Bits;
  static_assert(P::kSize * sizeof(Bits) == RandomConfig::kVectorBytes);
  if (n <= 0) return;
  const int64_t end = first + n;
  // Vector stores need packets that start on a group boundary at a 16-byte
  // aligned address: possible when out's misalignment (in elements) equals
  // first's position in its group (mod the group size).
  const int64_t misaligned =
      static_cast<int64_t>(reinterpret_cast<uintptr_t>(out) % RandomConfig::kVectorBytes) /
      static_cast<int64_t>(sizeof(Bits));
  const bool vector = (first - misaligned) % P::kGroup == 0;
  // Packets start at group boundaries; with vector stores, at the elements
  // whose addresses are 16-byte aligned (kSize elements are 16 bytes).
  const int64_t base = vector ? first - misaligned : first - first % P::kGroup;
  const int64_t packets = (end - base + P::kSize - 1) / P::kSize;
  constexpr int kThreads = RandomConfig::kThreads;
  const unsigned grid = grid_for(
      (packets + RandomConfig::kPacketsPerThread - 1) / RandomConfig::kPacketsPerThread, kThreads);
  if (vector) {
    random_kernel<D, true><<<grid, kThreads, 0, stream>>>(dist, out, first, end, base, packets);
  } else {
    random_kernel<D, false><<<grid, kThreads, 0, stream>>>(dist, out, first, end, base, packets);
  }
  VARSTATE_CUDA_CHECK_LAUNCH();
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
                    T minval, T maxval, cudaStream_t stream) {
  const PhiloxStream s = PhiloxStream::from_seeds(seed, seed2);
  if constexpr (std::is_integral_v<T>) {
    using Range = std::make_unsigned_t<T>;
    const rng::UniformIntDistribution<T> dist{s, minval,
                                              static_cast<Range>(Range(maxval) - Range(minval))};
    launch(dist, out, n, first_element, stream);
  } else {
    const auto lo = compute_value(minval);
    const auto range = Arith<T>::round(compute_value(maxval) - lo);
    launch(rng::UniformDistribution<T>{s, lo, range}, bits_ptr(out), n, first_element, stream);
  }
}

template <typename T>
void random_normal(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2, T mean,
                   T stddev, cudaStream_t stream) {
  const rng::NormalDistribution<T> dist{PhiloxStream::from_seeds(seed, seed2), compute_value(mean),
                                        compute_value(stddev)};
  launch(dist, bits_ptr(out), n, first_element, stream);
}

template <typename T>
void truncated_normal(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2,
                      T mean, T stddev, cudaStream_t stream) {
  const rng::TruncatedNormalDistribution<T> dist{PhiloxStream::from_seeds(seed, seed2),
                                                 compute_value(mean), compute_value(stddev)};
  launch(dist, bits_ptr(out), n, first_element, stream);
}

#define VARSTATE_INSTANTIATE_FLOAT(T)                                                            \
  template void random_uniform<T>(T*, int64_t, int64_t, uint64_t, uint64_t, T, T, cudaStream_t); \
  template void random_normal<T>(T*, int64_t, int64_t, uint64_t, uint64_t, T, T, cudaStream_t);  \
  template void truncated_normal<T>(T*, int64_t, int64_t, uint64_t, uint64_t, T, T, cudaStream_t);
VARSTATE_INSTANTIATE_FLOAT(half)
VARSTATE_INSTANTIATE_FLOAT(bfloat16)
VARSTATE_INSTANTIATE_FLOAT(float)
VARSTATE_INSTANTIATE_FLOAT(double)
#undef VARSTATE_INSTANTIATE_FLOAT
template void random_uniform<int32_t>(int32_t*, int64_t, int64_t, uint64_t, uint64_t, int32_t,
                                      int32_t, cudaStream_t);
template void random_uniform<int64_t>(int64_t*, int64_t, int64_t, uint64_t, uint64_t, int64_t,
                                      int64_t, cudaStream_t);

}  // namespace varstate::kernels::cuda
