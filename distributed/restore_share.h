// One task's share of DistributedSaver::restore, in the two steps that let
// every task agree before any variable changes: read (every check of
// Saver::restore, every tensor read into a fresh buffer and its checksum
// verified, nothing assigned), then assign.
//
// Each task reads only the slices of the variables it holds, straight from
// the stored pieces that overlap them, whatever partitioning and task count
// wrote the checkpoint (N tasks or parts restore into M): no task gathers
// the whole table. A slice of whole rows (axis-0 partitioning, the usual
// case) is read straight into its buffer, the rest of each overlapping
// piece only checksummed through an 8 MiB buffer: peak extra memory is the
// task's own variables' bytes plus that buffer. Other layouts go through
// CheckpointReader::read_slice (plus one stored piece at a time).
#pragma once

#include <string>
#include <vector>

#include "varstate/saver.h"
#include "varstate/tensor.h"

namespace varstate {
class FileSystem;
}

namespace varstate::internal {

// The values of `items` from checkpoint `save_path` (in order). Throws what
// Saver::restore would (ValueError for no checkpoint, NotFoundError for a
// missing key or shard, DataLossError for a checksum, InvalidArgumentError
// for a dtype or shape); changes nothing.
std::vector<Tensor> read_restore_share(const std::vector<Saver::Item>& items,
                                       const std::string& save_path, FileSystem* fs);

// Assigns values[i] to items[i]'s variable, under its update lock.
void assign_restore_share(const std::vector<Saver::Item>& items, const std::vector<Tensor>& values);

}  // namespace varstate::internal
