#include "device/device.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"
#include "device/cpu_device_internal.h"
#include "device/device_manager.h"

namespace varstate {

Device::Device(DeviceType type, int index)
    : type_(type),
      index_(index),
      name_(std::string("/device:") + (type == DeviceType::kGPU ? "GPU:" : "CPU:") +
            std::to_string(index)) {}

namespace {

constexpr size_t kCpuAlignment = 64;

class CompletedEvent final : public Event {
 public:
  void wait_host() const override {}
  bool done() const override { return true; }
};

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(pos + 2);
    }
  }
  return "CPU";
}

class CpuDevice final : public Device {
 public:
  CpuDevice() : Device(DeviceType::kCPU, 0), model_(cpu_model_name()) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    memory_ = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
  }
  std::string model() const override { return model_; }
  size_t total_memory() const override { return memory_; }

  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    size_t rounded = (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* p = std::aligned_alloc(kCpuAlignment, rounded);
    if (p == nullptr) {
      throw ResourceExhaustedError("out of memory on " + name() + " allocating " +
                                   std::to_string(bytes) + " bytes");
    }
    return p;
  }
  void deallocate(void* ptr) noexcept override { std::free(ptr); }
  void synchronize() override {}
  std::shared_ptr<Event> record_event() override { return std::make_shared<CompletedEvent>(); }
  void wait_event(const Event& event) override { event.wait_host(); }
  void memset(void* ptr, int value, size_t bytes) override {
    if (bytes) std::memset(ptr, value, bytes);
  }
  void copy_from_host_async(void* dst, const void* host_src, size_t bytes) override {
    detail::host_memcpy(dst, host_src, bytes);
  }
  void copy_to_host_async(void* host_dst, const void* src, size_t bytes) override {
    detail::host_memcpy(host_dst, src, bytes);
  }

 private:
  std::string model_;
  size_t memory_;
};

}  // namespace

namespace detail {

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

void host_memcpy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kParallelThreshold = size_t{8} << 20;
  unsigned threads = std::thread::hardware_concurrency();
  if (bytes < kParallelThreshold || threads < 2) {
    if (bytes) std::memcpy(dst, src, bytes);
    return;
  }
  threads = std::min(threads, 8u);
  size_t chunk = (bytes / threads + 63) / 64 * 64;
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) {
    size_t begin = t * chunk;
    if (begin >= bytes) break;
    size_t len = std::min(chunk, bytes - begin);
    pool.emplace_back([=] {
      std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, len);
    });
  }
  std::memcpy(dst, src, std::min(chunk, bytes));
  for (auto& th : pool) th.join();
}

}  // namespace detail

void copy_bytes(Device& dst_device, void* dst, Device& src_device, const void* src,
                size_t bytes) {
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

PinnedBuffer::PinnedBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
#ifdef VARSTATE_HAVE_CUDA
  if (DeviceManager::instance().num_gpus() > 0) {
    data_ = detail::cuda_host_alloc(bytes);
    pinned_ = data_ != nullptr;
  }
#endif
  if (data_ == nullptr) {
    data_ = std::aligned_alloc(kCpuAlignment, (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment);
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
