// The device twin of kernels/cpu/hash_index.h: the index of a hash-keyed
// variable on a GPU, key -> row slot, in device memory.
//
// The same layout and probe: a power-of-two array of KeyEntry
// (kernels/key_hash.h), linear probing from the low bits of key_hash,
// followed here by two side entries for the two reserved key words (their
// key word is 1 while the key is present, 0 otherwise): `capacity + 2`
// entries in all. Where the CPU index reuses tombstones, this one leaves
// them to the next rebuild, so that concurrent inserts of one key can
// never claim two entries.
//
// Batches run as kernels on `stream`, one thread per key, with no host
// synchronization. An insert claims an empty entry by atomicCAS on its key
// word; the claimed entries get their slots in a second kernel and every
// key reads its slot in a third, so no thread ever waits for another's.
// Slot numbers come from the caller's free list in the order the claims
// land, not a fixed one; which key gets which slot is the index's business
// (values are found by key). The caller (the keyed storage) keeps the
// counts and rebuilds before an insert could fill more than 3/4 of the
// array.
#pragma once

#include <cstdint>

#include "kernels/common.h"
#include "kernels/key_hash.h"

namespace varstate::kernels::cuda {

// Entries of an index of `capacity` (a power of two).
inline int64_t hash_index_entries(int64_t capacity) { return capacity + 2; }

// Empties every entry.
void hash_index_clear(KeyEntry* entries, int64_t capacity, cudaStream_t stream);

// slots[i] = the slot of keys[i], or kAbsentSlot, for i in [0, n); with
// `absent`, *absent grows by the number of positions whose key is absent.
void hash_index_find(const KeyEntry* entries, int64_t capacity, const int64_t* keys, int64_t n,
                     int64_t* slots, cudaStream_t stream, unsigned long long* absent = nullptr);

// Inserts the keys of keys[0, n) that are absent. Each distinct new key
// takes one slot of free_slots[0, n), the next after *taken (which the
// caller zeroes first and reads after: how many were taken). slots[i] is
// then the slot of keys[i], new or old; repeats of a key in the batch get
// the same one. `positions` is device scratch of n elements. The caller
// guarantees room: live entries plus tombstones plus n at most 3/4 of
// `capacity`.
void hash_index_insert(KeyEntry* entries, int64_t capacity, const int64_t* keys, int64_t n,
                       const int64_t* free_slots, unsigned long long* taken, int64_t* positions,
                       int64_t* slots, cudaStream_t stream);

// Puts keys[i] -> slots[i] for i in [0, n): distinct keys, absent from
// the index, with slots the caller chose (for an index that mirrors one
// kept elsewhere: the keyed table's host index decides, this one follows).
// Room as for hash_index_insert.
void hash_index_insert_at(KeyEntry* entries, int64_t capacity, const int64_t* keys,
                          const int64_t* slots, int64_t n, cudaStream_t stream);

// Erases the keys of keys[0, n) that are present: slots[i] is the slot
// keys[i] had, or kAbsentSlot (absent, or a repeat of a key the batch
// erases at another position), and *erased grows by the number of keys
// erased.
void hash_index_erase(KeyEntry* entries, int64_t capacity, const int64_t* keys, int64_t n,
                      int64_t* slots, unsigned long long* erased, cudaStream_t stream);

// Fills `to` (to_capacity, a power of two large enough for every live key
// of `from` within 3/4 of it) with the live entries of `from`, without
// tombstones.
void hash_index_rebuild(const KeyEntry* from, int64_t from_capacity, KeyEntry* to,
                        int64_t to_capacity, cudaStream_t stream);

}  // namespace varstate::kernels::cuda
