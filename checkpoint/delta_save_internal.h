// What an incremental save writes for each variable (Saver, with
// SaveOptions::incremental): the plan made from the variables' dirty rows
// (runtime/dirty_rows_internal.h) and the writer of the row entries
// (varstate/checkpoint_chain.h names them). Internal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_chain_internal.h"
#include "checkpoint/saver_io_internal.h"
#include "runtime/dirty_rows_internal.h"
#include "varstate/saver.h"

namespace varstate::internal {

// How one saver item goes into a delta.
struct ItemDelta {
  bool whole = true;          // as a full save writes it
  std::vector<int64_t> rows;  // else the changed rows of its buffer, ascending
};

// The plan of a delta: one entry per saver item, and the chain record.
struct DeltaPlan {
  std::vector<ItemDelta> items;
  std::vector<ChainRecordLink> links;  // base first, the parent last
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

// Writes the row entries of `item`: its delta.rows as ids (in the full
// tensor's coordinates) and `rows`, the values of those rows (gathered,
// on any device).
void write_item_rows(BundleWriter& writer, const Saver::Item& item, const ItemDelta& delta,
                     const Tensor& rows, StagingBuffers& staging);

}  // namespace varstate::internal
