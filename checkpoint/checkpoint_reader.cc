#include "varstate/checkpoint_reader.h"

#include "checkpoint/checkpoint_chain.h"
#include "checkpoint/file_system.h"
#include "checkpoint/tensor_bundle.h"
#include "checkpoint/v1_reader.h"
#include "varstate/error.h"

namespace varstate {
namespace {

TensorData allocate(DType dtype, std::vector<int64_t> shape) {
  TensorData t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  const auto n = static_cast<size_t>(t.num_elements());
  if (dtype == DType::kString) {
    t.strings.resize(n);
  } else {
    t.bytes.resize(n * dtype_size(dtype));
  }
  return t;
}

int64_t volume(const TensorSlice& slice, std::span<const int64_t> full_shape) {
  return num_elements(slice.slice_shape(full_shape));
}

}  // namespace

TensorInfo CheckpointReader::info(std::string_view name) const {
  std::optional<TensorInfo> found = find(name);
  if (!found)
    throw NotFoundError("Key " + quoted(name) + " not found in checkpoint " + quoted(path_));
  return std::move(*found);
}

TensorData CheckpointReader::read(std::string_view name) const {
  TensorInfo ti = info(name);
  return read_slice(name, TensorSlice::full(static_cast<int>(ti.shape.size())));
}

TensorData CheckpointReader::read_slice(std::string_view name, const TensorSlice& slice) const {
  const TensorInfo ti = info(name);
  const std::string where = "reading " + quoted(name) + " from checkpoint " + quoted(path_);
  if (!dtype_is_valid(static_cast<int>(ti.dtype))) {
    throw UnimplementedError(where + ": unsupported dtype (enum " +
                             std::to_string(static_cast<int>(ti.dtype)) + ")");
  }
  std::vector<int64_t> want_shape;
  try {
    want_shape = slice.slice_shape(ti.shape);
  } catch (...) {
    rethrow_with_context(where);
  }
  const TensorSlice whole = TensorSlice::full(static_cast<int>(ti.shape.size()));

  if (ti.slices.empty()) {
    TensorData data = read_stored(ti, -1);
    if (slice.covers(ti.shape)) return data;
    TensorData out = allocate(ti.dtype, want_shape);
    copy_slice_region(data, whole, out, slice, slice, ti.shape);
    return out;
  }

  // A partitioned tensor: the saved slices must lie inside the tensor and
  // not overlap, so the overlaps' volumes add up to the request's exactly
  // when it is covered.
  for (size_t i = 0; i < ti.slices.size(); ++i) {
    try {
      ti.slices[i].slice_shape(ti.shape);
    } catch (const Error& e) {
      throw DataLossError(where + ": saved slice " + quoted(ti.slices[i].to_string()) +
                          " does not fit the tensor's shape " + shape_string(ti.shape));
    }
    for (size_t j = 0; j < i; ++j) {
      auto overlap = ti.slices[i].intersect(ti.slices[j], ti.shape);
      if (overlap && volume(*overlap, ti.shape) > 0) {
        throw DataLossError(where + ": saved slices " + quoted(ti.slices[j].to_string()) + " and " +
                            quoted(ti.slices[i].to_string()) + " overlap");
      }
    }
  }
  const int64_t want = num_elements(want_shape);
  int64_t covered = 0;
  std::vector<std::pair<size_t, TensorSlice>> pieces;
  for (size_t i = 0; i < ti.slices.size(); ++i) {
    auto overlap = ti.slices[i].intersect(slice, ti.shape);
    if (!overlap) continue;
    int64_t v = volume(*overlap, ti.shape);
    if (v == 0) continue;
    covered += v;
    pieces.emplace_back(i, std::move(*overlap));
  }
  if (covered != want) {
    throw NotFoundError("Does not have sufficient slices for partitioned tensor " + quoted(name) +
                        " in checkpoint " + quoted(path_) + " to read slice " +
                        quoted(shape_and_slice_string(ti.shape, slice)) + " (" +
                        std::to_string(covered) + " of " + std::to_string(want) +
                        " elements saved)");
  }
  for (const auto& piece : pieces) check_stored(ti, static_cast<int>(piece.first));
  TensorData out = allocate(ti.dtype, want_shape);
  for (const auto& [i, region] : pieces) {
    TensorData piece = read_stored(ti, static_cast<int>(i));
    copy_slice_region(piece, ti.slices[i], out, slice, region, ti.shape);
  }
  return out;
}

std::unique_ptr<CheckpointReader> open_checkpoint(const std::string& path, FileSystem* fs) {
  FileSystem& files = fs ? *fs : *default_file_system();
  if (files.file_exists(bundle_index_filename(path))) {
    auto bundle = std::make_unique<BundleReader>(path, &files);
    // A delta of an incremental checkpoint reads through its chain.
    if (!bundle->contains(kChainKey)) return bundle;
    return std::make_unique<ChainReader>(open_chain(std::move(bundle), files));
  }
  std::vector<std::string> matches = match_files(files, path);
  if (matches.empty()) {
    throw NotFoundError(
        "Unsuccessful TensorSliceReader constructor: Failed to find any matching files for " +
        path + " (no V2 index " + quoted(bundle_index_filename(path)) + " either)");
  }
  return std::make_unique<V1Reader>(path, &files);
}

}  // namespace varstate
