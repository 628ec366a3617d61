// The hash of the hash-keyed variables' 64-bit keys, shared by the CPU and
// CUDA hash indexes so that a key probes the same entries on either, and
// by the sharding of a keyed table over devices and tasks.
//
// The mixer is MurmurHash3's 64-bit finalizer: every input bit reaches
// every output bit, so keys that differ in a few bits (consecutive ids,
// ids with a common prefix) spread over the whole table. An index uses the
// low bits of the hash for the position; shard_of uses the high bits, so
// the keys of one shard still spread over its index.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define VARSTATE_KEY_HD __host__ __device__ __forceinline__
#else
#define VARSTATE_KEY_HD inline
#endif

namespace varstate::kernels {

VARSTATE_KEY_HD uint64_t key_hash(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  key *= 0xc4ceb9fe1a85ec53ull;
  key ^= key >> 33;
  return key;
}

// An entry of a hash index (CPU and CUDA alike): a key word and the row
// slot it maps to, 16 bytes. Two key words are reserved: kEmptyKey marks a
// free entry, kTombstoneKey an erased one (probes pass it); the user keys
// equal to them live in side entries (kernels/cpu/hash_index.h).
struct KeyEntry {
  uint64_t key;
  int64_t slot;
};
inline constexpr uint64_t kEmptyKey = 0x8000000000000000ull;      // INT64_MIN
inline constexpr uint64_t kTombstoneKey = 0x8000000000000001ull;  // INT64_MIN + 1
inline constexpr int64_t kAbsentSlot = -1;

// 0 or 1 for the two reserved key words, -1 for every other key.
VARSTATE_KEY_HD int sentinel_of(uint64_t key) {
  return key == kEmptyKey ? 0 : key == kTombstoneKey ? 1 : -1;
}

// The shard in [0, shards) that holds `key`: the hash's high 32 bits
// scaled to the shard count (no modulo bias, no division).
VARSTATE_KEY_HD int64_t key_shard(uint64_t key, int64_t shards) {
  return static_cast<int64_t>(((key_hash(key) >> 32) * static_cast<uint64_t>(shards)) >> 32);
}

// The device shard in [0, shards) of a table sharded over devices
// (runtime/sharded_keyed_table.h): hash bits 16-47 scaled to the count,
// dominated by bits 40-47, so that within a device shard the index shards
// (key_shard: bits 56-63 dominate) and the probe positions (the low bits)
// stay uniform.
VARSTATE_KEY_HD int64_t device_shard(uint64_t key, int64_t shards) {
  return static_cast<int64_t>(
      (((key_hash(key) >> 16) & 0xffffffffull) * static_cast<uint64_t>(shards)) >> 32);
}

// key_shard from the key's hash, for callers that probe with it too.
VARSTATE_KEY_HD int64_t hash_shard(uint64_t hash, int64_t shards) {
  return static_cast<int64_t>(((hash >> 32) * static_cast<uint64_t>(shards)) >> 32);
}

}  // namespace varstate::kernels
