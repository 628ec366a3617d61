#include "distributed/restore_share.h"

#include <mutex>
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
  // A slice: cut from the stored pieces that overlap it, one at a time.
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
