// The CUDA GPU device: one non-blocking stream, a stream-ordered memory pool,
// pinned staging buffers for host-to-device copies, and event-ordered copies
// between devices.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "base/cuda_check.h"
#include "base/logging.h"
#include "device/allocation_tail.h"
#include "device/cuda_device.h"
#include "varstate/device.h"
#include "varstate/error.h"

namespace varstate::detail {
namespace {

// A device's spare CUDA events. Recording a point in a stream is frequent
// (every checked scatter, gather and sparse training op records one), and
// creating an event is a driver call: events go back here when their
// CudaEvent ends, to be recorded again (re-recording a pending event is
// allowed; nothing else holds it). Shared by the device and its events, so
// that an event outliving the device still has somewhere to go.
class EventPool {
 public:
  explicit EventPool(int device) : device_(device) {}
  ~EventPool() {
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }
  int device() const { return device_; }
  cudaEvent_t take() {
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    cudaEvent_t e = nullptr;
    VARSTATE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void give_back(cudaEvent_t e) {
    std::lock_guard lock(mu_);
    if (free_.size() < kMaxSpare) {
      free_.push_back(e);
      return;
    }
    cudaEventDestroy(e);
  }

 private:
  static constexpr size_t kMaxSpare = 256;
  const int device_;
  std::mutex mu_;
  std::vector<cudaEvent_t> free_;
};

class CudaEvent final : public Event {
 public:
  CudaEvent(std::shared_ptr<EventPool> pool, cudaStream_t stream)
      : device_(pool->device()), pool_(std::move(pool)) {
    CudaDeviceGuard guard(device_);
    event_ = pool_->take();
    const cudaError_t err = cudaEventRecord(event_, stream);
    if (err != cudaSuccess) pool_->give_back(event_);
    VARSTATE_CUDA_CHECK(err);
  }
  ~CudaEvent() override { pool_->give_back(event_); }
  void wait_host() const override { VARSTATE_CUDA_CHECK(cudaEventSynchronize(event_)); }
  bool done() const override {
    cudaError_t err = cudaEventQuery(event_);
    if (err == cudaErrorNotReady) return false;
    VARSTATE_CUDA_CHECK(err);
    return true;
  }
  cudaEvent_t get() const { return event_; }

 private:
  int device_;
  std::shared_ptr<EventPool> pool_;
  cudaEvent_t event_ = nullptr;
};

// Host-to-device copies from pageable memory go through two pinned buffers
// of this size, so the host-side memcpy of one chunk overlaps the DMA of the
// previous one.
constexpr size_t kStagingChunk = size_t{8} << 20;
// Copies up to this size go through the small-copy ring instead.
constexpr size_t kRingCopyLimit = size_t{1} << 20;

// The pinned ring of a device's small host-to-device copies (indices, a
// batch's ids and positions: several a training step). A pageable source
// given to cudaMemcpyAsync is staged by the driver, which may first wait
// for the stream's earlier work; here the host copies the bytes into the
// ring and enqueues an asynchronous copy from there, so the call returns
// at once and the step never waits for the GPU. The regions in flight are
// a FIFO (one stream: they complete in order), each with the event that
// frees it; a region is reused only after its event, normally long done.
class SmallCopyRing {
 public:
  SmallCopyRing(std::shared_ptr<EventPool> events, size_t bytes)
      : events_(std::move(events)), buffer_(bytes) {}
  ~SmallCopyRing() {
    for (const InFlight& f : in_flight_) {
      cudaEventSynchronize(f.done);
      events_->give_back(f.done);
    }
  }
  SmallCopyRing(const SmallCopyRing&) = delete;
  SmallCopyRing& operator=(const SmallCopyRing&) = delete;

  // Whether the ring has page-locked memory (else copies go the plain way).
  bool usable() const { return buffer_.pinned(); }

  // dst <- src (`bytes` <= kRingCopyLimit, at most half the ring), on
  // `stream`; returns once `src` has been read. Caller holds the device's
  // ring mutex and its device current.
  void copy(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
    const size_t length = (bytes + kAlign - 1) / kAlign * kAlign;
    const size_t at = reserve(length);
    char* staged = static_cast<char*>(buffer_.data()) + at;
    std::memcpy(staged, src, bytes);
    VARSTATE_CUDA_CHECK(cudaMemcpyAsync(dst, staged, bytes, cudaMemcpyHostToDevice, stream));
    cudaEvent_t done = events_->take();
    const cudaError_t err = cudaEventRecord(done, stream);
    if (err != cudaSuccess) {
      // Nothing marks the region's end: wait for the copy itself.
      events_->give_back(done);
      VARSTATE_CUDA_CHECK(cudaStreamSynchronize(stream));
      VARSTATE_CUDA_CHECK(err);
    }
    in_flight_.push_back({at, at + length, done});
    head_ = at + length;
  }

 private:
  static constexpr size_t kAlign = 256;
  struct InFlight {
    size_t begin, end;
    cudaEvent_t done;
  };

