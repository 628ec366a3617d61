// The CUDA scatter kernels and their launcher, shared by the files that
// instantiate them for groups of dtypes (scatter_float.cu, scatter_half.cu,
// scatter_int.cu, scatter_int_wide.cu, scatter_complex.cu). The bounds check
// and the radix sort of the deterministic path live in scatter.cu.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/compiled_arch.h"
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/scatter.h"
#include "kernels/elementwise_functors.h"
#include "varstate/error.h"

namespace varstate::kernels::cuda::scatter_internal {

struct ScatterConfig {
  static constexpr int kThreads = 256;
  static constexpr int kVectorBytes = 16;
  static constexpr int kMaxLanes = 32;  // lanes per row: at most a warp
  // Updates of one segment loaded before they are applied (deterministic
  // path): keeps several loads in flight per lane.
  static constexpr int kBatch = 8;
  // The deterministic path sorts at most this many indices at a time; longer
  // inputs are processed in consecutive chunks, which keeps the original
  // order of updates and so the result.
  static constexpr int64_t kMaxSortItems = int64_t{1} << 31;
};

// ---------------------------------------------------------------------------
// Sorted (index, position) pairs of the deterministic path (scatter.cu).

// positions[k] is the position of the k-th smallest index (stable, so equal
// indices keep their original order); keys[k] is that index, as uint32_t or,
// when wide_keys, as uint64_t.
struct SortedRun {
  const uint32_t* positions;
  const void* keys;
  bool wide_keys;

