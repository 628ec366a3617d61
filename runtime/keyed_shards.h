// What every table sharded by key shares (ShardedKeyedTable over devices,
// runtime/sharded_keyed_table.h; RemoteKeyedTable over cluster tasks,
// distributed/mpi_keyed_table.h): the split of a call's keys by shard and
// the merge of the shards' exports and changes in ascending key order.
// Runtime-internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/keyed_table.h"

namespace varstate::internal {

// A call's keys split over `count` shards by kernels::device_shard, each
// shard's in the call's order (a repeated key stays in one shard, so
// duplicates keep their meaning), with their positions in the call.
struct KeySplit {
  std::vector<std::vector<int64_t>> keys;
  std::vector<std::vector<int64_t>> positions;
};
KeySplit split_keys(std::span<const int64_t> keys, int64_t count);

// The shards' exports (each ascending; a key is in one shard) merged in
// ascending key order: keys, `members` tensors of rows and, when
// `tracking`, versions and counts.
KeyedTable::Export merge_exports(std::vector<KeyedTable::Export>& parts, size_t members,
                                 bool tracking);

// The shards' changes of one take joined: complete when `complete` (the
// caller's generation was the last take's) and every shard's is; then the
// written keys' export merged (as merge_exports) and the erased keys,
// ascending. `generation`: the take's.
KeyedTable::Changes join_changes(std::vector<KeyedTable::Changes>& parts, bool complete,
                                 uint64_t generation, size_t members, bool tracking);

// A cap over several shards: a table of `shards` shards (`kind`: "shards",
// "tasks") holding `live` keys, `fresh` of a call's keys new. The number of
// keys to evict before the call (<= 0: none); ResourceExhaustedError
// naming `table`, the cap and the counts, nothing changed, when the keys
// do not fit because the policy does not evict.
int64_t keys_over_cap(const std::string& table, const KeyedPolicy& policy, int64_t live,
                      int64_t fresh, size_t shards, const char* kind);
// The `over` keys to evict among the shards' candidates ((metric, key)
// per shard, as DeviceKeyedTable::eviction_candidates gives them): the
// least recently (or frequently) updated, ties by the smaller key, by
// shard. ResourceExhaustedError (as keys_over_cap's) when there are fewer.
std::vector<std::vector<int64_t>> pick_victims(
    const std::string& table, const KeyedPolicy& policy, int64_t live, int64_t fresh,
    const char* kind, const std::vector<std::vector<std::pair<int64_t, int64_t>>>& candidates,
    int64_t over);

}  // namespace varstate::internal
