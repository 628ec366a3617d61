#include "kernels/cpu/hash_index.h"

#include <algorithm>

namespace varstate::kernels::cpu {
namespace {

constexpr int64_t kMinCapacity = 16;

// The smallest power of two (>= kMinCapacity) whose 3/4 holds `keys`.
int64_t capacity_for(int64_t keys) {
  int64_t capacity = kMinCapacity;
  while (capacity / 4 * 3 < keys) capacity *= 2;
  return capacity;
}

// Entries of a key further on, fetched while earlier keys are probed.
constexpr int64_t kPrefetchDistance = 16;
// The same for the batch insert, whose probes write.
constexpr int64_t kInsertAhead = 32;

}  // namespace

HashIndex::HashIndex(int64_t expected_keys) { rebuild(capacity_for(expected_keys)); }

void HashIndex::find(const int64_t* keys, int64_t n, int64_t* slots) const {
  for (int64_t i = 0; i < n; ++i) {
    if (i + kPrefetchDistance < n) {
      __builtin_prefetch(&entries_[home(static_cast<uint64_t>(keys[i + kPrefetchDistance]))]);
    }
    slots[i] = find(keys[i]);
  }
}

int64_t HashIndex::insert(int64_t key, int64_t slot) {
  const auto k = static_cast<uint64_t>(key);
  if (const int s = side_of(k); s >= 0) {
    if (side_[s] != kAbsent) return side_[s];
    side_[s] = slot;
    ++size_;
    return slot;
  }
  if (used_ + 1 > rebuild_threshold()) {
    // Doubled when live keys fill half the array; else the same size, which
    // only drops the tombstones (a quarter of the array at least is free
    // again either way, so rebuilds are amortized).
    rebuild(array_keys() + 1 > capacity() / 2 ? capacity() * 2 : capacity());
  }
  return probe_insert(k, home(k), slot);
}

__attribute__((always_inline)) inline int64_t HashIndex::probe_insert(uint64_t key, uint64_t home,
                                                                      int64_t slot) {
  Entry* reuse = nullptr;  // the first tombstone on the probe
  for (uint64_t i = home;; i = (i + 1) & mask_) {
    Entry& e = entries_[i];
    if (e.key == key) return e.slot;
    if (e.key == kTombstone && reuse == nullptr) reuse = &e;
    if (e.key == kEmpty) {
      if (reuse == nullptr) {
        reuse = &e;
        ++used_;
      }
      break;
    }
  }
  *reuse = {key, slot};
  ++size_;
  return slot;
}

HashIndex::Room HashIndex::room_for_insert(int64_t n) const {
  if (used_ + n <= rebuild_threshold()) return {};
  return allocate(std::max(capacity(), capacity_for(array_keys() + n)));
}

int64_t HashIndex::insert(const int64_t* keys, int64_t n, const int64_t* free_slots,
                          int64_t* slots) {
  // Room for every key being new, tombstones aside: no rebuild inside the
  // loop, so the entries prefetched stay where they are.
  prepare_insert(n);
  // Each key's home is computed once, kInsertAhead keys ahead, when its
  // entry is prefetched; the probe reads it back from a ring.
  constexpr int64_t kRing = 64;
  static_assert(kRing > kInsertAhead && (kRing & (kRing - 1)) == 0);
  uint64_t homes[kRing];
  for (int64_t i = 0; i < std::min(n, kInsertAhead); ++i) {
    homes[i] = home(static_cast<uint64_t>(keys[i]));
    __builtin_prefetch(&entries_[homes[i]], 1);
  }
  int64_t taken = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i + kInsertAhead < n) {
      const uint64_t h = home(static_cast<uint64_t>(keys[i + kInsertAhead]));
      homes[(i + kInsertAhead) & (kRing - 1)] = h;
      __builtin_prefetch(&entries_[h], 1);
    }
    const auto k = static_cast<uint64_t>(keys[i]);
    const int64_t free_slot = free_slots[taken];
    // (the rebuild check done above)
    const int64_t slot = side_of(k) >= 0 ? insert(keys[i], free_slot)
                                         : probe_insert(k, homes[i & (kRing - 1)], free_slot);
    taken += slot == free_slot;
    slots[i] = slot;
  }
  return taken;
}

int64_t HashIndex::erase(int64_t key) {
  const auto k = static_cast<uint64_t>(key);
  if (const int s = side_of(k); s >= 0) {
    const int64_t slot = side_[s];
    if (slot != kAbsent) --size_;
    side_[s] = kAbsent;
    return slot;
  }
  for (uint64_t i = home(k);; i = (i + 1) & mask_) {
    Entry& e = entries_[i];
    if (e.key == kEmpty) return kAbsent;
    if (e.key != k) continue;
    const int64_t slot = e.slot;
    --size_;
    if (entries_[(i + 1) & mask_].key != kEmpty) {
      e.key = kTombstone;  // a later key's probe may pass here
      return slot;
    }
    // The end of a run: this entry and the tombstones right before it lie
    // on no other key's probe, which would stop at the empty entry anyway.
    for (uint64_t j = i;; j = (j - 1) & mask_) {
      if (j != i && entries_[j].key != kTombstone) break;
      entries_[j].key = kEmpty;
      --used_;
    }
    return slot;
  }
}

void HashIndex::reserve(int64_t keys) {
  const int64_t needed = capacity_for(keys);
  if (needed > capacity()) rebuild(needed);
}

void HashIndex::clear() {
  std::fill(entries_.begin(), entries_.end(), Entry{kEmpty, kAbsent});
  size_ = used_ = 0;
  side_[0] = side_[1] = kAbsent;
}

HashIndex::Room HashIndex::allocate(int64_t capacity) {
  Room room;
  room.entries.reserve(static_cast<size_t>(capacity));
  room.capacity = capacity;
  return room;
}

void HashIndex::take(Room room) noexcept {
  if (room.capacity == 0) return;
  // Within the reserved capacity: no allocation.
  room.entries.assign(static_cast<size_t>(room.capacity), Entry{kEmpty, kAbsent});
  Entries old = std::move(room.entries);
  old.swap(entries_);
  mask_ = static_cast<uint64_t>(room.capacity) - 1;
  used_ = 0;
  for (const Entry& e : old) {
    if (e.key == kEmpty || e.key == kTombstone) continue;
    uint64_t i = home(e.key);
    while (entries_[i].key != kEmpty) i = (i + 1) & mask_;
    entries_[i] = e;
    ++used_;
  }
}

int64_t HashIndex::total_probes() const {
  int64_t probes = (side_[0] != kAbsent) + (side_[1] != kAbsent);
  for (uint64_t p = 0; p <= mask_; ++p) {
    const uint64_t key = entries_[p].key;
    if (key == kEmpty || key == kTombstone) continue;
    probes += static_cast<int64_t>((p - home(key)) & mask_) + 1;
  }
  return probes;
}

}  // namespace varstate::kernels::cpu