  __device__ __forceinline__ uint64_t key(int64_t k) const {
    return wide_keys ? static_cast<const uint64_t*>(keys)[k]
                     : static_cast<const uint32_t*>(keys)[k];
  }
};

// Scratch bytes that sort_indices needs for up to n indices into `rows` rows.
size_t sort_scratch_bytes(int64_t n, int64_t rows);

// Enqueues the stable sort of indices[0, n) (n <= kMaxSortItems) in
// `scratch`, of `scratch_bytes` bytes: sort_scratch_bytes(m, rows) for some
// m >= n (CUB's storage is what the layout for n leaves, so its size is not
// asked again).
template <typename Index>
SortedRun sort_indices(const Index* indices, int64_t n, int64_t rows, void* scratch,
                       size_t scratch_bytes, cudaStream_t stream);

// What kernel_has_cas128 found for one kernel, per device: 0 not asked
// yet, 1 no, 2 yes (devices past kDevices are asked every time).
struct Cas128Cache {
  static constexpr int kDevices = 64;
  std::atomic<int8_t> by_device[kDevices] = {};
};

// True if `kernel` (a __global__ function's address), as it runs on the
// current device, was compiled with 16-byte compare-and-swap: decided from
// the code the runtime picked (kernels/cuda/compiled_arch.h), so that the
// launcher and the kernel's `#if __CUDA_ARCH__` agree. Kept in `cache` (the
// kernel's own) once known: no lock on the way, thread-safe.
bool kernel_has_cas128(const void* kernel, Cas128Cache& cache);

// Scratch memory for the length of one call, freed (stream-ordered) on exit.
class ScratchBuffer {
 public:
  ScratchBuffer(const ScratchAllocator& allocator, size_t bytes)
      : allocator_(allocator), ptr_(allocator.allocate(bytes)) {}
  ~ScratchBuffer() {
    if (ptr_ != nullptr) allocator_.deallocate(ptr_);
  }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  const ScratchAllocator& allocator_;
  void* ptr_;
};

// ---------------------------------------------------------------------------
// Element arithmetic.

template <typename To, typename From>
__device__ __forceinline__ To bits_as(const From& x) {
  static_assert(sizeof(To) == sizeof(From));
  To out;
  memcpy(&out, &x, sizeof(To));
  return out;
}

struct alignas(16) Bits128 {
  unsigned long long lo, hi;
};

// One load of *p, as one value. cas_apply's first read races with other
// threads' compare-and-swap on the same element: a plain read lets the
// compiler load it again for each use (it may assume nobody else writes),
// and if those loads see different values, the value compared is not the
// value the update was computed from, and a retry applies the update twice.
// (Found on emulated GPUs: GCC read the element three times.)
template <typename W>
__device__ __forceinline__ W load_once(const W* p) {
  if constexpr (std::is_same_v<W, Bits128>) {
    const volatile Bits128* v = p;
    return {v->lo, v->hi};
  } else {
    return *static_cast<const volatile W*>(p);
  }
}

#ifdef __CUDA_ARCH__
// cas_apply's 16-byte branch and kernel_has_cas128 use one threshold.
static_assert((__CUDA_ARCH__ >= 900) == ptx_has_cas128(__CUDA_ARCH__ / 10));
#endif

// *p = f(*p) with a compare-and-swap loop on the element (2, 4, 8 or 16
// bytes) or, for a 1-byte element, on the aligned 16-bit halfword that holds
// it. Returns without a write when f leaves the element unchanged (min/max
// that do not improve, multiplication by 1), which keeps contended rows cheap.
//
// Sub-word elements never use a 32-bit word: the word around the last
// element of an odd-sized table would reach past the end of its allocation.
// A byte's halfword can reach one byte past the end of a table of odd byte
// size; device allocations are padded to 16-byte granules and the padding
// is zeroed (device/allocation_tail.h), so that byte is always allocated and
// initialized.
template <typename C, typename F>
__device__ __forceinline__ void cas_apply(C* p, F f) {
  if constexpr (sizeof(C) == 2 || sizeof(C) == 4 || sizeof(C) == 8) {
    using W =
        std::conditional_t<sizeof(C) == 2, unsigned short,
                           std::conditional_t<sizeof(C) == 4, unsigned int, unsigned long long>>;
    W* w = reinterpret_cast<W*>(p);
    W seen = load_once(w), want;
    do {
      want = seen;
      const W next = bits_as<W>(f(bits_as<C>(want)));
      if (next == want) return;
      seen = atomicCAS(w, want, next);
    } while (seen != want);
  } else if constexpr (sizeof(C) == 1) {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
    unsigned short* w = reinterpret_cast<unsigned short*>(addr & ~uintptr_t{1});
    const unsigned shift = static_cast<unsigned>(addr & 1) * 8;
    const unsigned mask = 0xFFu << shift;
    unsigned short seen = load_once(w), want;
    do {
      want = seen;
      const unsigned char old = static_cast<unsigned char>((want & mask) >> shift);
      const unsigned char now = bits_as<unsigned char>(f(bits_as<C>(old)));
      if (now == old) return;
      const unsigned short next =
          static_cast<unsigned short>((want & ~mask) | (static_cast<unsigned>(now) << shift));
      seen = atomicCAS(w, want, next);
    } while (seen != want);
  } else {
    static_assert(sizeof(C) == 16);
#if __CUDA_ARCH__ >= 900
    Bits128* w = reinterpret_cast<Bits128*>(p);
    Bits128 seen = load_once(w), want;
    do {
      want = seen;
      const Bits128 next = bits_as<Bits128>(f(bits_as<C>(want)));
      if (next.lo == want.lo && next.hi == want.hi) return;
      seen = atomicCAS(w, want, next);
    } while (seen.lo != want.lo || seen.hi != want.hi);
#else
    __trap();  // the launcher routes this case to the deterministic path (kernel_has_cas128)
#endif
  }
}

// The hardware has an atomic for op on C (add/sub: one add of u or -u).
template <ScatterOp Op, typename C>
inline constexpr bool has_native_atomic =
    ((Op == ScatterOp::kAdd || Op == ScatterOp::kSub) &&
     (std::is_same_v<C, float> || std::is_same_v<C, double> || kIsDeviceHalf<C> ||
      (std::is_integral_v<C> && sizeof(C) >= 4) || kIsComplex<C>)) ||
    ((Op == ScatterOp::kMin || Op == ScatterOp::kMax) && std::is_integral_v<C> && sizeof(C) >= 4);

template <typename C>
__device__ __forceinline__ C negate(C u) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(U(0) - U(u));
  } else if constexpr (kIsDeviceHalf<C>) {
    return device_half_from_float<C>(-device_half_to_float(u));
  } else {
    return -u;
  }
}

