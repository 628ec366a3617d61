// What an incremental save writes for each variable (the save pipeline's
// delta plan, checkpoint/save_pipeline.h): the variables' changed rows,
// taken from their dirty rows (runtime/dirty_rows.h) or, for a
// variable another task holds, from its owner's marks; the plan made from
// them; and the writer of the row entries (varstate/checkpoint_chain.h
// names them). Internal.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_chain.h"
#include "checkpoint/checkpoint_writer.h"
#include "runtime/dirty_rows.h"
#include "varstate/saver.h"
#include "varstate/tensor.h"

namespace varstate::internal {

// How one saver item goes into a delta.
struct ItemDelta {
  bool whole = true;          // as a full save writes it
  std::vector<int64_t> rows;  // else the changed rows of its buffer, ascending
};

class KeyedExports;

// The plan of a delta: one entry per saver item (a dynamic variable's
// items: whole, unused), the dynamic variables' changes, and the chain
// record.
struct DeltaPlan {
  std::vector<ItemDelta> items;
  std::shared_ptr<const KeyedExports> keyed;  // null when none is written
  std::vector<ChainRecordLink> links;         // base first, the parent last
};

// Rows, unless every row is dirty or the item is one a delta writes whole:
// a scalar, a string tensor, a variable held by another task (unless
// `owner_marks`: `taken` then holds the rows its owner's storage marked,
// RemoteStorage::take_marked_rows), a partition cut along another axis than
// 0, one under kSmallBytes, or one with more than half its rows changed.
inline constexpr int64_t kSmallBytes = 16 << 10;
ItemDelta plan_item_delta(const Saver::Item& item, const TensorShape& shape, DirtyRows::Taken taken,
                          bool owner_marks = false);

// The bytes the item takes in the delta, and in a full save.
int64_t delta_bytes(const Saver::Item& item, const TensorShape& shape, const ItemDelta& delta);
int64_t full_bytes(const Saver::Item& item, const TensorShape& shape);

// Turns on this process's row marks of every cluster-held variable among
// `items` (RemoteStorage::start_marking; local variables always mark).
void start_marking(const std::vector<Saver::Item>& items);

// The rows of each of `items` changed since the previous take, clearing
// the marks, and in `shapes` each one's shape as of its take (a dynamic
// variable's items: all, their changes being their table's): with
// `owner_marks`, a variable held by the cluster from its owner's storage
// (this task owns it); every other from its dirty rows (`generations[i]`
// is its last take's generation, updated here).
std::vector<DirtyRows::Taken> take_changed_rows(const std::vector<Saver::Item>& items,
                                                bool owner_marks,
                                                std::vector<uint64_t>& generations,
                                                std::vector<TensorShape>& shapes);

// A copy of the item's value, or with `delta` of its rows delta->rows, on
// the variable's device (the host for one held by another task), taken
// under the variable's update lock.
Tensor copy_value(const Saver::Item& item, const ItemDelta* delta);

// Writes the row entries of `item`: its delta.rows as ids (in the full
// tensor's coordinates) and `rows`, the values of those rows (gathered,
// on any device).
void write_item_rows(CheckpointWriter::Shard& shard, const Saver::Item& item,
                     const ItemDelta& delta, const Tensor& rows);

}  // namespace varstate::internal
