#include "kernels/cuda/device_info.h"

#include <cuda_runtime.h>

#include <array>
#include <mutex>
#include <string>

#include "base/cuda_check.h"
#include "varstate/error.h"

namespace varstate::kernels::cuda {
namespace {

constexpr int kMaxDevices = 64;

struct Cache {
  std::array<std::once_flag, kMaxDevices> once;
  std::array<DeviceInfo, kMaxDevices> info;
};

}  // namespace

const DeviceInfo& current_device_info() {
  static Cache cache;
  int device = 0;
  VARSTATE_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= kMaxDevices) {
    throw InternalError("CUDA device " + std::to_string(device) + " is past the " +
                        std::to_string(kMaxDevices) + " devices varstate supports");
  }
  std::call_once(cache.once[device], [&] {
    DeviceInfo& info = cache.info[device];
    VARSTATE_CUDA_CHECK(
        cudaDeviceGetAttribute(&info.multiprocessors, cudaDevAttrMultiProcessorCount, device));
    VARSTATE_CUDA_CHECK(cudaDeviceGetAttribute(&info.compute_capability_major,
                                               cudaDevAttrComputeCapabilityMajor, device));
  });
  return cache.info[device];
}

}  // namespace varstate::kernels::cuda
