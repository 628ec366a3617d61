#include "kernels/cuda/hash_index.h"

#include "kernels/cuda/cuda_types.cuh"

namespace varstate::kernels::cuda {
namespace {

constexpr int kThreads = 256;

using Word = unsigned long long;
static_assert(sizeof(Word) == sizeof(uint64_t));

__device__ __forceinline__ Word* key_word(KeyEntry* e) { return reinterpret_cast<Word*>(&e->key); }

// The key word as another thread may have just written it.
__device__ __forceinline__ uint64_t load_key(const KeyEntry* e) {
  return *reinterpret_cast<const volatile uint64_t*>(&e->key);
}

__device__ __forceinline__ int64_t grid_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

__global__ void __launch_bounds__(kThreads)
    clear_kernel(KeyEntry* __restrict__ entries, int64_t capacity) {
  for (int64_t i = grid_index(); i < capacity + 2; i += grid_stride()) {
    entries[i] = {i < capacity ? kEmptyKey : 0, kAbsentSlot};
  }
}

__global__ void __launch_bounds__(kThreads)
    find_kernel(const KeyEntry* __restrict__ entries, uint64_t mask,
                const int64_t* __restrict__ keys, int64_t n, int64_t* __restrict__ slots,
                Word* __restrict__ absent) {
  for (int64_t i = grid_index(); i < n; i += grid_stride()) {
    const auto k = static_cast<uint64_t>(keys[i]);
    int64_t slot = kAbsentSlot;
    if (const int s = sentinel_of(k); s >= 0) {
      const KeyEntry& side = entries[mask + 1 + s];
      if (side.key != 0) slot = side.slot;
    } else {
      for (uint64_t p = key_hash(k) & mask;; p = (p + 1) & mask) {
        const uint64_t key = entries[p].key;
        if (key == k) {
          slot = entries[p].slot;
          break;
        }
        if (key == kEmptyKey) break;
      }
    }
    slots[i] = slot;
    if (absent != nullptr && slot == kAbsentSlot) atomicAdd(absent, Word{1});
  }
}

// Distinct absent keys with their slots given: each claims the first empty
// entry of its probe.
__global__ void __launch_bounds__(kThreads)
    insert_at_kernel(KeyEntry* __restrict__ entries, uint64_t mask,
                     const int64_t* __restrict__ keys, const int64_t* __restrict__ slots,
                     int64_t n) {
  for (int64_t i = grid_index(); i < n; i += grid_stride()) {
    const auto k = static_cast<uint64_t>(keys[i]);
    if (const int s = sentinel_of(k); s >= 0) {
      entries[mask + 1 + s] = {1, slots[i]};
      continue;
    }
    for (uint64_t p = key_hash(k) & mask;; p = (p + 1) & mask) {
      if (atomicCAS(key_word(&entries[p]), Word{kEmptyKey}, Word{k}) == kEmptyKey) {
        entries[p].slot = slots[i];
        break;
      }
    }
  }
}

// Claims: positions[i] = 2 * p + 1 when this thread claimed entry p for
// keys[i], 2 * p when entry p holds the key already (or another thread of
// the batch claimed it).
__global__ void __launch_bounds__(kThreads)
    claim_kernel(KeyEntry* __restrict__ entries, uint64_t mask, const int64_t* __restrict__ keys,
                 int64_t n, int64_t* __restrict__ positions) {
  for (int64_t i = grid_index(); i < n; i += grid_stride()) {
    const auto k = static_cast<uint64_t>(keys[i]);
    if (const int s = sentinel_of(k); s >= 0) {
      const uint64_t p = mask + 1 + s;
      const Word old = atomicCAS(key_word(&entries[p]), Word{0}, Word{1});
      positions[i] = static_cast<int64_t>(2 * p + (old == 0));
      continue;
    }
    for (uint64_t p = key_hash(k) & mask;; p = (p + 1) & mask) {
      uint64_t key = load_key(&entries[p]);
      if (key == kEmptyKey) {
        key = atomicCAS(key_word(&entries[p]), Word{kEmptyKey}, Word{k});
        if (key == kEmptyKey) {
          positions[i] = static_cast<int64_t>(2 * p + 1);
          break;
        }
      }
      if (key == k) {  // present, or claimed by another thread of the batch
        positions[i] = static_cast<int64_t>(2 * p);
        break;
      }
    }
  }
}

// Gives each claimed entry the next free slot.
__global__ void __launch_bounds__(kThreads)
    publish_kernel(KeyEntry* __restrict__ entries, const int64_t* __restrict__ positions, int64_t n,
                   const int64_t* __restrict__ free_slots, Word* __restrict__ taken) {
  for (int64_t i = grid_index(); i < n; i += grid_stride()) {
    const int64_t code = positions[i];
    if ((code & 1) == 0) continue;
    entries[code >> 1].slot = free_slots[atomicAdd(taken, Word{1})];
  }
}

__global__ void __launch_bounds__(kThreads)
    resolve_kernel(const KeyEntry* __restrict__ entries, const int64_t* __restrict__ positions,
                   int64_t n, int64_t* __restrict__ slots) {
  for (int64_t i = grid_index(); i < n; i += grid_stride()) {
    slots[i] = entries[positions[i] >> 1].slot;
  }
}

__global__ void __launch_bounds__(kThreads)
    erase_kernel(KeyEntry* __restrict__ entries, uint64_t mask, const int64_t* __restrict__ keys,
                 int64_t n, int64_t* __restrict__ slots, Word* __restrict__ erased) {
  for (int64_t i = grid_index(); i < n; i += grid_stride()) {
    const auto k = static_cast<uint64_t>(keys[i]);
    int64_t slot = kAbsentSlot;
    if (const int s = sentinel_of(k); s >= 0) {
      KeyEntry& side = entries[mask + 1 + s];
      if (atomicCAS(key_word(&side), Word{1}, Word{0}) == 1) slot = side.slot;
    } else {
      for (uint64_t p = key_hash(k) & mask;; p = (p + 1) & mask) {
        const uint64_t key = load_key(&entries[p]);
        if (key == kEmptyKey) break;
        if (key != k) continue;
        // Of several threads erasing one key, the one whose CAS lands wins.
        if (atomicCAS(key_word(&entries[p]), Word{k}, Word{kTombstoneKey}) == k) {
          slot = entries[p].slot;
        }
        break;
      }
    }
    slots[i] = slot;
    if (slot != kAbsentSlot) atomicAdd(erased, Word{1});
  }
}

__global__ void __launch_bounds__(kThreads)
    rebuild_kernel(const KeyEntry* __restrict__ from, int64_t from_capacity,
                   KeyEntry* __restrict__ to, uint64_t to_mask) {
  for (int64_t i = grid_index(); i < from_capacity + 2; i += grid_stride()) {
    const KeyEntry e = from[i];
    if (i >= from_capacity) {  // a side entry keeps its place
      to[to_mask + 1 + (i - from_capacity)] = e;
      continue;
    }
    if (e.key == kEmptyKey || e.key == kTombstoneKey) continue;
    // Every key is distinct: the first empty entry claimed is this key's.
    for (uint64_t p = key_hash(e.key) & to_mask;; p = (p + 1) & to_mask) {
      if (atomicCAS(key_word(&to[p]), Word{kEmptyKey}, Word{e.key}) == kEmptyKey) {
        to[p].slot = e.slot;
        break;
      }
    }
  }
}

uint64_t mask_of(int64_t capacity) { return static_cast<uint64_t>(capacity) - 1; }

}  // namespace

void hash_index_clear(KeyEntry* entries, int64_t capacity, cudaStream_t stream) {
  launch_kernel(clear_kernel, grid_for(capacity + 2, kThreads), kThreads, 0, stream, entries,
                capacity);
}

void hash_index_find(const KeyEntry* entries, int64_t capacity, const int64_t* keys, int64_t n,
                     int64_t* slots, cudaStream_t stream, unsigned long long* absent) {
  if (n == 0) return;
  launch_kernel(find_kernel, grid_for(n, kThreads), kThreads, 0, stream, entries, mask_of(capacity),
                keys, n, slots, absent);
}

void hash_index_insert_at(KeyEntry* entries, int64_t capacity, const int64_t* keys,
                          const int64_t* slots, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  launch_kernel(insert_at_kernel, grid_for(n, kThreads), kThreads, 0, stream, entries,
                mask_of(capacity), keys, slots, n);
}

void hash_index_insert(KeyEntry* entries, int64_t capacity, const int64_t* keys, int64_t n,
                       const int64_t* free_slots, unsigned long long* taken, int64_t* positions,
                       int64_t* slots, cudaStream_t stream) {
  if (n == 0) return;
  const unsigned grid = grid_for(n, kThreads);
  launch_kernel(claim_kernel, grid, kThreads, 0, stream, entries, mask_of(capacity), keys, n,
                positions);
  launch_kernel(publish_kernel, grid, kThreads, 0, stream, entries,
                static_cast<const int64_t*>(positions), n, free_slots, taken);
  launch_kernel(resolve_kernel, grid, kThreads, 0, stream, static_cast<const KeyEntry*>(entries),
                static_cast<const int64_t*>(positions), n, slots);
}

void hash_index_erase(KeyEntry* entries, int64_t capacity, const int64_t* keys, int64_t n,
                      int64_t* slots, unsigned long long* erased, cudaStream_t stream) {
  if (n == 0) return;
  launch_kernel(erase_kernel, grid_for(n, kThreads), kThreads, 0, stream, entries,
                mask_of(capacity), keys, n, slots, erased);
}

void hash_index_rebuild(const KeyEntry* from, int64_t from_capacity, KeyEntry* to,
                        int64_t to_capacity, cudaStream_t stream) {
  hash_index_clear(to, to_capacity, stream);
  launch_kernel(rebuild_kernel, grid_for(from_capacity + 2, kThreads), kThreads, 0, stream, from,
                from_capacity, to, mask_of(to_capacity));
}

}  // namespace varstate::kernels::cuda