  // Frees the oldest region in flight (waiting for its copy if needed).
  void retire_oldest() {
    const InFlight f = in_flight_.front();
    in_flight_.pop_front();
    const cudaError_t err = cudaEventSynchronize(f.done);
    events_->give_back(f.done);
    VARSTATE_CUDA_CHECK(err);
  }

  // Regions in flight overlapping [at, at + length).
  bool overlaps(size_t at, size_t length) const {
    for (const InFlight& f : in_flight_) {
      if (f.begin < at + length && at < f.end) return true;
    }
    return false;
  }

  // The offset of `length` free bytes: after the newest region, or at the
  // start once the end is reached, retiring what is still in their way.
  size_t reserve(size_t length) {
    // Regions whose copies are done cost nothing to retire.
    while (!in_flight_.empty()) {
      const cudaError_t err = cudaEventQuery(in_flight_.front().done);
      if (err == cudaErrorNotReady) break;
      VARSTATE_CUDA_CHECK(err);
      events_->give_back(in_flight_.front().done);
      in_flight_.pop_front();
    }
    if (in_flight_.empty()) head_ = 0;
    size_t at = head_ + length <= buffer_.size() ? head_ : 0;
    while (overlaps(at, length)) retire_oldest();
    return at;
  }

  std::shared_ptr<EventPool> events_;
  PinnedBuffer buffer_;
  std::deque<InFlight> in_flight_;  // oldest first
  size_t head_ = 0;                 // the end of the newest region
};

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int index) : Device(DeviceType::kGPU, index) {
    CudaDeviceGuard guard(index);
    cudaDeviceProp prop{};
    VARSTATE_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    model_ = prop.name;
    memory_ = prop.totalGlobalMem;
    cc_ = prop.major * 10 + prop.minor;
    VARSTATE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    cudaMemPool_t pool;
    VARSTATE_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, index));
    uint64_t keep = UINT64_MAX;  // keep freed memory in the pool
    VARSTATE_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  // Devices live until exit; the driver reclaims the stream.

  std::string model() const override { return model_; }
  size_t total_memory() const override { return memory_; }
  int compute_capability() const override { return cc_; }
#ifdef VARSTATE_CUDA_EMULATED
  bool emulated() const override { return true; }
#endif
  cudaStream_t stream() const override { return stream_; }

  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    // Refused before asking the driver: more than the device holds can
    // never be allocated.
    if (memory_ > 0 && bytes > memory_) {
      throw ResourceExhaustedError("out of memory on " + name() + " allocating " +
                                   std::to_string(bytes) + " bytes (more than its " +
                                   std::to_string(memory_) + " bytes of memory)");
    }
    CudaDeviceGuard guard(index());
    void* p = nullptr;
    // Padded and the padding zeroed: see device/allocation_tail.h.
    const size_t padded = padded_allocation_bytes(bytes);
    cudaError_t err =
        padded == 0 ? cudaErrorMemoryAllocation : cudaMallocAsync(&p, padded, stream_);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw ResourceExhaustedError("out of memory on " + name() + " allocating " +
                                   std::to_string(bytes) + " bytes");
    }
    VARSTATE_CUDA_CHECK(err);
    const AllocationTail tail = allocation_tail(bytes);
    if (tail.length > 0) {
      err = cudaMemsetAsync(static_cast<char*>(p) + tail.offset, 0, tail.length, stream_);
      if (err != cudaSuccess) {
        cudaFreeAsync(p, stream_);
        VARSTATE_CUDA_CHECK(err);
      }
    }
    return p;
  }

  void deallocate(void* ptr) noexcept override {
    if (ptr == nullptr) return;
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(index());
    cudaError_t err = cudaFreeAsync(ptr, stream_);
    if (err != cudaSuccess) {
      logger().error("cudaFreeAsync on {} failed: {}", name(), cudaGetErrorString(err));
      cudaGetLastError();
    }
    cudaSetDevice(previous);
  }

  void synchronize() override { VARSTATE_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  std::shared_ptr<Event> record_event() override {
    return std::make_shared<CudaEvent>(events_, stream_);
  }

  void wait_event(const Event& event) override {
    if (const auto* cuda_event = dynamic_cast<const CudaEvent*>(&event)) {
      VARSTATE_CUDA_CHECK(cudaStreamWaitEvent(stream_, cuda_event->get(), 0));
    } else {
      event.wait_host();
    }
  }

  void memset(void* ptr, int value, size_t bytes) override {
    if (bytes == 0) return;
    CudaDeviceGuard guard(index());
    VARSTATE_CUDA_CHECK(cudaMemsetAsync(ptr, value, bytes, stream_));
  }

  void copy_from_host_async(void* dst, const void* host_src, size_t bytes) override {
    if (bytes == 0) return;
    CudaDeviceGuard guard(index());
    VARSTATE_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  }

  void copy_to_host_async(void* host_dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    CudaDeviceGuard guard(index());
    VARSTATE_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  }

  // Host (pageable or pinned) -> this GPU. Returns once `src` has been read.
  void copy_from_host(void* dst, const void* src, size_t bytes) {
    CudaDeviceGuard guard(index());
    if (bytes <= kRingCopyLimit) {
      std::lock_guard lock(ring_mu_);
      if (!ring_) ring_ = std::make_unique<SmallCopyRing>(events_, kRingBytes);
      if (ring_->usable()) {
        ring_->copy(dst, src, bytes, stream_);
        return;
      }
    }
    cudaPointerAttributes attr{};
    VARSTATE_CUDA_CHECK(cudaPointerGetAttributes(&attr, src));
    if (attr.type == cudaMemoryTypeHost) {  // already pinned: DMA directly
      VARSTATE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
      VARSTATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
      return;
    }
    if (bytes <= kRingCopyLimit) {
      // Pageable (no pinned ring): the runtime returns once it has staged
      // the bytes itself.
      VARSTATE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
      return;
    }
    std::lock_guard lock(staging_mu_);
    ensure_staging();
    for (size_t offset = 0, k = 0; offset < bytes; offset += kStagingChunk, ++k) {
      size_t slot = k % staging_.size();
      size_t len = std::min(kStagingChunk, bytes - offset);
      VARSTATE_CUDA_CHECK(cudaEventSynchronize(staging_events_[slot]));
      std::memcpy(staging_[slot].data(), static_cast<const char*>(src) + offset, len);
      VARSTATE_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + offset, staging_[slot].data(),
                                          len, cudaMemcpyHostToDevice, stream_));
      VARSTATE_CUDA_CHECK(cudaEventRecord(staging_events_[slot], stream_));
    }
  }

  // This GPU -> host. Returns once the bytes are in `dst`.
  void copy_to_host(void* dst, const void* src, size_t bytes) {
    CudaDeviceGuard guard(index());
    VARSTATE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    VARSTATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  void ensure_staging() {
    if (staging_[0].data() != nullptr) return;
    for (size_t i = 0; i < staging_.size(); ++i) {
      staging_[i] = PinnedBuffer(kStagingChunk);
      VARSTATE_CUDA_CHECK(cudaEventCreateWithFlags(&staging_events_[i], cudaEventDisableTiming));
      VARSTATE_CUDA_CHECK(cudaEventRecord(staging_events_[i], stream_));
    }
  }

  std::shared_ptr<EventPool> events_ = std::make_shared<EventPool>(index());
  std::string model_;
  size_t memory_ = 0;
  int cc_ = 0;
  cudaStream_t stream_ = nullptr;
  std::mutex staging_mu_;
  std::array<PinnedBuffer, 2> staging_;
  std::array<cudaEvent_t, 2> staging_events_{};
  // The small copies' ring, made at the first one.
  static constexpr size_t kRingBytes = size_t{8} << 20;
  std::mutex ring_mu_;
  std::unique_ptr<SmallCopyRing> ring_;
};

}  // namespace

