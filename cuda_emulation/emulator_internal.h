// The emulated GPUs' state: configuration, devices, streams, events, device
// memory. Internal to cuda_emulation/; the CUDA runtime API functions
// (runtime_api.cc) are thin wrappers over it.
//
// Streams. Each stream has a worker thread that runs its tasks in order,
// asynchronously to the host. A task may wait for a point of another stream
// (an event, or the legacy default stream's implicit synchronization with
// the blocking streams of its device). With VARSTATE_EMULATED_GPU_SCHEDULE=lazy
// a stream runs a task only once something needs it done: a host
// synchronization, an event query, a blocking copy, or a task of another
// stream that waits for it. Every schedule lazy mode produces is one a GPU
// may produce, so work the host reads without a synchronization, or a
// stream that uses another's result without an event wait, gives a wrong
// result deterministically instead of by chance.
//
// Device memory. Each allocation is its own mapping followed by an
// inaccessible guard page, filled with kUninitializedByte. While no device
// work of any emulated device is queued or running, every live allocation is
// mapped inaccessible,
// so a host dereference of a device pointer faults (AddressSanitizer
// reports it as a SEGV with its stack). Under AddressSanitizer the bytes
// between an allocation's end and its guard page are poisoned, so a kernel
// that reads or writes past its buffer is reported; without it they hold a
// canary that is checked when the allocation is freed. A freed allocation
// is unmapped when its stream reaches the free.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace varstate::cuda_emulation {

struct Config {
  int devices = 2;                         // VARSTATE_EMULATED_GPUS
  bool lazy = false;                       // VARSTATE_EMULATED_GPU_SCHEDULE=lazy
  size_t memory = size_t{4} << 30;         // VARSTATE_EMULATED_GPU_MEMORY (bytes)
  int multiprocessors = 4;                 // VARSTATE_EMULATED_GPU_SMS
  unsigned block_threads = 2;              // VARSTATE_EMULATED_GPU_THREADS: host threads
                                           // running blocks (default: the cores, at least 2)
  int arch = VARSTATE_EMULATED_CUDA_ARCH;  // e.g. 900
};
const Config& config();

// What the host asked of the emulated GPUs, for a program's host-side cost
// model without a GPU (VARSTATE_EMULATED_GPU_STATS=1 prints it to stderr at
// exit; tests read stats()): kernel launches (cuBLAS calls included), copies by direction with
// their bytes (host-to-device ones from pageable memory also counted apart:
// the runtime stages them), memsets, host waits (calls that return only
// once device work has finished: synchronizes, blocking copies and memsets,
// copies into pageable host memory, cudaFree), allocations and frees.
struct Stats {
  std::atomic<uint64_t> launches{0}, h2d{0}, h2d_bytes{0}, h2d_pageable{0}, d2h{0}, d2h_bytes{0},
      d2d{0}, d2d_bytes{0}, memsets{0}, host_waits{0}, allocations{0}, frees{0};
};
// The process's counts (always kept: an atomic add per call).
Stats& stats();
inline void count(std::atomic<uint64_t> Stats::*field, uint64_t n = 1) {
  (stats().*field).fetch_add(n, std::memory_order_relaxed);
}

class Stream;

// A point in a stream: done when its task `seq` (1-based) has completed.
struct StreamPoint {
  Stream* stream = nullptr;
  uint64_t seq = 0;
};

struct Task {
  std::function<void()> fn;
  std::vector<StreamPoint> waits;
  bool device_work = true;  // runs with device memory accessible
};

class Stream {
 public:
  Stream(int device, unsigned flags, bool legacy_default);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Tasks a stream holds before an enqueue blocks: a GPU blocks a host that
  // runs ahead by about a thousand launches; the slower emulated device
  // blocks it sooner, so that a host waiting for its work waits seconds, not
  // minutes.
  static constexpr uint64_t kMaxQueued = 64;

  int device() const { return device_; }
  bool blocking() const { return (flags_ & cudaStreamNonBlocking) == 0; }
  bool legacy_default() const { return legacy_default_; }

  // Appends a task; returns its point.
  StreamPoint enqueue(Task task);
  // The point of the last task enqueued so far (seq 0 when none).
  StreamPoint last();
  // Lets the worker run up to `seq` (lazy mode; eager streams run all).
  void demand(uint64_t seq);
  // Host waits until task `seq` has completed.
  void wait(uint64_t seq);
  bool done(uint64_t seq);
  // No more tasks; once the queued ones have run, the worker's thread
  // returns to the pool of stream workers (streams.cc).
  void close();

 private:
  void run();

  const int device_;
  const unsigned flags_;
  const bool legacy_default_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<Task> queue_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  uint64_t released_ = 0;
  bool closed_ = false;
};

struct Event {
  int device = 0;
  StreamPoint point;  // seq 0: never recorded, or recorded on an empty stream
};

// Returns the stream `handle` names (0 and cudaStreamLegacy: the current
// device's legacy default stream), or null if it names no live stream.
Stream* find_stream(cudaStream_t handle);
cudaStream_t create_stream(int device, unsigned flags);
bool destroy_stream(cudaStream_t handle);
// Enqueues on `stream` with the legacy default stream's implicit
// synchronization added.
StreamPoint enqueue_ordered(Stream* stream, Task task);
// Waits for every stream of `device`.
void synchronize_device(int device);

int current_device();
void set_current_device(int device);
bool valid_device(int device);

// The device's sticky error (cudaSuccess until a kernel faults).
cudaError_t sticky_error(int device);
void set_sticky_error(int device, cudaError_t error, const std::string& why);
cudaError_t take_last_error();
cudaError_t peek_last_error();

// Device memory. allocate returns null when the device's memory is used up.
void* allocate_device(int device, size_t bytes);
// False if `p` is not the start of a live allocation (or is being freed).
bool begin_free(void* p);
void finish_free(void* p);
// The device that owns live device address `p`, or -1.
int device_of(const void* p);
// Bytes of device memory in use on `device`.
size_t device_memory_used(int device);

// Pinned host memory (cudaHostAlloc).
void* allocate_pinned(size_t bytes);
bool free_pinned(void* p);
bool is_pinned_range(const void* p, size_t bytes);

// Bracket device work from its enqueue to its completion: while any is
// queued or running, device memory is accessible (one change of protection
// per burst of work, not per task).
void begin_device_work();
void end_device_work();

}  // namespace varstate::cuda_emulation
