// Emulated devices, streams, events and errors (cuda_emulation/emulator_internal.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <thread>

#include "cuda_emulation/device_work.h"
#include "cuda_emulation/emulator_internal.h"

namespace varstate::cuda_emulation {
namespace {

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < 0) {
    std::fprintf(stderr, "varstate: ignoring %s=%s (not a non-negative number)\n", name, v);
    return fallback;
  }
  return x;
}

Config read_config() {
  Config c;
  c.devices = static_cast<int>(env_long("VARSTATE_EMULATED_GPUS", c.devices));
  c.memory = static_cast<size_t>(env_long("VARSTATE_EMULATED_GPU_MEMORY", c.memory));
  c.multiprocessors =
      static_cast<int>(std::max(1L, env_long("VARSTATE_EMULATED_GPU_SMS", c.multiprocessors)));
  c.block_threads = static_cast<unsigned>(
      std::max(1L, env_long("VARSTATE_EMULATED_GPU_THREADS",
                            std::max(2L, static_cast<long>(std::thread::hardware_concurrency())))));
  const char* schedule = std::getenv("VARSTATE_EMULATED_GPU_SCHEDULE");
  c.lazy = schedule != nullptr && std::string(schedule) == "lazy";
  if (c.devices > 16) c.devices = 16;
  return c;
}

struct DeviceState {
  Stream* legacy = nullptr;
  std::vector<Stream*> streams;  // created, not yet destroyed
  cudaError_t sticky = cudaSuccess;
};

// Lives until exit (worker threads may still run at static destruction).
struct Registry {
  std::mutex mu;
  std::vector<DeviceState> devices;
  std::set<Stream*> live;
  // Destroyed streams: kept for the process's life, since work and events
  // queued before the destroy may still name them (and reachable, so leak
  // checkers do not report them).
  std::vector<Stream*> retired;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;
    reg->devices.resize(static_cast<size_t>(config().devices));
    return reg;
  }();
  return *r;
}

thread_local int current = 0;
thread_local cudaError_t last_error = cudaSuccess;

// The host threads that run streams' workers. A thread whose stream was
// destroyed and drained waits here for the next stream instead of exiting,
// keeping its fibers' stacks (kernel_launch.cc) for that stream's kernels:
// suites that create a stream per call spent a quarter of their time under
// AddressSanitizer starting threads, faulting in fresh fiber stacks and
// unmapping them at thread exit. Lives until exit, as the registry.
class WorkerPool {
 public:
  void run(std::function<void()> job) {
    std::lock_guard lock(mu_);
    if (idle_ > 0) {
      --idle_;
      jobs_.push_back(std::move(job));
      cv_.notify_one();
      return;
    }
    std::thread([this, first = std::move(job)]() mutable { serve(std::move(first)); }).detach();
  }

 private:
  void serve(std::function<void()> job) {
    for (;;) {
      // Each stream starts with a fresh thread's state.
      current = 0;
      last_error = cudaSuccess;
      job();
      job = nullptr;
      std::unique_lock lock(mu_);
      ++idle_;
      cv_.wait(lock, [&] { return !jobs_.empty(); });
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  size_t idle_ = 0;  // threads waiting, less the jobs queued for them
};

WorkerPool& workers() {
  static auto* pool = new WorkerPool;
  return *pool;
}

}  // namespace

const Config& config() {
  static const Config c = read_config();
  return c;
}

namespace {

void print_stats() {
  const Stats& st = stats();
  std::fprintf(stderr,
               "emulated GPU stats: %llu launches; host-to-device %llu copies (%llu bytes, %llu "
               "from pageable memory), device-to-host %llu (%llu bytes), device-to-device %llu "
               "(%llu bytes); %llu memsets; %llu host waits; %llu allocations, %llu frees\n",
               static_cast<unsigned long long>(st.launches.load()),
               static_cast<unsigned long long>(st.h2d.load()),
               static_cast<unsigned long long>(st.h2d_bytes.load()),
               static_cast<unsigned long long>(st.h2d_pageable.load()),
               static_cast<unsigned long long>(st.d2h.load()),
               static_cast<unsigned long long>(st.d2h_bytes.load()),
               static_cast<unsigned long long>(st.d2d.load()),
               static_cast<unsigned long long>(st.d2d_bytes.load()),
               static_cast<unsigned long long>(st.memsets.load()),
               static_cast<unsigned long long>(st.host_waits.load()),
               static_cast<unsigned long long>(st.allocations.load()),
               static_cast<unsigned long long>(st.frees.load()));
}

}  // namespace

Stats& stats() {
  static Stats* const s = [] {
    auto* st = new Stats;  // lives until exit: workers may count during static destruction
    const char* v = std::getenv("VARSTATE_EMULATED_GPU_STATS");
    if (v != nullptr && std::string(v) == "1") std::atexit(print_stats);
    return st;
  }();
  return *s;
}

// ---------------------------------------------------------------------------
// Stream

Stream::Stream(int device, unsigned flags, bool legacy_default)
    : device_(device), flags_(flags), legacy_default_(legacy_default) {
  workers().run([this] { run(); });
}

StreamPoint Stream::enqueue(Task task) {
  if (task.device_work) begin_device_work();
  std::unique_lock lock(mu_);
  // A full launch queue blocks the host, as on a GPU: a host that enqueues
  // faster than the device runs (the emulated device is slow) would
  // otherwise queue without bound, and its stream-ordered frees with it.
  if (enqueued_ - completed_ >= kMaxQueued) {
    released_ = std::max(released_, enqueued_ - kMaxQueued / 2);  // lazy: run the oldest
    work_cv_.notify_one();
    done_cv_.wait(lock, [&] { return enqueued_ - completed_ < kMaxQueued; });
  }
  queue_.push_back(std::move(task));
  ++enqueued_;
  if (!config().lazy) released_ = enqueued_;
  work_cv_.notify_one();
  return {this, enqueued_};
}

StreamPoint Stream::last() {
  std::lock_guard lock(mu_);
  return {this, enqueued_};
}

void Stream::demand(uint64_t seq) {
  std::lock_guard lock(mu_);
  if (seq > released_) {
    released_ = std::min(seq, enqueued_);
    work_cv_.notify_one();
  }
}

void Stream::wait(uint64_t seq) {
  demand(seq);
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [&] { return completed_ >= seq; });
}

