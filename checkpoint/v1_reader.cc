#include "checkpoint/v1_reader.h"

#include <cstring>

#include "checkpoint/file_system.h"
#include "checkpoint/ordered_code_internal.h"
#include "checkpoint/proto_convert_internal.h"
#include "checkpoint/table_internal.h"
#include "proto/saved_tensor_slices.pb.h"
#include "varstate/error.h"

namespace varstate {
V1Reader::V1Reader(std::string pattern, FileSystem* fs) : CheckpointReader(std::move(pattern)) {
  FileSystem& files = fs ? *fs : *default_file_system();
  std::vector<std::string> paths = match_files(files, path());
  if (paths.empty()) {
    throw NotFoundError(
        "Unsuccessful TensorSliceReader constructor: Failed to find any matching files for " +
        path());
  }
  for (size_t f = 0; f < paths.size(); ++f) {
    const int file = static_cast<int>(f);
    tables_.push_back(std::make_unique<TableReader>(files, paths[f]));
    const std::string where = "reading V1 checkpoint " + quoted(paths[f]);
    std::optional<std::string> meta_value = tables_.back()->get("");
    tf::SavedTensorSlices record;
    if (!meta_value || !record.ParseFromString(*meta_value) || !record.has_meta()) {
      throw DataLossError(where + ": no parseable metadata under the empty key");
    }
    check_checkpoint_version(record.meta().versions(), where);
    for (const tf::SavedSliceMeta& meta : record.meta().tensor()) {
      const std::string what = where + ", tensor " + quoted(meta.name());
      std::vector<int64_t> shape = shape_from_proto(meta.shape(), what);
      auto [it, inserted] = tensors_.try_emplace(meta.name());
      Tensor& t = it->second;
      if (inserted) {
        t.info.name = meta.name();
        t.info.dtype = static_cast<DType>(meta.type());
        t.info.shape = shape;
      } else if (t.info.dtype != static_cast<DType>(meta.type()) || t.info.shape != shape) {
        throw InvalidArgumentError(what + ": dtype " + std::to_string(meta.type()) + " and shape " +
                                   shape_string(shape) + " differ from another file's (dtype " +
                                   std::to_string(static_cast<int>(t.info.dtype)) + ", shape " +
                                   shape_string(t.info.shape) + ")");
      }
      for (const auto& s : meta.slice()) {
        TensorSlice slice = slice_from_proto(s, what);
        if (slice.rank() != static_cast<int>(shape.size())) {
          throw DataLossError(what + ": slice " + quoted(slice.to_string()) +
                              " does not match shape " + shape_string(shape));
        }
        t.info.slices.push_back(std::move(slice));
        t.slice_file.push_back(file);
      }
    }
  }
  // A tensor saved as one slice covering it is a tensor stored whole.
  for (auto& [name, t] : tensors_) {
    if (t.info.slices.size() == 1 && t.info.slices[0].covers(t.info.shape)) {
      t.whole_slice = t.info.slices[0];
      t.whole_file = t.slice_file[0];
      t.info.slices.clear();
      t.slice_file.clear();
      t.info.shard = t.whole_file;
    } else if (t.info.slices.empty()) {
      throw DataLossError("reading V1 checkpoint " + quoted(path()) + ": tensor " + quoted(name) +
                          " has no saved slices");
    }
  }
}

V1Reader::~V1Reader() = default;

std::vector<TensorInfo> V1Reader::list() const {
  std::vector<TensorInfo> out;
  for (const auto& [name, t] : tensors_) out.push_back(t.info);
  return out;
}

std::optional<TensorInfo> V1Reader::find(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return std::nullopt;
  return it->second.info;
}

TensorData V1Reader::read_stored(const TensorInfo& info, int slice_index) const {
  const Tensor& t = tensors_.find(info.name)->second;
  if (slice_index < 0)
    return read_record(info.name, t.whole_slice, t.whole_file, info.dtype, info.shape);
  const TensorSlice& slice = info.slices[static_cast<size_t>(slice_index)];
  return read_record(info.name, slice, t.slice_file[static_cast<size_t>(slice_index)], info.dtype,
                     slice.slice_shape(info.shape));
}

std::string V1Reader::record(const std::string& name, const TensorSlice& slice, int file) const {
  const TableReader& table = *tables_[static_cast<size_t>(file)];
  std::optional<std::string> value = table.get(encode_tensor_name_slice(name, slice));
  if (!value) {
    throw DataLossError("reading " + quoted(name) + " (slice " + quoted(slice.to_string()) +
                        ") from " + quoted(table.path()) + ": the slice's record is missing");
  }
  return std::move(*value);
}

void V1Reader::check_stored(const TensorInfo& info, int slice_index) const {
  const Tensor& t = tensors_.find(info.name)->second;
  const TensorSlice& slice =
      slice_index < 0 ? t.whole_slice : info.slices[static_cast<size_t>(slice_index)];
  const int file = slice_index < 0 ? t.whole_file : t.slice_file[static_cast<size_t>(slice_index)];
  // Every encoding spends at least one byte per element.
  const int64_t n = num_elements(slice.slice_shape(info.shape));
  const size_t size = record(info.name, slice, file).size();
  if (static_cast<uint64_t>(n) > size) {
    throw DataLossError("reading " + quoted(info.name) + " (slice " + quoted(slice.to_string()) +
                        ") from " + quoted(tables_[static_cast<size_t>(file)]->path()) + ": a " +
                        std::to_string(size) + "-byte record cannot hold " + std::to_string(n) +
                        " elements");
  }
}

TensorData V1Reader::read_record(const std::string& name, const TensorSlice& slice, int file,
                                 DType dtype, const std::vector<int64_t>& shape) const {
  const TableReader& table = *tables_[static_cast<size_t>(file)];
  const std::string where = "reading " + quoted(name) + " (slice " + quoted(slice.to_string()) +
                            ") from " + quoted(table.path());
  std::string value = record(name, slice, file);
  tf::SavedTensorSlices saved;
  if (!saved.ParseFromString(value) || !saved.has_data()) {
    throw DataLossError(where + ": record not parseable");
  }
  if (saved.data().name() != name) {
    throw DataLossError(where + ": record names tensor " + quoted(saved.data().name()));
  }
  TensorData out;
  out.dtype = dtype;
  out.shape = shape;
  values_from_proto(saved.data().data(), static_cast<size_t>(out.num_elements()), out, where);
  return out;
}

}  // namespace varstate
