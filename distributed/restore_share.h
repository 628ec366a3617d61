// One task's share of DistributedSaver::restore, in the two steps that let
// every task agree before any variable changes: read (every check of
// Saver::restore, every tensor read into a fresh buffer and its checksum
// verified, nothing assigned), then assign.
//
// Each task reads only the slices of the variables it holds, straight from
// the stored pieces that overlap them, whatever partitioning and task count
// wrote the checkpoint (N tasks or parts restore into M): no task gathers
// the whole table. Peak extra memory: the task's own variables' bytes, plus
// one stored piece while a slice is cut from it.
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