template <typename C>
__device__ __forceinline__ void atomic_add(C* p, C u) {
  if constexpr (kIsComplex<C>) {
    using R = typename C::value_type;
    R* r = reinterpret_cast<R*>(p);
    atomicAdd(r, u.real());
    atomicAdd(r + 1, u.imag());
  } else if constexpr (std::is_integral_v<C> && sizeof(C) == 8) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(u));
  } else if constexpr (std::is_same_v<C, int32_t>) {
    atomicAdd(reinterpret_cast<int*>(p), static_cast<int>(u));
  } else if constexpr (std::is_same_v<C, uint32_t>) {
    atomicAdd(reinterpret_cast<unsigned int*>(p), static_cast<unsigned int>(u));
  } else {
    atomicAdd(p, u);
  }
}

template <ScatterOp Op, typename C>
__device__ __forceinline__ void atomic_min_max(C* p, C u) {
  using A =
      std::conditional_t<sizeof(C) == 4, std::conditional_t<std::is_signed_v<C>, int, unsigned int>,
                         std::conditional_t<std::is_signed_v<C>, long long, unsigned long long>>;
  if constexpr (Op == ScatterOp::kMin) {
    atomicMin(reinterpret_cast<A*>(p), static_cast<A>(u));
  } else {
    atomicMax(reinterpret_cast<A*>(p), static_cast<A>(u));
  }
}

// *p = op(*p, u), atomically unless op is kUpdate.
template <ScatterOp Op, typename C>
__device__ __forceinline__ void apply_element(C* p, C u) {
  if constexpr (Op == ScatterOp::kUpdate) {
    *p = u;
  } else if constexpr (has_native_atomic<Op, C>) {
    if constexpr (Op == ScatterOp::kAdd)
      atomic_add(p, u);
    else if constexpr (Op == ScatterOp::kSub)
      atomic_add(p, negate(u));
    else
      atomic_min_max<Op>(p, u);
  } else {
    cas_apply(p, [u](C t) { return scatter_combine<Op>(t, u); });
  }
}

// ---------------------------------------------------------------------------
// Row vectors: V elements, one 16-byte access when V > 1.

template <typename C, int V>
struct alignas(sizeof(C) * V) Vec {
  C v[V];
};

template <typename C, int V>
__device__ __forceinline__ Vec<C, V> load_vec(const C* p) {
  return *reinterpret_cast<const Vec<C, V>*>(p);
}

template <typename C, int V>
__device__ __forceinline__ Vec<C, V> splat(C s) {
  Vec<C, V> out;
#pragma unroll
  for (int k = 0; k < V; ++k) out.v[k] = s;
  return out;
}

