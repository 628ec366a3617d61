// Writing TensorFlow V1 checkpoints: the single-file SavedTensorSlices
// tables tf.train.Saver(write_version=SaverDef.V1) writes (TensorFlow's
// SaveSlices op), which every TensorFlow version restores.
//
// A V1 file is a LevelDB-format table (checkpoint/table_internal.h). The
// empty key holds the metadata (each tensor's name, full shape, dtype and
// the slices saved of it); each saved slice is stored under the ordered-code
// key of (name, slice) as a TensorProto with the values in its typed
// repeated field (float_val, int_val, half_val, ...), which is what
// TensorFlow's V1 reader reads. TensorFlow's V1 format has no bfloat16,
// uint32 or uint64 (its SaveSlices rejects them), so neither does this.
//
//   V1Writer writer("ckpt/model");            // one file, "ckpt/model"
//   writer.add("w", view_of_w);
//   writer.add_slice("emb", {10, 4}, TensorSlice({{0, 5}, {0, -1}}), view_of_part0);
//   writer.finish();                          // written atomically
//
// Not thread-safe; the tensors' bytes are copied when added.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "varstate/tensor_data.h"
#include "varstate/tensor_slice.h"

namespace varstate {

class FileSystem;

class V1Writer {
 public:
  // `path` is the file written by finish(). `fs` defaults to
  // default_file_system().
  explicit V1Writer(std::string path, FileSystem* fs = nullptr);

  // Adds a whole tensor. Throws InvalidArgumentError naming the tensor for an
  // empty name, a second tensor of that name or an inconsistent view, and
  // UnimplementedError for a dtype V1 cannot hold (bfloat16, uint32, uint64).
  void add(std::string_view name, const TensorView& tensor);
  // Adds the slice `slice` of the tensor `name` of shape `full_shape`;
  // `tensor` holds the slice's values. Slices of one name must agree on
  // dtype and full shape and not repeat. Throws as add(), and
  // InvalidArgumentError when the slice does not fit the shape.
  void add_slice(std::string_view name, const std::vector<int64_t>& full_shape,
                 const TensorSlice& slice, const TensorView& tensor);

  // Writes the table (temporary file, sync, rename). Throws the file layer's
  // errors; FailedPreconditionError when called twice.
  void finish();

 private:
  struct Meta {
    DType dtype = DType::kInvalid;
    std::vector<int64_t> shape;
    std::vector<TensorSlice> slices;
  };
  std::string path_;
  FileSystem* fs_;
  bool finished_ = false;
  std::map<std::string, Meta> meta_;            // by tensor name
  std::map<std::string, std::string> records_;  // ordered-code key -> SavedTensorSlices
};

// Whether TensorFlow's V1 format can hold `dtype`.
bool v1_supports_dtype(DType dtype);

}  // namespace varstate
