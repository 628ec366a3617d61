#include "kernels/cuda/random.h"

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/random_fill.h"

namespace varstate::kernels::cuda {
namespace {

using rng::ElementRange;

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
// of which those in `range` are written, to out[e - range.first]. In the vector
// variant, full packets are aligned and stored at once. Tiles of
// kThreads * kPacketsPerThread consecutive packets go round the grid; within
// a tile neighbouring threads take neighbouring packets, so stores coalesce.
template <typename D, bool kVector>
__global__ void __launch_bounds__(RandomConfig::kThreads)
    random_kernel(D dist, typename D::Bits* out, ElementRange range, int64_t base,
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
      if (kVector && range.holds(e, P::kSize)) {
        *reinterpret_cast<typename P::Vec*>(out + (e - range.first)) = v;
      } else {
        rng::store_clipped<P::kSize>(v.v, e, range, out);
      }
    }
  }
}

// The CUDA fill policy (kernels/random_fill.h): one grid-stride kernel
// launch on `stream`.
struct KernelFill {
  cudaStream_t stream;

  template <typename D>
  void operator()(const D& dist, typename D::Bits* out, ElementRange range) const {
    using P = Packet<D>;
    using Bits = typename D::Bits;
    static_assert(P::kSize * sizeof(Bits) == RandomConfig::kVectorBytes);
    // Vector stores need packets that start on a group boundary at a 16-byte
    // aligned address: possible when out's misalignment (in elements) equals
    // first's position in its group (mod the group size).
    const int64_t first = range.first;
    const int64_t misaligned =
        static_cast<int64_t>(reinterpret_cast<uintptr_t>(out) % RandomConfig::kVectorBytes) /
        static_cast<int64_t>(sizeof(Bits));
    const bool vector = (first - misaligned) % P::kGroup == 0;
    // Packets start at group boundaries; with vector stores, at the elements
    // whose addresses are 16-byte aligned (kSize elements are 16 bytes).
    const int64_t base = vector ? first - misaligned : range.group_begin<P::kGroup>() * P::kGroup;
    const int64_t packets = (range.end - base + P::kSize - 1) / P::kSize;
    constexpr int kThreads = RandomConfig::kThreads;
    const unsigned grid =
        grid_for((packets + RandomConfig::kPacketsPerThread - 1) / RandomConfig::kPacketsPerThread,
                 kThreads);
    if (vector) {
      launch_kernel(random_kernel<D, true>, grid, kThreads, 0, stream, dist, out, range, base,
                    packets);
    } else {
      launch_kernel(random_kernel<D, false>, grid, kThreads, 0, stream, dist, out, range, base,
                    packets);
    }
  }
};

// The row of `out` that position i fills (RowsAt), or -1 for none.
__device__ __forceinline__ int64_t row_of(int64_t i, const int64_t* __restrict__ slots, RowsAt at) {
  const int64_t slot = slots[i];
  if (at == RowsAt::kSlots) return slot;
  return slot < 0 ? i : -1;
}

// One thread per group of a row: the row's distribution is dist with the
// key added to seed2 (the stream's counter high words), its elements those
// of a tensor of `width` elements.
template <typename D>
__global__ void __launch_bounds__(RandomConfig::kThreads)
    keyed_rows_kernel(D dist, uint64_t seed, uint64_t seed2, typename D::Bits* out, int64_t width,
                      const int64_t* __restrict__ keys, const int64_t* __restrict__ slots,
                      int64_t n, RowsAt at) {
  constexpr int kGroup = D::kGroupSize;
  const int64_t groups = (width + kGroup - 1) / kGroup;
  const ElementRange row{0, width};
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n * groups;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t / groups;
    const int64_t g = t - i * groups;
    const int64_t dst = row_of(i, slots, at);
    if (dst < 0) continue;
    D d = dist;
    d.stream = rng::PhiloxStream::from_seeds(seed, seed2 + static_cast<uint64_t>(keys[i]));
    typename D::Bits v[kGroup];
    d(static_cast<uint64_t>(g), v);
    rng::store_clipped<kGroup>(v, g * kGroup, row, out + dst * width);
  }
}

template <typename D>
void keyed_rows(const D& dist, uint64_t seed, uint64_t seed2, typename D::Bits* out, int64_t width,
                const int64_t* keys, const int64_t* slots, int64_t n, cudaStream_t stream,
                RowsAt at) {
  if (n <= 0 || width <= 0) return;
  const int64_t groups = (width + D::kGroupSize - 1) / D::kGroupSize;
  launch_kernel(keyed_rows_kernel<D>, grid_for(n * groups, RandomConfig::kThreads),
                RandomConfig::kThreads, 0, stream, dist, seed, seed2, out, width, keys, slots, n,
                at);
}