// dst[0, V) = op(dst[0, V), u), atomically unless op is kUpdate.
template <ScatterOp Op, typename C, int V>
__device__ __forceinline__ void apply_vec(C* dst, const Vec<C, V>& u) {
  constexpr bool kAddSub = Op == ScatterOp::kAdd || Op == ScatterOp::kSub;
  if constexpr (Op == ScatterOp::kUpdate) {
    *reinterpret_cast<Vec<C, V>*>(dst) = u;
  } else if constexpr (kAddSub && std::is_same_v<C, float> && V == 4) {
    const float s = Op == ScatterOp::kSub ? -1.0f : 1.0f;
#if __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float4*>(dst),
              make_float4(s * u.v[0], s * u.v[1], s * u.v[2], s * u.v[3]));
#else
#pragma unroll
    for (int k = 0; k < 4; ++k) atomicAdd(dst + k, s * u.v[k]);
#endif
  } else if constexpr (kAddSub && kIsDeviceHalf<C> && V % 2 == 0) {
    using C2 = std::conditional_t<std::is_same_v<C, __half>, __half2, __nv_bfloat162>;
#pragma unroll
    for (int k = 0; k < V; k += 2) {
      C2 pair;
      pair.x = Op == ScatterOp::kSub ? negate(u.v[k]) : u.v[k];
      pair.y = Op == ScatterOp::kSub ? negate(u.v[k + 1]) : u.v[k + 1];
      atomicAdd(reinterpret_cast<C2*>(dst + k), pair);
    }
  } else if constexpr (!has_native_atomic<Op, C> && sizeof(C) < 4 && V * sizeof(C) % 4 == 0) {
    // One compare-and-swap per 32-bit word updates all its elements at once.
    constexpr int kPerWord = 4 / sizeof(C);
#pragma unroll
    for (int w = 0; w < V / kPerWord; ++w) {
      struct Word {
        C v[kPerWord];
      };
      const C* uw = u.v + w * kPerWord;
      cas_apply(reinterpret_cast<Word*>(dst + w * kPerWord), [uw](Word t) {
#pragma unroll
        for (int k = 0; k < kPerWord; ++k) t.v[k] = scatter_combine<Op>(t.v[k], uw[k]);
        return t;
      });
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) apply_element<Op>(dst + k, u.v[k]);
  }
}

// ---------------------------------------------------------------------------
// Kernels.

__device__ __forceinline__ bool bad_index_recorded(const IndexCheck* check) {
  return check != nullptr && check->first_bad_position != IndexCheck::kNone;
}

// Atomic path: a group of 2^lanes_log2 lanes per update row, grid-stride over
// rows; each lane applies V-element vectors of the row.
template <ScatterOp Op, typename C, typename Index, int V>
__global__ void __launch_bounds__(ScatterConfig::kThreads)
    scatter_atomic_kernel(C* __restrict__ table, int64_t row_width,
                          const Index* __restrict__ indices, int64_t n,
                          const C* __restrict__ updates, bool updates_scalar, int lanes_log2,
                          const IndexCheck* check) {
  if (bad_index_recorded(check)) return;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t groups = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> lanes_log2;
  const int lanes = 1 << lanes_log2;
  const int lane = threadIdx.x & (lanes - 1);
  const int64_t vecs = row_width / V;
  const C s = updates_scalar ? updates[0] : C{};
  for (int64_t i = thread >> lanes_log2; i < n; i += groups) {
    C* dst = table + static_cast<int64_t>(indices[i]) * row_width;
    const C* src = updates + i * row_width;
    for (int64_t v = lane; v < vecs; v += lanes) {
      const Vec<C, V> u = updates_scalar ? splat<C, V>(s) : load_vec<C, V>(src + v * V);
      apply_vec<Op, C, V>(dst + v * V, u);
    }
  }
}

