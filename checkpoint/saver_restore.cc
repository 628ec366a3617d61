#include "checkpoint/saver_restore_internal.h"

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "checkpoint/file_system.h"
#include "checkpoint/saver_io_internal.h"
#include "checkpoint/tensor_bundle.h"
#include "varstate/checkpoint_state.h"
#include "varstate/device.h"
#include "varstate/error.h"

namespace varstate::internal {
namespace {

// Whether the saved slices of `info` cover `region` (they never overlap in
// a valid checkpoint; the reader checks that when reading).
bool slices_cover(const TensorInfo& info, const TensorSlice& region) {
  if (info.slices.empty()) return true;
  auto volume = [&](const TensorSlice& s) { return num_elements(s.slice_shape(info.shape)); };
  int64_t covered = 0;
  for (const TensorSlice& saved : info.slices) {
    if (auto overlap = saved.intersect(region, info.shape)) covered += volume(*overlap);
  }
  return covered == volume(region);
}

}  // namespace

std::unique_ptr<CheckpointReader> open_for_restore(const std::string& save_path, FileSystem* fs) {
  FileSystem& files = fs ? *fs : *default_file_system();
  // An index without its data shards goes on to the reader, whose
  // NotFoundError names the missing shard.
  if (!files.file_exists(bundle_index_filename(save_path)) &&
      !checkpoint_exists(save_path, &files)) {
    throw ValueError("The passed save_path is not a valid checkpoint: " + save_path);
  }
  return open_checkpoint(save_path, &files);
}

// Checks one variable against the checkpoint without reading data.
RestoreStep plan_restore(const Saver::Item& item, const CheckpointReader& reader, bool reshape) {
  const Variable& var = item.variable;
  const std::string where =
      "restoring " + quoted(var.op_name()) + " from checkpoint " + quoted(reader.path());
  std::optional<TensorInfo> info = reader.find(item.key);
  if (!info) {
    throw NotFoundError("Key " + quoted(item.key) + " not found in checkpoint " +
                        quoted(reader.path()) + " (restoring variable " + quoted(var.op_name()) +
                        ")");
  }
  if (info->dtype != var.dtype()) {
    throw InvalidArgumentError(where + ": key " + quoted(item.key) + " holds dtype " +
                               std::string(dtype_name(info->dtype)) + ", the variable has dtype " +
                               std::string(dtype_name(var.dtype())));
  }
  RestoreStep step{&item, std::nullopt, var.shape(), info->shard, info->offset, 0};
  step.bytes = step.shape.num_elements() *
               static_cast<int64_t>(std::max<size_t>(dtype_size(var.dtype()), 1));
  const std::vector<int64_t>& var_dims = step.shape.dims();
  if (item.slice) {
    if (info->shape != item.slice->full_shape) {
      throw InvalidArgumentError(where + ": the partitioned tensor " + quoted(item.key) +
                                 " has full shape " + shape_string(info->shape) +
                                 " in the checkpoint, the variable's partitioning "
                                 "expects " +
                                 shape_string(item.slice->full_shape));
    }
    step.region = slice_of(*item.slice);
    std::vector<int64_t> region_shape;
    try {
      region_shape = step.region->slice_shape(info->shape);
    } catch (...) {
      rethrow_with_context(where);
    }
    if (region_shape != var_dims) {
      throw InvalidArgumentError(where + ": its slice " + shape_string(region_shape) +
                                 " does not match the variable's shape " + shape_string(var_dims));
    }
  } else if (info->shape != var_dims) {
    if (!reshape || num_elements(info->shape) != num_elements(var_dims)) {
      throw InvalidArgumentError(
          where + ": Assign requires shapes of both tensors to match. variable shape " +
          shape_string(var_dims) + ", checkpoint shape " + shape_string(info->shape) +
          (reshape ? " (reshape needs the same number of elements)" : ""));
    }
  }
  const TensorSlice wanted =
      step.region ? *step.region : TensorSlice::full(static_cast<int>(info->shape.size()));
  if (!slices_cover(*info, wanted)) {
    throw NotFoundError("Does not have sufficient slices for partitioned tensor " +
                        quoted(item.key) + " in checkpoint " + quoted(reader.path()) +
                        " to restore " + quoted(var.op_name()) + " (slice " +
                        quoted(shape_and_slice_string(info->shape, wanted)) + ")");
  }
  return step;
}

std::vector<std::vector<size_t>> plan_read_groups(const std::vector<RestoreStep>& steps,
                                                  bool restore_sequentially) {
  std::map<const Device*, std::vector<size_t>> by_device;
  for (size_t i = 0; i < steps.size(); ++i)
    by_device[&steps[i].item->variable.device()].push_back(i);
  std::vector<std::vector<size_t>> groups;
  const size_t host_threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 4);
  for (auto& [device, which] : by_device) {
    std::stable_sort(which.begin(), which.end(), [&](size_t a, size_t b) {
      const RestoreStep& x = steps[a];
      const RestoreStep& y = steps[b];
      // Tensors without a file location (slices, V1) go last, as listed.
      return std::make_tuple(x.shard < 0, x.shard, x.offset) <
             std::make_tuple(y.shard < 0, y.shard, y.offset);
    });
    const size_t num_parts =
        device->is_cpu() && !restore_sequentially ? std::min(host_threads, which.size()) : 1;
    int64_t total = 0;
    for (size_t i : which) total += steps[i].bytes;
    std::vector<size_t> part;
    int64_t done = 0;
    size_t closed = 0;
    for (size_t i : which) {
      part.push_back(i);
      done += steps[i].bytes;
      // Part k ends once the parts so far hold (k + 1) / num_parts of the bytes.
      if (closed + 1 < num_parts &&
          done * static_cast<int64_t>(num_parts) >= total * static_cast<int64_t>(closed + 1)) {
        groups.push_back(std::move(part));
        part.clear();
        ++closed;
      }
    }
    if (!part.empty()) groups.push_back(std::move(part));
  }
  return groups;
}

}  // namespace varstate::internal
