// A device that holds tensors and runs kernels: the CPU or one CUDA GPU.
//
// Each GPU has one stream; every kernel, copy, allocation and free for that
// GPU is enqueued on it, so work on one device is ordered without
// synchronization. Work for different devices is ordered with events
// (record_event / wait_event), never with device-wide syncs. The CPU device
// runs work synchronously on the calling thread; its events are complete when
// recorded.
//
// Devices are created by DeviceManager and live until the process exits.
// All methods are thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "varstate/device_spec.h"

// The CUDA runtime's stream handle, declared as cuda_runtime_api.h does so
// that this header needs no CUDA include.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace varstate {

enum class DeviceType {
  kCPU,
  kGPU
};

// A point in a device's stream. Obtained from Device::record_event().
class Event {
 public:
  virtual ~Event() = default;
  // Blocks the calling thread until the work before the event has finished.
  virtual void wait_host() const = 0;
  // True once the work before the event has finished.
  virtual bool done() const = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  DeviceType type() const { return type_; }
  int index() const { return index_; }
  bool is_gpu() const { return type_ == DeviceType::kGPU; }
  bool is_cpu() const { return type_ == DeviceType::kCPU; }
  // "/device:CPU:0", "/device:GPU:1".
  const std::string& name() const { return name_; }
  DeviceSpec spec() const { return DeviceSpec::of(is_gpu() ? "GPU" : "CPU", index_); }

  // "NVIDIA H100 80GB HBM3" or the CPU's model name.
  virtual std::string model() const = 0;
  // Bytes of device memory (GPU) or physical memory (CPU).
  virtual size_t total_memory() const = 0;
  // major * 10 + minor for a GPU (90 for Hopper); 0 for the CPU.
  virtual int compute_capability() const { return 0; }
  // True for a GPU emulated on the CPU (a VARSTATE_CUDA=EMULATE build,
  // docs/gpu.md): it runs the CUDA kernels for correctness; its timings
  // are the CPU's, never a GPU's.
  virtual bool emulated() const { return false; }

  // Allocates `bytes` aligned to at least 64 (CPU) or 256 (GPU) bytes. GPU
  // memory comes from a stream-ordered pool and is usable by work enqueued on
  // this device's stream after the call. Returns nullptr for 0 bytes. Throws
  // ResourceExhaustedError naming the device and the size when out of memory.
  virtual void* allocate(size_t bytes) = 0;
  // Frees memory from allocate(). Stream-ordered on a GPU: the memory is
  // reused only after the work already enqueued has finished.
  virtual void deallocate(void* ptr) noexcept = 0;
  // Grows memory from allocate() to `bytes` without copying it, where the
  // device can: its first bytes keep their values, the rest is
  // uninitialized. Returns the (possibly new) address, the old one then
  // invalid; or nullptr, the memory as it was, where it cannot (the CPU
  // remaps its blocks of 2 MiB and more; a GPU never). The caller must be
  // the memory's only user meanwhile.
  virtual void* grow(void* ptr, size_t bytes) noexcept {
    (void)ptr;
    (void)bytes;
    return nullptr;
  }

  // The device's stream (nullptr for the CPU).
  virtual cudaStream_t stream() const { return nullptr; }
  // Blocks until all work enqueued on this device has finished.
  virtual void synchronize() = 0;
  // Marks the current end of this device's stream.
  virtual std::shared_ptr<Event> record_event() = 0;
  // Makes work enqueued on this device after the call wait for `event`
  // (which may come from another device). The CPU waits on the host.
  virtual void wait_event(const Event& event) = 0;

  // Sets `bytes` bytes at `ptr` (memory of this device) to `value`, in stream order.
  virtual void memset(void* ptr, int value, size_t bytes) = 0;

  // Stream-ordered transfers between this device's memory and host memory
  // that stays valid (and, for a GPU, is best pinned: PinnedBuffer) until an
  // event recorded after the call has completed. For staging pipelines that
  // overlap transfers with other work; the CPU device copies synchronously.
  virtual void copy_from_host_async(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host_async(void* host_dst, const void* src, size_t bytes) = 0;

 protected:
  Device(DeviceType type, int index);

 private:
  DeviceType type_;
  int index_;
  std::string name_;
};

// Makes a GPU the calling thread's current CUDA device for the guard's
// lifetime and restores the previous one after (nothing for the CPU).
// Kernel launchers and library handles bind to the current device, so
// runtime/ dispatch holds one around every launch on a device's stream.
class DeviceGuard {
 public:
  explicit DeviceGuard(const Device& device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Copies `bytes` bytes from `src` on `src_device` to `dst` on `dst_device`,
// ordered after the work already enqueued on both devices.
//  - CPU -> CPU: synchronous memcpy.
//  - CPU -> GPU: staged through pinned buffers; returns once `src` has been
//    read (it may be freed), the transfer completing in the GPU's stream order.
//  - GPU -> CPU: returns once the bytes are in `dst`.
//  - GPU -> GPU: asynchronous, peer-to-peer where the GPUs allow it; the
//    destination device's later work is ordered after the copy.
// Throws InternalError naming both devices if a CUDA call fails.
void copy_bytes(Device& dst_device, void* dst, Device& src_device, const void* src, size_t bytes);

// Page-locked host memory for staging transfers (plain aligned host memory in
// a build or on a machine without CUDA). Move-only.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  void* data() const { return data_; }
  size_t size() const { return size_; }
  bool pinned() const { return pinned_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  bool pinned_ = false;
};

}  // namespace varstate
