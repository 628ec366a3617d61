// Reading TensorFlow's legacy V1 checkpoints ("SavedTensorSlices").
//
// A V1 checkpoint is one LevelDB-format table per device shard: the file
// "<prefix>" (unsharded) or "<prefix>-0000i-of-0000n", named together by the
// pattern "<prefix>-?????-of-0000n". Its empty key holds the metadata (each
// tensor's name, dtype, shape and saved slices) and every other key, built
// by TensorFlow's slice-key encoding, one slice's values as a TensorProto.
// Read-only: varstate writes V2 only.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "varstate/checkpoint_reader.h"

namespace varstate {

class TableReader;

class V1Reader : public CheckpointReader {
 public:
  // Opens every file matching `pattern` (a file name or a '?'/'*' pattern).
  // Throws NotFoundError when nothing matches, DataLossError for a corrupt
  // table or metadata, InvalidArgumentError for an unsupported version or
  // conflicting metadata across files.
  explicit V1Reader(std::string pattern, FileSystem* fs = nullptr);
  ~V1Reader() override;

  std::vector<TensorInfo> list() const override;
  std::optional<TensorInfo> find(std::string_view name) const override;

 protected:
  TensorData read_stored(const TensorInfo& info, int slice_index) const override;
  void check_stored(const TensorInfo& info, int slice_index) const override;

 private:
  struct Tensor {
    TensorInfo info;
    // A tensor stored whole: its one record's slice and file.
    TensorSlice whole_slice;
    int whole_file = -1;
    // A partitioned tensor: the file holding each of info.slices.
    std::vector<int> slice_file;
  };

  std::string record(const std::string& name, const TensorSlice& slice, int file) const;
  TensorData read_record(const std::string& name, const TensorSlice& slice, int file, DType dtype,
                         const std::vector<int64_t>& shape) const;

  std::vector<std::unique_ptr<TableReader>> tables_;
  std::map<std::string, Tensor, std::less<>> tensors_;
};

}  // namespace varstate
