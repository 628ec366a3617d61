// The key index of a hash-keyed table on a GPU, mirrored in device memory
// (kernels/cuda/hash_index.h), so that a batch of keys already present is
// resolved to arena slots by a kernel instead of by the host.
// Runtime-internal.
//
// The table's host index (kernels/cpu/hash_index.h) stays the one that
// decides: inserts, erasures, the policy, exports and incremental saves all
// run there. This index follows it, key for key and slot for slot: the
// table records each change (insert_at, erase, clear) while it holds its
// exclusive lock and enqueues them on the device's stream before the lock
// is released, so that every lookup enqueued later (under the shared lock)
// sees them. A change that fails (out of device memory) leaves the mirror
// invalid; lookups then take the host's path until assign() rebuilds it.
//
// Thread safety: the changes need the table's exclusive lock, find() its
// shared lock; find() may run on several threads at once.
#pragma once

#include <cstdint>
#include <span>

#include "varstate/device.h"
#include "varstate/tensor.h"

namespace varstate::internal {

class DeviceKeyIndex {
 public:
  // An empty index on `device` (a GPU).
  explicit DeviceKeyIndex(Device& device);

  // Whether it holds every key of the host index (false after a failed
  // change, until assign()).
  bool valid() const { return valid_; }
  void invalidate();
  // Bytes of device memory held.
  int64_t bytes() const;

  // Room for `keys` live keys without a rebuild.
  void reserve(int64_t keys);
  // Holds exactly keys[i] -> slots[i] (distinct keys) from now on.
  void assign(std::span<const int64_t> keys, std::span<const int64_t> slots);
  // Adds keys[i] -> slots[i]: distinct keys it does not hold.
  void insert_at(std::span<const int64_t> keys, std::span<const int64_t> slots);
  // Removes `keys`, each of which it holds, once.
  void erase(std::span<const int64_t> keys);
  // Removes every key.
  void clear();

  // The slots of `keys` (int64 [n] on the device; kAbsentSlot for a key it
  // does not hold), the keys in device memory, and, with `count_absent`,
  // how many of the keys are absent: the host waits for the count (not for
  // the slots); without it nothing waits and `absent` is -1.
  struct Found {
    Tensor slots;
    Tensor keys;
    int64_t absent = 0;
  };
  Found find(std::span<const int64_t> keys, bool count_absent = true) const;
  // The same for keys already in device memory (int64 [n] on the device).
  Found find(const Tensor& keys, bool count_absent = true) const;

  // Calls of find() so far in this process, on every table (for tests:
  // that a lookup took the device's path).
  static int64_t finds_for_testing();

 private:
  // An array of `capacity` entries holding the live keys, tombstones
  // dropped.
  void rebuild(int64_t capacity);
  // find() of the n keys of `keys` (device memory), counting the absent
  // ones into *count (device memory) and reading it back when count is not
  // null.
  Found find_staged(const Tensor& keys, unsigned long long* count) const;
  // Room for `more` new keys within 3/4 of the array, rebuilt (larger, or
  // the same size to drop tombstones) when there is not.
  void make_room(int64_t more);

  Device& device_;
  Tensor entries_;        // capacity + 2 KeyEntry (kernels/key_hash.h), as bytes
  int64_t capacity_ = 0;  // a power of two, or 0 before the first key
  int64_t live_ = 0;      // keys held
  int64_t used_ = 0;      // entries not empty: live keys and tombstones
  bool valid_ = true;
};

}  // namespace varstate::internal
