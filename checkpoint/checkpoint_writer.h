// Writing checkpoints, whatever their format: the mirror of CheckpointReader
// (varstate/checkpoint_reader.h). Internal: the save pipeline
// (checkpoint/save_pipeline.h) writes every checkpoint through it.
//
// A CheckpointWriter is one checkpoint at a prefix, written as num_shards
// shards: each shard is begun (begin_shard), filled with tensors (whole, as
// slices of a partitioned tensor, or straight from a variable's buffer on
// any device) and finished; once every shard is finished, commit() makes
// them the checkpoint. Shards may be written by different threads, or by
// different processes that each built a writer with the same options (a
// DistributedSaver's tasks), one of which commits.
//
//   auto writer = make_checkpoint_writer(CheckpointFormatVersion::kV2, "ckpt/model-7",
//                                        {.num_shards = 2, .sharded = true});
//   auto shard = writer->begin_shard(0);
//   shard->add_tensor("w", std::nullopt, w.ref());
//   shard->finish();                          // ... shard 1 likewise, then
//   writer->commit();                         // the index: the checkpoint exists
//
// make_checkpoint_writer() picks the format, as open_checkpoint() does for
// reading: TensorFlow's V2 bundle (BundleWriter; a sharded save's bundles
// go under a temporary prefix and commit() merges them into the checkpoint)
// or V1 table files (V1Writer; each shard is a file of the checkpoint, and
// commit() has nothing left to do). A new format is one reader class, one
// writer class and a line in each factory.
//
// Durability is the format's: every file is written under a temporary name,
// synced and renamed; a V2 index appears only after the data it describes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "varstate/dtype.h"
#include "varstate/saver.h"
#include "varstate/tensor.h"
#include "varstate/tensor_data.h"
#include "varstate/tensor_slice.h"
#include "varstate/variable.h"

namespace varstate {

class FileSystem;

struct CheckpointWriterOptions {
  FileSystem* file_system = nullptr;  // default_file_system() when null
  // Shards 0 .. num_shards - 1. A V2 checkpoint of 0 shards is an empty
  // bundle (commit() writes it).
  int num_shards = 1;
  // Each shard in its own file: V1 "<prefix>-0000k-of-0000n"; V2 bundles
  // under `temp_prefix` that commit() merges. Otherwise one shard, written
  // in place at the prefix.
  bool sharded = false;
  // Where a sharded V2 save's bundles go ("<dir>/part", temp_prefix_for);
  // every process writing shards of one checkpoint passes the same. Empty:
  // a fresh one.
  std::string temp_prefix;
  // Bytes of each of a shard's two pinned buffers staging GPU tensors.
  size_t staging_buffer_bytes = size_t{64} << 20;
};

class CheckpointWriter {
 public:
  // One shard of the checkpoint. Not thread-safe: one thread each.
  // Destroying an unfinished shard deletes its temporary files.
  class Shard {
   public:
    virtual ~Shard() = default;
    // Adds a whole tensor. Throws InvalidArgumentError naming the tensor for
    // an empty or repeated name or an inconsistent view, and the file
    // layer's errors.
    virtual void add(std::string_view name, const TensorView& tensor) = 0;
    // Adds slice `slice` (holding `tensor`, of the slice's shape) of the
    // tensor `full_name` of shape `full_shape`. Throws as add(), and
    // InvalidArgumentError when the slice does not fit `full_shape` or
    // repeats, or when dtype or full shape differ from earlier slices.
    virtual void add_slice(std::string_view full_name, const std::vector<int64_t>& full_shape,
                           const TensorSlice& slice, const TensorView& tensor) = 0;
    // Adds `value`, which may live on any device, under `name`: whole, or
    // as the slice a partition's `slice` names. Throws as add_slice().
    virtual void add_tensor(const std::string& name, const std::optional<SaveSliceInfo>& slice,
                            const Tensor& value) = 0;
    // Makes the shard durable. Throws the file layer's errors.
    virtual void finish() = 0;
  };

  virtual ~CheckpointWriter() = default;
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // The checkpoint prefix.
  const std::string& path() const { return path_; }
  int num_shards() const { return options_.num_shards; }

  // "V2", "V1": the format, as errors name it.
  virtual std::string_view format_name() const = 0;
  // Whether the format holds deltas of an incremental chain (a chain record
  // and row entries: varstate/checkpoint_chain.h).
  virtual bool writes_deltas() const = 0;
  // Throws UnimplementedError naming the variable `what` when the format
  // cannot hold `dtype`.
  virtual void check_dtype(const std::string& what, DType dtype) const;
  // The path the state file records: the prefix, or for sharded V1 files
  // their pattern ("model-?????-of-00002"), as TensorFlow records it.
  virtual std::string recorded_path() const { return path_; }
  // Every file the checkpoint consists of once committed (no meta graph).
  virtual std::vector<std::string> files() const = 0;
  // Whether shards are written where no reader looks until commit(), so
  // that they may be written in any order or at once; otherwise each is a
  // file of the checkpoint as soon as it is finished.
  virtual bool stages_shards() const = 0;

  // Begins shard `shard`. Thread-safe. Throws the file layer's errors.
  virtual std::unique_ptr<Shard> begin_shard(int shard) const = 0;
  // Once every shard is finished: makes them the checkpoint. Throws the
  // file layer's errors.
  virtual void commit() = 0;
  // After a failure: removes what the shards left where commit() would have
  // taken it from. Never throws.
  virtual void abandon() noexcept {}

 protected:
  CheckpointWriter(std::string path, CheckpointWriterOptions options);
  const CheckpointWriterOptions& options() const { return options_; }
  FileSystem& file_system() const { return *fs_; }

 private:
  std::string path_;
  CheckpointWriterOptions options_;
  FileSystem* fs_;
};

// A writer of the checkpoint `prefix` in `format` (V1 or V2). Writes
// nothing yet. Throws InvalidArgumentError for another format, or for
// more than one shard without `sharded`.
std::unique_ptr<CheckpointWriter> make_checkpoint_writer(CheckpointFormatVersion format,
                                                         const std::string& prefix,
                                                         CheckpointWriterOptions options = {});

}  // namespace varstate
