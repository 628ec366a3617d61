// Checkpoint-internal: how Saver plans a restore (saver.cc runs the plan).
// The checkpoint is opened by open_for_restore (RestoreShare's too), every
// variable is checked against it before any data is read (plan_restore),
// and the reads are grouped per device in file order (plan_read_groups).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "varstate/checkpoint_reader.h"
#include "varstate/saver.h"
#include "varstate/tensor_shape.h"
#include "varstate/tensor_slice.h"

namespace varstate {
class FileSystem;
}  // namespace varstate

namespace varstate::internal {

// The checkpoint at `save_path` (open_checkpoint; `fs` defaults to
// default_file_system()). Throws ValueError "The passed save_path is not a
// valid checkpoint" when neither an index nor V1 files are there; an index
// without its data shards opens, and reading names the missing shard.
std::unique_ptr<CheckpointReader> open_for_restore(const std::string& save_path, FileSystem* fs);

// One variable's restore, checked.
struct RestoreStep {
  const Saver::Item* item;
  std::optional<TensorSlice> region;  // for a partition
  TensorShape shape;                  // the variable's shape
  // Where the stored tensor lies (TensorInfo's shard and offset; -1 when it
  // is stored as slices or the format does not say), and its byte count.
  int shard = -1;
  int64_t offset = -1;
  int64_t bytes = 0;
};

// Checks one variable against the checkpoint without reading data.
RestoreStep plan_restore(const Saver::Item& item, const CheckpointReader& reader, bool reshape);

// The reads of `steps` as groups of step indices, each group read by one
// thread: per device, in the order the tensors lie in the data files, so
// that each reader moves forward through a file and the kernel's readahead
// keeps the disk busy. Host variables (unless `restore_sequentially`) are
// split over a few reader threads, each taking one contiguous run of that
// order with about the same number of bytes: one thread checksums while the
// other waits for the disk, and neither seeks across the other's part of
// the file.
std::vector<std::vector<size_t>> plan_read_groups(const std::vector<RestoreStep>& steps,
                                                  bool restore_sequentially);

}  // namespace varstate::internal
