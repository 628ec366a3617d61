#include "varstate/device_manager.h"

#include "base/logging.h"
#include "device/cpu_device.h"
#include "varstate/error.h"
#ifdef VARSTATE_HAVE_CUDA
#include "device/cuda_device.h"
#endif

namespace varstate {

DeviceManager& DeviceManager::instance() {
  static DeviceManager* manager = new DeviceManager();  // lives until exit
  return *manager;
}

DeviceManager::DeviceManager() {
  devices_.push_back(detail::make_cpu_device());
#ifdef VARSTATE_HAVE_CUDA
  int count = detail::cuda_device_count();
  for (int i = 0; i < count; ++i) devices_.push_back(detail::make_cuda_device(i));
  peer_ = detail::cuda_enable_peer_access(count);
#endif
  logger().debug("found {} device(s): {}", devices_.size(), device_list());
}

Device& DeviceManager::gpu(int index) const {
  if (index < 0 || index >= num_gpus()) {
    throw InvalidArgumentError("no device /device:GPU:" + std::to_string(index) +
                               "; available devices: " + device_list());
  }
  return *devices_[index + 1];
}

std::vector<Device*> DeviceManager::devices() const {
  std::vector<Device*> out;
  for (auto& d : devices_) out.push_back(d.get());
  return out;
}

Device* DeviceManager::find(const DeviceSpec& spec) const {
  if (!spec.device_type) return nullptr;
  int index = spec.device_index.value_or(0);
  if (*spec.device_type == "CPU") return index == 0 ? devices_.front().get() : nullptr;
  if (*spec.device_type == "GPU") return index < num_gpus() ? devices_[index + 1].get() : nullptr;
  return nullptr;
}

std::string DeviceManager::device_list() const {
  std::string out;
  for (auto& d : devices_) {
    if (!out.empty()) out += ", ";
    out += d->name();
  }
  return out;
}

bool DeviceManager::peer_access(int dst, int src) const {
  if (dst == src) return true;
  if (dst < 0 || src < 0 || dst >= num_gpus() || src >= num_gpus()) return false;
  return peer_[dst][src];
}

}  // namespace varstate
