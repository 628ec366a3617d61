// Attributes of a CUDA device that kernel launchers consult on every call,
// read from the driver once per device and cached.
#pragma once

namespace varstate::kernels::cuda {

struct DeviceInfo {
  int multiprocessors = 1;
  int compute_capability_major = 0;
};

// The calling thread's current CUDA device's attributes. The first call per
// device queries the driver (throws InternalError if that fails); later
// calls only read the cache. Thread-safe.
const DeviceInfo& current_device_info();

}  // namespace varstate::kernels::cuda
