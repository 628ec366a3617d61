// DeviceManager: the devices of this process, found at first use — CPU:0
// and every CUDA GPU the driver reports. In a CUDA build on a machine with no
// driver or no GPU it reports zero GPUs (and everything runs on the CPU).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "varstate/device.h"

namespace varstate {

class DeviceManager {
 public:
  // The process-wide manager. Thread-safe; devices live until exit.
  static DeviceManager& instance();

  Device& cpu() const { return *devices_.front(); }
  int num_gpus() const { return static_cast<int>(devices_.size()) - 1; }
  // Throws InvalidArgumentError when `index` is not in [0, num_gpus()).
  Device& gpu(int index) const;
  // CPU first, then GPU:0, GPU:1, ...
  std::vector<Device*> devices() const;

  // The device a fully specified spec names (type + index; a missing index
  // means 0), or nullptr if this process has no such device. Job, replica and
  // task are not looked at: all devices are local.
  Device* find(const DeviceSpec& spec) const;

  // "/device:CPU:0, /device:GPU:0" — for error messages.
  std::string device_list() const;

  // Whether GPU `dst` can read GPU `src`'s memory directly (peer access).
  bool peer_access(int dst, int src) const;

 private:
  DeviceManager();
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<std::vector<bool>> peer_;
};

}  // namespace varstate
