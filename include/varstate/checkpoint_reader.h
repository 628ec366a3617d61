// Reading checkpoints, whatever their format.
//
// CheckpointReader lists the tensors of a checkpoint and reads them, whole or
// any box of them. A partitioned tensor saved as slices reads like any other:
// the requested region is assembled from whichever saved slices cover it.
// open_checkpoint() picks the format: a TensorFlow V2 bundle when
// "<path>.index" exists (BundleReader), else a V1 table file or file pattern
// (V1Reader).
//
// Readers are immutable once open; all methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "varstate/dtype.h"
#include "varstate/tensor_data.h"
#include "varstate/tensor_slice.h"

namespace varstate {

class FileSystem;

// What a checkpoint holds for one tensor.
struct TensorInfo {
  std::string name;
  // The element type as stored (TensorFlow's enum value; may be one varstate
  // cannot read, e.g. DT_VARIANT).
  DType dtype = DType::kInvalid;
  std::vector<int64_t> shape;  // the full shape
  // The saved slices of a partitioned tensor; empty when stored whole.
  std::vector<TensorSlice> slices;
  // Where a tensor stored whole lives: the data shard (V2) or table file (V1)
  // index, and for V2 its byte offset and size in that shard. -1 when not
  // applicable.
  int shard = -1;
  int64_t offset = -1;
  int64_t size = -1;
};

class CheckpointReader {
 public:
  virtual ~CheckpointReader() = default;

  // The checkpoint prefix or file this reader was opened on.
  const std::string& path() const { return path_; }

  // Every tensor, sorted by name (slices of a partitioned tensor are listed
  // once, under the tensor's name).
  virtual std::vector<TensorInfo> list() const = 0;
  // The tensor `name`, if present.
  virtual std::optional<TensorInfo> find(std::string_view name) const = 0;

  bool contains(std::string_view name) const { return find(name).has_value(); }
  // Throws NotFoundError naming the key and the checkpoint.
  TensorInfo info(std::string_view name) const;

  // The whole tensor. Throws NotFoundError for a missing key, DataLossError
  // for corrupt or truncated data (naming file and tensor), NotFoundError for
  // a missing data file, UnimplementedError for a dtype varstate cannot hold,
  // NotFoundError when a partitioned tensor's saved slices do not cover it.
  TensorData read(std::string_view name) const;
  // The box `slice` of the tensor (whose rank must match), with the slice's
  // shape. Throws as read(), and InvalidArgumentError for a slice outside the
  // tensor.
  TensorData read_slice(std::string_view name, const TensorSlice& slice) const;

 protected:
  explicit CheckpointReader(std::string path) : path_(std::move(path)) {}

  // Reads one stored piece of `info`: the tensor stored whole when
  // slice_index is -1, else its saved slice info.slices[slice_index]. The
  // result has the piece's shape.
  virtual TensorData read_stored(const TensorInfo& info, int slice_index) const = 0;
  // Checks, without reading it, that the piece read_stored would read is
  // plausible (present, consistent, within its file), so that no buffer is
  // sized from a corrupt shape. Throws as read_stored.
  virtual void check_stored(const TensorInfo& info, int slice_index) const = 0;

 private:
  std::string path_;
};

// Opens the checkpoint at `path`: a V2 prefix ("<path>.index" exists), or a
// V1 file or sharded-file pattern ("model-?????-of-00002"). Throws
// NotFoundError when nothing matches, DataLossError for a corrupt index.
// `fs` defaults to default_file_system().
std::unique_ptr<CheckpointReader> open_checkpoint(const std::string& path,
                                                  FileSystem* fs = nullptr);

}  // namespace varstate