template <typename T>
__global__ void __launch_bounds__(RandomConfig::kThreads)
    constant_rows_kernel(T* out, int64_t width, const int64_t* __restrict__ slots, int64_t n,
                         T value, RowsAt at) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n * width;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t / width;
    const int64_t row = row_of(i, slots, at);
    if (row >= 0) out[row * width + (t - i * width)] = value;
  }
}

template <typename T>
using BitsOf = typename rng::Arith<T>::Bits;

}  // namespace

template <typename T>
void random_uniform_rows(T* out, int64_t width, const int64_t* keys, const int64_t* slots,
                         int64_t n, uint64_t seed, uint64_t seed2, T minval, T maxval,
                         cudaStream_t stream, RowsAt at) {
  keyed_rows(rng::uniform_distribution(seed, seed2, minval, maxval), seed, seed2,
             reinterpret_cast<BitsOf<T>*>(out), width, keys, slots, n, stream, at);
}

template <typename T>
void random_normal_rows(T* out, int64_t width, const int64_t* keys, const int64_t* slots, int64_t n,
                        uint64_t seed, uint64_t seed2, T mean, T stddev, cudaStream_t stream,
                        RowsAt at) {
  keyed_rows(rng::normal_distribution(seed, seed2, mean, stddev), seed, seed2,
             reinterpret_cast<BitsOf<T>*>(out), width, keys, slots, n, stream, at);
}

template <typename T>
void truncated_normal_rows(T* out, int64_t width, const int64_t* keys, const int64_t* slots,
                           int64_t n, uint64_t seed, uint64_t seed2, T mean, T stddev,
                           cudaStream_t stream, RowsAt at) {
  keyed_rows(rng::truncated_normal_distribution(seed, seed2, mean, stddev), seed, seed2,
             reinterpret_cast<BitsOf<T>*>(out), width, keys, slots, n, stream, at);
}

template <typename T>
void constant_rows(T* out, int64_t width, const int64_t* slots, int64_t n, T value,
                   cudaStream_t stream, RowsAt at) {
  if (n <= 0 || width <= 0) return;
  launch_kernel(constant_rows_kernel<T>, grid_for(n * width, RandomConfig::kThreads),
                RandomConfig::kThreads, 0, stream, out, width, slots, n, value, at);
}

template <typename T>
void random_uniform(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2,
                    T minval, T maxval, cudaStream_t stream) {
  rng::fill_random(KernelFill{stream}, rng::uniform_distribution(seed, seed2, minval, maxval), out,
                   n, first_element);
}

template <typename T>
void random_normal(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2, T mean,
                   T stddev, cudaStream_t stream) {
  rng::fill_random(KernelFill{stream}, rng::normal_distribution(seed, seed2, mean, stddev), out, n,
                   first_element);
}

template <typename T>
void truncated_normal(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2,
                      T mean, T stddev, cudaStream_t stream) {
  rng::fill_random(KernelFill{stream},
                   rng::truncated_normal_distribution(seed, seed2, mean, stddev), out, n,
                   first_element);
}

#define VARSTATE_INSTANTIATE_FLOAT(T)                                                              \
  template void random_uniform<T>(T*, int64_t, int64_t, uint64_t, uint64_t, T, T, cudaStream_t);   \
  template void random_normal<T>(T*, int64_t, int64_t, uint64_t, uint64_t, T, T, cudaStream_t);    \
  template void truncated_normal<T>(T*, int64_t, int64_t, uint64_t, uint64_t, T, T, cudaStream_t); \
  template void random_uniform_rows<T>(T*, int64_t, const int64_t*, const int64_t*, int64_t,       \
                                       uint64_t, uint64_t, T, T, cudaStream_t, RowsAt);            \
  template void random_normal_rows<T>(T*, int64_t, const int64_t*, const int64_t*, int64_t,        \
                                      uint64_t, uint64_t, T, T, cudaStream_t, RowsAt);             \
  template void truncated_normal_rows<T>(T*, int64_t, const int64_t*, const int64_t*, int64_t,     \
                                         uint64_t, uint64_t, T, T, cudaStream_t, RowsAt);          \
  template void constant_rows<T>(T*, int64_t, const int64_t*, int64_t, T, cudaStream_t, RowsAt);
#define VARSTATE_INSTANTIATE_INT(T) \
  template void random_uniform<T>(T*, int64_t, int64_t, uint64_t, uint64_t, T, T, cudaStream_t);
VARSTATE_RANDOM_FLOAT_TYPES(VARSTATE_INSTANTIATE_FLOAT)
VARSTATE_RANDOM_INT_TYPES(VARSTATE_INSTANTIATE_INT)
#undef VARSTATE_INSTANTIATE_FLOAT
#undef VARSTATE_INSTANTIATE_INT

}  // namespace varstate::kernels::cuda