// Folds the updates at sorted positions [begin, end) into row `dst`, in
// order, kBatch updates loaded at a time; each lane owns V-element vectors.
template <ScatterOp Op, typename C, int V>
__device__ __forceinline__ void fold_run(C* dst, int64_t row_width,
                                         const uint32_t* __restrict__ positions, int64_t begin,
                                         int64_t end, const C* __restrict__ updates,
                                         bool updates_scalar, C s, int lane, int lanes) {
  constexpr int kBatch = ScatterConfig::kBatch;
  const int64_t vecs = row_width / V;
  for (int64_t v = lane; v < vecs; v += lanes) {
    Vec<C, V> acc = load_vec<C, V>(dst + v * V);
    for (int64_t j = begin; j < end; j += kBatch) {
      const int m = end - j < kBatch ? static_cast<int>(end - j) : kBatch;
      Vec<C, V> u[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if (b < m) {
          u[b] = updates_scalar
                     ? splat<C, V>(s)
                     : load_vec<C, V>(updates + static_cast<int64_t>(positions[j + b]) * row_width +
                                      v * V);
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if (b < m) {
#pragma unroll
          for (int e = 0; e < V; ++e) acc.v[e] = scatter_combine<Op>(acc.v[e], u[b].v[e]);
        }
      }
    }
    *reinterpret_cast<Vec<C, V>*>(dst + v * V) = acc;
  }
}

// Deterministic path: a lane group per distinct index (the first sorted
// position of each run of equal keys) folds the run's updates into the row
// in original order, in registers, and writes the row once.
template <ScatterOp Op, typename C, int V>
__global__ void __launch_bounds__(ScatterConfig::kThreads)
    scatter_sorted_kernel(C* __restrict__ table, int64_t row_width, SortedRun run, int64_t n,
                          const C* __restrict__ updates, bool updates_scalar, int lanes_log2,
                          const IndexCheck* check) {
  if (bad_index_recorded(check)) return;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t groups = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> lanes_log2;
  const int lanes = 1 << lanes_log2;
  const int lane = threadIdx.x & (lanes - 1);
  const int64_t vecs = row_width / V;
  const C s = updates_scalar ? updates[0] : C{};
  for (int64_t k = thread >> lanes_log2; k < n; k += groups) {
    const uint64_t key = run.key(k);
    if (k > 0 && run.key(k - 1) == key) continue;
    // End of the run: gallop, then bisect (O(log length) loads).
    int64_t lo = k, step = 1;
    while (lo + step < n && run.key(lo + step) == key) {
      lo += step;
      step *= 2;
    }
    int64_t hi = lo + step < n ? lo + step : n;  // key(lo) == key; key(hi) != key or hi == n
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (run.key(mid) == key)
        lo = mid;
      else
        hi = mid;
    }
    const int64_t end = hi;
    C* dst = table + static_cast<int64_t>(key) * row_width;
    if constexpr (Op == ScatterOp::kUpdate) {
      const C* src = updates + static_cast<int64_t>(run.positions[end - 1]) * row_width;
      for (int64_t v = lane; v < vecs; v += lanes) {
        *reinterpret_cast<Vec<C, V>*>(dst + v * V) =
            updates_scalar ? splat<C, V>(s) : load_vec<C, V>(src + v * V);
      }
    } else {
      fold_run<Op, C, V>(dst, row_width, run.positions, k, end, updates, updates_scalar, s, lane,
                         lanes);
    }
  }
}

// ---------------------------------------------------------------------------
// Launcher.

inline int ceil_log2(int64_t x) {
  int l = 0;
  while ((int64_t{1} << l) < x) ++l;
  return l;
}

template <ScatterOp Op, typename C, typename Index, int V>
void launch(C* table, int64_t rows, int64_t row_width, const Index* indices, int64_t n,
            const C* updates, bool updates_scalar, bool deterministic, const IndexCheck* check,
            const ScratchAllocator& scratch, cudaStream_t stream) {
  constexpr int kThreads = ScatterConfig::kThreads;
  const int64_t vecs = row_width / V;
  const int lanes_log2 =
      ceil_log2(vecs < ScatterConfig::kMaxLanes ? vecs : ScatterConfig::kMaxLanes);
  if (!deterministic) {
    launch_kernel(scatter_atomic_kernel<Op, C, Index, V>, grid_for(n << lanes_log2, kThreads),
                  kThreads, 0, stream, table, row_width, indices, n, updates, updates_scalar,
                  lanes_log2, check);
    return;
  }
  const int64_t chunk = n < ScatterConfig::kMaxSortItems ? n : ScatterConfig::kMaxSortItems;
  const size_t buffer_bytes = sort_scratch_bytes(chunk, rows);
  ScratchBuffer buffer(scratch, buffer_bytes);
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t m = n - begin < chunk ? n - begin : chunk;
    const SortedRun run =
        sort_indices(indices + begin, m, rows, buffer.get(), buffer_bytes, stream);
    const C* u = updates_scalar ? updates : updates + begin * row_width;
    launch_kernel(scatter_sorted_kernel<Op, C, V>, grid_for(m << lanes_log2, kThreads), kThreads, 0,
                  stream, table, row_width, run, m, u, updates_scalar, lanes_log2, check);
  }
}

