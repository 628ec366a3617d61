// What every table sharded by key shares (ShardedKeyedTable over devices,
// runtime/sharded_keyed_table.h; RemoteKeyedTable over cluster tasks,
// distributed/mpi_keyed_table.h): the split of a call's keys by shard and
// the merge of the shards' exports and changes in ascending key order.
// Runtime-internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
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

// The shards' complete changes merged: the written keys' export (as
// merge_exports) and the erased keys, ascending. `complete` and
// `generation` are left to the caller.
KeyedTable::Changes merge_changes(std::vector<KeyedTable::Changes>& parts, size_t members,
                                  bool tracking);

}  // namespace varstate::internal