bool Stream::done(uint64_t seq) {
  demand(seq);
  std::lock_guard lock(mu_);
  return completed_ >= seq;
}

void Stream::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  released_ = enqueued_;
  work_cv_.notify_one();
}

void Stream::run() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return completed_ < released_ || (closed_ && queue_.empty()); });
      if (queue_.empty()) return;  // closed and drained; the stream object stays (leaked)
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    for (const StreamPoint& p : task.waits) p.stream->wait(p.seq);
    if (sticky_error(device_) == cudaSuccess || !task.device_work) {
      try {
        task.fn();
      } catch (const std::exception& e) {
        set_sticky_error(device_, cudaErrorLaunchFailure, e.what());
      }
    }
    if (task.device_work) end_device_work();
    {
      std::lock_guard lock(mu_);
      ++completed_;
    }
    done_cv_.notify_all();
  }
}

// ---------------------------------------------------------------------------
// Devices, streams, errors

bool valid_device(int device) { return device >= 0 && device < config().devices; }
int current_device() { return current; }
void set_current_device(int device) { current = device; }

Stream* find_stream(cudaStream_t handle) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread) {
    if (!valid_device(current)) return nullptr;
    DeviceState& d = r.devices[static_cast<size_t>(current)];
    if (d.legacy == nullptr) {
      d.legacy = new Stream(current, 0, /*legacy_default=*/true);
      r.live.insert(d.legacy);
    }
    return d.legacy;
  }
  auto* s = reinterpret_cast<Stream*>(handle);
  return r.live.count(s) ? s : nullptr;
}

cudaStream_t create_stream(int device, unsigned flags) {
  Registry& r = registry();
  auto* s = new Stream(device, flags, /*legacy_default=*/false);
  std::lock_guard lock(r.mu);
  r.live.insert(s);
  r.devices[static_cast<size_t>(device)].streams.push_back(s);
  return reinterpret_cast<cudaStream_t>(s);
}

bool destroy_stream(cudaStream_t handle) {
  Registry& r = registry();
  auto* s = reinterpret_cast<Stream*>(handle);
  {
    std::lock_guard lock(r.mu);
    if (!r.live.count(s) || s->legacy_default()) return false;
    r.live.erase(s);
    auto& list = r.devices[static_cast<size_t>(s->device())].streams;
    std::erase(list, s);
    r.retired.push_back(s);
  }
  s->close();  // its worker finishes the queued work
  return true;
}

StreamPoint enqueue_ordered(Stream* stream, Task task) {
  // The legacy default stream waits for the device's blocking streams, and
  // they wait for it.
  Registry& r = registry();
  std::vector<Stream*> others;
  {
    std::lock_guard lock(r.mu);
    DeviceState& d = r.devices[static_cast<size_t>(stream->device())];
    if (stream->legacy_default()) {
      for (Stream* s : d.streams) {
        if (s->blocking()) others.push_back(s);
      }
    } else if (stream->blocking() && d.legacy != nullptr) {
      others.push_back(d.legacy);
    }
  }
  for (Stream* s : others) {
    const StreamPoint p = s->last();
    if (p.seq > 0) task.waits.push_back(p);
  }
  return stream->enqueue(std::move(task));
}

void synchronize_device(int device) {
  std::vector<Stream*> streams;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    DeviceState& d = r.devices[static_cast<size_t>(device)];
    if (d.legacy != nullptr) streams.push_back(d.legacy);
    streams.insert(streams.end(), d.streams.begin(), d.streams.end());
  }
  for (Stream* s : streams) s->wait(s->last().seq);
}

cudaError_t sticky_error(int device) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  return valid_device(device) ? r.devices[static_cast<size_t>(device)].sticky : cudaSuccess;
}

void set_sticky_error(int device, cudaError_t error, const std::string& why) {
  std::fprintf(stderr, "varstate: emulated GPU:%d: device fault (%s): %s\n", device,
               cudaGetErrorName(error), why.c_str());
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (valid_device(device) && r.devices[static_cast<size_t>(device)].sticky == cudaSuccess) {
    r.devices[static_cast<size_t>(device)].sticky = error;
  }
}

cudaError_t set_last_error(cudaError_t error) {
  if (error != cudaSuccess) last_error = error;
  return error;
}

cudaError_t take_last_error() {
  const cudaError_t sticky = sticky_error(current);
  if (sticky != cudaSuccess) return sticky;
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t peek_last_error() {
  const cudaError_t sticky = sticky_error(current);
  return sticky != cudaSuccess ? sticky : last_error;
}

cudaError_t enqueue_device_work(cudaStream_t handle, std::function<void()> fn) {
  Stream* s = find_stream(handle);
  if (s == nullptr) return set_last_error(cudaErrorInvalidResourceHandle);
  if (const cudaError_t e = sticky_error(s->device()); e != cudaSuccess) return e;
  enqueue_ordered(s, Task{std::move(fn), {}, true});
  return cudaSuccess;
}

}  // namespace varstate::cuda_emulation