template <ScatterOp Op, typename C, typename Index>
void scatter_op(C* table, int64_t rows, int64_t row_width, const Index* indices, int64_t n,
                const C* updates, bool updates_scalar, bool deterministic, const IndexCheck* check,
                const ScratchAllocator& scratch, cudaStream_t stream) {
  constexpr int kVector =
      sizeof(C) < ScatterConfig::kVectorBytes ? ScatterConfig::kVectorBytes / sizeof(C) : 1;
  auto aligned = [](const void* p) {
    return reinterpret_cast<uintptr_t>(p) % ScatterConfig::kVectorBytes == 0;
  };
  if constexpr (sizeof(C) == 16 && (Op == ScatterOp::kMul || Op == ScatterOp::kDiv)) {
    // Complex128 multiply and divide need the 16-byte compare-and-swap of
    // the atomic kernel: without it in the code that runs, sort instead.
    static Cas128Cache cache;
    if (!deterministic &&
        !kernel_has_cas128(reinterpret_cast<const void*>(&scatter_atomic_kernel<Op, C, Index, 1>),
                           cache)) {
      deterministic = true;
    }
  }
  if constexpr (kVector > 1) {
    if (row_width % kVector == 0 && aligned(table) && (updates_scalar || aligned(updates))) {
      launch<Op, C, Index, kVector>(table, rows, row_width, indices, n, updates, updates_scalar,
                                    deterministic, check, scratch, stream);
      return;
    }
  }
  launch<Op, C, Index, 1>(table, rows, row_width, indices, n, updates, updates_scalar,
                          deterministic, check, scratch, stream);
}

}  // namespace varstate::kernels::cuda::scatter_internal

namespace varstate::kernels::cuda {

template <typename T, typename Index>
void scatter(ScatterOp op, T* table, int64_t rows, int64_t row_width, const Index* indices,
             int64_t num_indices, const T* updates, bool updates_scalar, bool deterministic,
             const IndexCheck* check, const ScratchAllocator& scratch, cudaStream_t stream) {
  using namespace scatter_internal;
  using C = cuda_t<T>;
  if (num_indices == 0 || row_width == 0) return;
  C* t = reinterpret_cast<C*>(table);
  const C* u = reinterpret_cast<const C*>(updates);
#define VARSTATE_SCATTER_CASE(OP)                                                          \
  case ScatterOp::OP:                                                                      \
    scatter_op<ScatterOp::OP>(t, rows, row_width, indices, num_indices, u, updates_scalar, \
                              deterministic, check, scratch, stream);                      \
    return;
  switch (op) {
    VARSTATE_SCATTER_CASE(kUpdate)
    VARSTATE_SCATTER_CASE(kAdd)
    VARSTATE_SCATTER_CASE(kSub)
    VARSTATE_SCATTER_CASE(kMul)
    VARSTATE_SCATTER_CASE(kDiv)
    case ScatterOp::kMin:
    case ScatterOp::kMax:
      if constexpr (kIsComplex<C>) {
        throw InvalidArgumentError("scatter_min/scatter_max: complex values are not ordered");
      } else {
        switch (op) {
          VARSTATE_SCATTER_CASE(kMin)
          VARSTATE_SCATTER_CASE(kMax)
          default:
            return;
        }
      }
  }
#undef VARSTATE_SCATTER_CASE
}

}  // namespace varstate::kernels::cuda

// Explicit instantiations for storage type T, inside namespace
// varstate::kernels::cuda.
#define VARSTATE_INSTANTIATE_CUDA_SCATTER(E, T)                                               \
  template void scatter<T, int32_t>(ScatterOp, T*, int64_t, int64_t, const int32_t*, int64_t, \
                                    const T*, bool, bool, const IndexCheck*,                  \
                                    const ScratchAllocator&, cudaStream_t);                   \
  template void scatter<T, int64_t>(ScatterOp, T*, int64_t, int64_t, const int64_t*, int64_t, \
                                    const T*, bool, bool, const IndexCheck*,                  \
                                    const ScratchAllocator&, cudaStream_t);
