#include "distributed/restore_share.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <span>

#include "checkpoint/file_system.h"
#include "checkpoint/saver_io_internal.h"
#include "checkpoint/saver_restore_internal.h"
#include "checkpoint/tensor_bundle.h"
#include "runtime/variable_internal.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/checkpoint_state.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

namespace varstate::internal {
namespace {

// Whether `slice` holds whole rows of a tensor of `shape`: every dimension
// but the first in full.
bool whole_rows(const TensorSlice& slice, const std::vector<int64_t>& shape) {
  for (int d = 1; d < static_cast<int>(shape.size()); ++d) {
    if (slice.start_at(d) != 0 || slice.length_at(d, shape) != shape[static_cast<size_t>(d)]) {
      return false;
    }
  }
  return !shape.empty();
}

// A slice of whole rows cut from pieces of whole rows (a partitioned
// variable saved in any number of parts): each overlapping piece's rows read
// straight into the slice's buffer, the rest of the piece only checksummed
// through a fixed buffer. Nothing when the layout is another (the caller
// then reads through read_slice, which also reports gaps and overlaps).
std::optional<Tensor> read_row_slice(const RestoreStep& step, const BundleReader& bundle) {
  const Saver::Item& item = *step.item;
  const TensorInfo info = bundle.info(item.key);
  const TensorSlice& region = *step.region;
  if (info.dtype != item.variable.dtype() || info.dtype == DType::kString ||
      !whole_rows(region, info.shape)) {
    return std::nullopt;
  }
  const int64_t r0 = region.start_at(0), r1 = r0 + region.length_at(0, info.shape);
  struct Piece {
    int index;
    int64_t begin, end;  // the rows of the region it holds
    int64_t start;       // its first row
  };
  std::vector<Piece> pieces;
  int64_t covered = 0;
  for (size_t i = 0; i < info.slices.size(); ++i) {
    const TensorSlice& s = info.slices[i];
    if (!whole_rows(s, info.shape)) return std::nullopt;
    const int64_t s0 = s.start_at(0), s1 = s0 + s.length_at(0, info.shape);
    const int64_t lo = std::max(s0, r0), hi = std::min(s1, r1);
    if (lo >= hi) continue;
    pieces.push_back({static_cast<int>(i), lo, hi, s0});
    covered += hi - lo;
  }
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  for (size_t k = 1; k < pieces.size(); ++k) {
    if (pieces[k].begin < pieces[k - 1].end) return std::nullopt;  // overlapping pieces
  }
  if (covered != r1 - r0) return std::nullopt;
  Tensor host(item.variable.dtype(), step.shape, DeviceManager::instance().cpu());
  const int64_t row_bytes = r1 > r0 ? static_cast<int64_t>(host.nbytes()) / (r1 - r0) : 0;
  auto* base = static_cast<std::byte*>(host.raw_data());
  for (const Piece& p : pieces) {
    std::span<std::byte> dst(base + (p.begin - r0) * row_bytes,
                             static_cast<size_t>((p.end - p.begin) * row_bytes));
    bundle.read_slice_range_into(info, p.index,
                                 static_cast<uint64_t>((p.begin - p.start) * row_bytes), dst);
  }
  return host;
}

// One checked step's value, on its variable's device.
Tensor read_value(const RestoreStep& step, const CheckpointReader& reader) {
  const Saver::Item& item = *step.item;
  Device& device = item.variable.device();
  // A V2 tensor stored whole: read straight into a host buffer.
  if (!step.region && item.variable.dtype() != DType::kString) {
    if (const auto* bundle = dynamic_cast<const BundleReader*>(&reader)) {
      Tensor host(item.variable.dtype(), step.shape, DeviceManager::instance().cpu());
      std::span<std::byte> dst(static_cast<std::byte*>(host.raw_data()), host.nbytes());
      if (bundle->read_into(item.key, dst)) return device.is_cpu() ? host : host.to(device);
    }
  }
  if (step.region) {
    if (const auto* bundle = dynamic_cast<const BundleReader*>(&reader)) {
      if (std::optional<Tensor> rows = read_row_slice(step, *bundle)) {
        return item.variable.device().is_cpu() ? *rows : rows->to(device);
      }
    }
  }
  // Another slice: cut from the stored pieces that overlap it, one at a time.
  TensorData data = step.region ? reader.read_slice(item.key, *step.region) : reader.read(item.key);
  return tensor_from_data(data, step.shape, device);
}

}  // namespace

std::vector<Tensor> read_restore_share(const std::vector<Saver::Item>& items,
                                       const std::string& save_path, FileSystem* fs) {
  if (items.empty()) return {};
  if (!fs->file_exists(bundle_index_filename(save_path)) && !checkpoint_exists(save_path, fs)) {
    throw ValueError("The passed save_path is not a valid checkpoint: " + save_path);
  }
  const std::unique_ptr<CheckpointReader> reader = open_checkpoint(save_path, fs);
  // Every key, dtype and shape checked before any data is read.
  std::vector<RestoreStep> steps;
  steps.reserve(items.size());
  for (const Saver::Item& item : items) {
    steps.push_back(plan_restore(item, *reader, /*reshape=*/false));
  }
  std::vector<Tensor> values;
  values.reserve(steps.size());
  for (const RestoreStep& step : steps) values.push_back(read_value(step, *reader));
  return values;
}

void assign_restore_share(const std::vector<Saver::Item>& items,
                          const std::vector<Tensor>& values) {
  for (size_t i = 0; i < items.size(); ++i) {
    std::lock_guard lock(update_mutex(items[i].variable));
    Variable variable = items[i].variable;
    set_value(variable, values[i]);
  }
}

}  // namespace varstate::internal
