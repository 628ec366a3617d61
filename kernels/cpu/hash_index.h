// The CPU index of a hash-keyed variable: a map from 64-bit keys to row
// slots of the variable's arena (docs/design: rows never move; only this
// index is rebuilt when it grows).
//
// Open addressing with linear probing over a power-of-two array of
// (key, slot) entries, 16 bytes each, 4 to a cache line: a lookup is one
// cache miss in the common case. The position is the low bits of
// kernels/key_hash.h's hash. An erased entry becomes a tombstone, which
// lookups probe past and inserts reuse; live entries plus tombstones stay
// at or under 3/4 of the array, and reaching that rebuilds it (doubled when
// the live keys alone pass half of it, else at the same size, which drops
// the tombstones).
//
// Every int64 key is allowed. Two key values mark empty entries and
// tombstones inside the array; a key equal to either is held in a side
// entry of its own instead.
//
// Thread safety: const members may run concurrently with each other;
// anything else needs the index to itself (the keyed storage's locks
// arrange that).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "base/huge_pages.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/key_hash.h"

namespace varstate::kernels::cpu {

// The allocator of an index's entries: arrays of 2 MiB and more get a
// mapping of their own on huge pages (base/huge_pages.h), so that random
// probes of a large index miss the TLB far less. (Asked of malloc, a
// rebuilt index's array often came from memory already touched on 4 KiB
// pages: one of a 1M-key table's two shards was.)
template <typename T>
struct IndexAllocator {
  using value_type = T;
  IndexAllocator() = default;
  template <typename U>
  IndexAllocator(const IndexAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < internal::kHugePageBytes) return std::allocator<T>().allocate(n);
    void* p = internal::allocate_huge_block(internal::round_to_huge_pages(bytes));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (bytes < internal::kHugePageBytes) {
      std::allocator<T>().deallocate(p, n);
    } else {
      internal::free_huge_block(p, internal::round_to_huge_pages(bytes));
    }
  }
  friend bool operator==(const IndexAllocator&, const IndexAllocator&) { return true; }
};

class HashIndex {
  using Entry = KeyEntry;
  using Entries = std::vector<Entry, IndexAllocator<Entry>>;

 public:
  static constexpr int64_t kAbsent = kAbsentSlot;

  // The array a rebuild moves the live entries into: allocated, not yet
  // filled. An empty Room (capacity 0) asks for no rebuild.
  struct Room {
    Entries entries;  // reserved for `capacity` entries
    int64_t capacity = 0;
  };

  // An index with room for `expected_keys` without a rebuild.
  explicit HashIndex(int64_t expected_keys = 0);

  // Live keys.
  int64_t size() const { return size_; }
  // Entries of the array (a power of two, at least 16).
  int64_t capacity() const { return static_cast<int64_t>(entries_.size()); }
  // Live keys the array holds before it is rebuilt (tombstones aside).
  int64_t rebuild_threshold() const { return capacity() / 4 * 3; }

  // The slot of `key`, or kAbsent.
  int64_t find(int64_t key) const { return find_hashed(key, key_hash(static_cast<uint64_t>(key))); }
  // find() given the key's key_hash (computed once by a caller that also
  // shards or prefetches with it).
  int64_t find_hashed(int64_t key, uint64_t hash) const {
    const auto k = static_cast<uint64_t>(key);
    if (const int s = side_of(k); s >= 0) return side_[s];
    for (uint64_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.key == k) return e.slot;
      if (e.key == kEmpty) return kAbsent;
    }
  }
  // slots[i] = find(keys[i]) for i in [0, n), with the entries of keys
  // further on prefetched while the earlier ones are probed.
  void find(const int64_t* keys, int64_t n, int64_t* slots) const;

  // Maps `key` to `slot` (>= 0) if it is absent. Returns the slot the key
  // has afterwards: `slot` when it was inserted, its old slot otherwise.
  int64_t insert(int64_t key, int64_t slot);
  // The batch form, as the CUDA twin's: free_slots holds n slots no key
  // has; for i in [0, n), keys[i] gets the next unused one if it is absent (in the order the keys
  // first appear; a key repeated in the batch gets one), and slots[i] its
  // slot afterwards. Returns how many free slots were used. Rebuilds at
  // most once, before the first key, and prefetches the entries of keys
  // further on while earlier ones are inserted.
  int64_t insert(const int64_t* keys, int64_t n, const int64_t* free_slots, int64_t* slots);
  // Rebuilds now if the batch insert of `n` keys would (so that the insert
  // allocates nothing).
  void prepare_insert(int64_t n) { take(room_for_insert(n)); }
  // prepare_insert in two steps, for a caller that rebuilds several
  // indexes at once, each on a thread of its own, where nothing may throw:
  // the room the batch insert of `n` keys needs (the allocation, which may
  // throw; an empty Room when the array has room), then the rebuild into
  // it, which allocates nothing. The index must not change in between.
  Room room_for_insert(int64_t n) const;
  void take(Room room) noexcept;
  // Starts loading the entry a lookup of `key` reads first (a caller
  // probing keys one at a time, ahead of the probe).
  void prefetch(int64_t key) const { prefetch_hashed(key_hash(static_cast<uint64_t>(key))); }
  void prefetch_hashed(uint64_t hash) const { prefetch_line(&entries_[hash & mask_]); }
  // Removes `key`. Returns the slot it had, or kAbsent.
  int64_t erase(int64_t key);
  // Rebuilds now if needed so that `keys` live keys fit without a rebuild.
  void reserve(int64_t keys);
  // Removes every key; keeps the array.
  void clear();

  // fn(key, slot) for every live key, in no particular order.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (int s = 0; s < 2; ++s) {
      if (side_[s] != kAbsent) fn(static_cast<int64_t>(kSentinels[s]), side_[s]);
    }
    for (const Entry& e : entries_) {
      if (e.key != kEmpty && e.key != kTombstone) fn(static_cast<int64_t>(e.key), e.slot);
    }
  }

  // How many entries a lookup of each live key probes, in total (1 per key
  // when none collides): the index's own measure of its clustering.
  int64_t total_probes() const;

 private:
  static constexpr uint64_t kEmpty = kEmptyKey;
  static constexpr uint64_t kTombstone = kTombstoneKey;
  static constexpr uint64_t kSentinels[2] = {kEmpty, kTombstone};

  // The side entry of a sentinel key (0 or 1), or -1 for any other key.
  static int side_of(uint64_t key) { return sentinel_of(key); }
  uint64_t home(uint64_t key) const { return key_hash(key) & mask_; }
  // Live keys in the array (the side entries' aside).
  int64_t array_keys() const { return size_ - (side_[0] != kAbsent) - (side_[1] != kAbsent); }
  void rebuild(int64_t capacity) { take(allocate(capacity)); }
  static Room allocate(int64_t capacity);
  // insert(key, slot) for a key of the array, probing from `home`, with
  // room for it (no rebuild check).
  int64_t probe_insert(uint64_t key, uint64_t home, int64_t slot);

  Entries entries_;
  uint64_t mask_ = 0;
  int64_t size_ = 0;  // live keys, side entries included
  int64_t used_ = 0;  // live entries plus tombstones in the array
  int64_t side_[2] = {kAbsent, kAbsent};
};

}  // namespace varstate::kernels::cpu