int cuda_device_count() noexcept {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    logger().debug("no CUDA GPU usable: {}", cudaGetErrorString(err));
    return 0;
  }
  return count;
}

std::unique_ptr<Device> make_cuda_device(int index) { return std::make_unique<CudaDevice>(index); }

std::vector<std::vector<bool>> cuda_enable_peer_access(int count) {
  std::vector<std::vector<bool>> can(count, std::vector<bool>(count, false));
  for (int dst = 0; dst < count; ++dst) {
    can[dst][dst] = true;
    for (int src = 0; src < count; ++src) {
      if (src == dst) continue;
      int ok = 0;
      if (cudaDeviceCanAccessPeer(&ok, dst, src) != cudaSuccess || !ok) continue;
      CudaDeviceGuard guard(dst);
      cudaError_t err = cudaDeviceEnablePeerAccess(src, 0);
      if (err == cudaSuccess || err == cudaErrorPeerAccessAlreadyEnabled) can[dst][src] = true;
      cudaGetLastError();
    }
  }
  return can;
}

void cuda_copy(Device& dst_device, void* dst, Device& src_device, const void* src, size_t bytes) {
  try {
    if (src_device.is_cpu()) {
      static_cast<CudaDevice&>(dst_device).copy_from_host(dst, src, bytes);
    } else if (dst_device.is_cpu()) {
      static_cast<CudaDevice&>(src_device).copy_to_host(dst, src, bytes);
    } else if (&dst_device == &src_device) {
      CudaDeviceGuard guard(dst_device.index());
      VARSTATE_CUDA_CHECK(
          cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, dst_device.stream()));
    } else {
      // Run the copy on the source's stream, after the destination's pending
      // work (dst's memory may have just been allocated in its stream order),
      // then make the destination's later work wait for it.
      src_device.wait_event(*dst_device.record_event());
      {
        CudaDeviceGuard guard(src_device.index());
        VARSTATE_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index(), src, src_device.index(),
                                                bytes, src_device.stream()));
      }
      dst_device.wait_event(*src_device.record_event());
    }
  } catch (...) {
    rethrow_with_context("copying " + std::to_string(bytes) + " bytes from " + src_device.name() +
                         " to " + dst_device.name());
  }
}

void* cuda_host_alloc(size_t bytes) noexcept {
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return p;
}

void cuda_host_free(void* ptr) noexcept { cudaFreeHost(ptr); }

}  // namespace varstate::detail
