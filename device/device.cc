// Device, copies between devices, the device guard and staging buffers;
// the CPU device is in cpu_device.cc, the CUDA device in cuda_device.cc.
#include "varstate/device.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "device/cpu_device.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#ifdef VARSTATE_HAVE_CUDA
#include "base/cuda_check.h"
#include "device/cuda_device.h"
#endif

namespace varstate {

Device::Device(DeviceType type, int index)
    : type_(type),
      index_(index),
      name_(std::string("/device:") + (type == DeviceType::kGPU ? "GPU:" : "CPU:") +
            std::to_string(index)) {}

namespace {

constexpr size_t kCpuAlignment = 64;

}  // namespace

void copy_bytes(Device& dst_device, void* dst, Device& src_device, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    detail::host_memcpy(dst, src, bytes);
    return;
  }
#ifdef VARSTATE_HAVE_CUDA
  detail::cuda_copy(dst_device, dst, src_device, src, bytes);
#else
  throw InternalError("copy from " + src_device.name() + " to " + dst_device.name() +
                      ": this build has no CUDA support");
#endif
}

DeviceGuard::DeviceGuard(const Device& device) {
#ifdef VARSTATE_HAVE_CUDA
  if (device.is_gpu()) previous_ = detail::cuda_exchange_device(device.index());
#endif
}

DeviceGuard::~DeviceGuard() {
#ifdef VARSTATE_HAVE_CUDA
  if (previous_ >= 0) {
    try {
      detail::cuda_exchange_device(previous_);
    } catch (...) {
      // Restoring can only fail if the driver is gone; nothing to do then.
    }
  }
#endif
}

PinnedBuffer::PinnedBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
#ifdef VARSTATE_HAVE_CUDA
  if (DeviceManager::instance().num_gpus() > 0) {
    data_ = detail::cuda_host_alloc(bytes);
    pinned_ = data_ != nullptr;
  }
#endif
  if (data_ == nullptr) {
    data_ = std::aligned_alloc(kCpuAlignment,
                               (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment);
    if (data_ == nullptr) {
      throw ResourceExhaustedError("out of host memory allocating a " + std::to_string(bytes) +
                                   "-byte staging buffer");
    }
  }
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ == nullptr) return;
#ifdef VARSTATE_HAVE_CUDA
  if (pinned_) {
    detail::cuda_host_free(data_);
    return;
  }
#endif
  std::free(data_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      pinned_(std::exchange(other.pinned_, false)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    PinnedBuffer tmp(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    pinned_ = std::exchange(other.pinned_, false);
  }
  return *this;
}

}  // namespace varstate
