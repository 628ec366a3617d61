// Kernel execution on emulated GPUs (cuda_emulation/kernel_launch.h): the
// block pool, the fibers that run a block's threads, and the launch.
#include "cuda_emulation/kernel_launch.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_emulation/device_work.h"
#include "cuda_emulation/emulator_internal.h"
#include "cuda_emulation/fiber.h"

namespace varstate::cuda_emulation {
namespace {

// A device fault raised in a kernel (trap()); ends the grid.
struct KernelFault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Thread {
  Fiber fiber;
  uint3 index{};
  bool done = false;
};

// What the emulated threads of the running block see.
struct BlockContext {
  uint3 block_index{};
  dim3 block_dim;
  dim3 grid_dim;
  std::vector<unsigned char> shared;
  const KernelBody* body = nullptr;
  std::string fault;  // set by a thread that trapped
  Thread* running = nullptr;
};

thread_local BlockContext* block = nullptr;
// The device allocation the last atomic of this block was found in (atomics
// are checked against live device memory; most hit the same buffer).
thread_local uintptr_t checked_begin = 0, checked_end = 0;

BlockContext& context() {
  if (block == nullptr || block->running == nullptr) {
    std::fprintf(stderr, "varstate: emulated CUDA built-in used outside a kernel\n");
    std::abort();
  }
  return *block;
}

// Threads, and their fibers' stacks, reused from block to block on one
// host thread.
struct ThreadPool {
  std::vector<std::unique_ptr<Thread>> free;
  std::unique_ptr<Thread> acquire() {
    if (free.empty()) return std::make_unique<Thread>();
    auto t = std::move(free.back());
    free.pop_back();
    return t;
  }
  void release(std::unique_ptr<Thread> t) { free.push_back(std::move(t)); }
};

thread_local ThreadPool threads;

void thread_main() {
  BlockContext& b = *block;
  try {
    (*b.body)();
  } catch (const KernelFault& e) {
    if (b.fault.empty()) b.fault = e.what();
  } catch (const std::exception& e) {
    if (b.fault.empty()) b.fault = std::string("exception in a kernel: ") + e.what();
  }
  b.running->done = true;
}

uint3 unflatten(int64_t t, const dim3& d) {
  return {static_cast<unsigned>(t % d.x), static_cast<unsigned>((t / d.x) % d.y),
          static_cast<unsigned>(t / (int64_t{d.x} * d.y))};
}

// Runs one block; returns the fault message, empty if none.
std::string run_block(const KernelBody& body, uint3 block_index, dim3 block_dim, dim3 grid_dim,
                      size_t shared_bytes) {
  BlockContext b;
  b.block_index = block_index;
  b.block_dim = block_dim;
  b.grid_dim = grid_dim;
  b.shared.assign(shared_bytes, kUninitializedByte);
  b.body = &body;
  BlockContext* outer = block;
  block = &b;
  checked_begin = checked_end = 0;
  const int64_t n = int64_t{block_dim.x} * block_dim.y * block_dim.z;
  std::vector<std::unique_ptr<Thread>> waiting;
  auto resume = [&](std::unique_ptr<Thread> t) {
    b.running = t.get();
    t->fiber.resume();
    b.running = nullptr;
    if (t->done) {
      threads.release(std::move(t));
    } else {
      waiting.push_back(std::move(t));
    }
  };
  for (int64_t i = 0; i < n && b.fault.empty(); ++i) {
    std::unique_ptr<Thread> t = threads.acquire();
    t->index = unflatten(i, block_dim);
    t->done = false;
    t->fiber.start(&thread_main);
    resume(std::move(t));
  }
  // Phases between barriers; each phase runs the waiting threads in the
  // reverse order of the one before.
  while (!waiting.empty() && b.fault.empty()) {
    std::vector<std::unique_ptr<Thread>> phase = std::move(waiting);
    waiting.clear();
    std::reverse(phase.begin(), phase.end());
    for (auto& t : phase) {
      if (!b.fault.empty()) {
        waiting.push_back(std::move(t));
        continue;
      }
      resume(std::move(t));
    }
  }
  // After a fault, threads left at a barrier are abandoned; their fibers'
  // stacks are reused (nothing on them needs destroying: kernels hold no
  // owning objects).
  for (auto& t : waiting) {
    t->fiber.abandon();
    threads.release(std::move(t));
  }
  block = outer;
  return b.fault;
}

// A grid's blocks, run by whichever pool threads and the stream's worker
// take them.
struct GridJob {
  const KernelBody* body;
  dim3 grid;
  dim3 block;
  size_t shared;
  int64_t total;
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::condition_variable cv;
  int participants = 0;  // pool threads inside run()
  bool closed = false;
  std::string fault;

  void run() {
    for (int64_t k; !failed.load(std::memory_order_relaxed) && (k = next++) < total;) {
      const uint3 index = unflatten(k, grid);
      std::string f = run_block(*body, index, block, grid, shared);
      if (!f.empty()) {
        std::lock_guard lock(mu);
        if (fault.empty()) {
          fault = "block (" + std::to_string(index.x) + "," + std::to_string(index.y) + "," +
                  std::to_string(index.z) + "): " + f;
        }
        failed = true;
      }
    }
  }
};

class BlockPool {
 public:
  BlockPool() {
    const unsigned hw = config().block_threads;
    for (unsigned i = 0; i + 1 < hw; ++i) std::thread([this] { serve(); }).detach();
  }

  // Runs every block of `job`, with the pool's help; returns the fault.
  std::string run(GridJob& job) {
    if (job.total > 1) {
      std::lock_guard lock(mu_);
      jobs_.push_back(&job);
      cv_.notify_all();
    }
    job.run();
    if (job.total > 1) {
      {
        std::lock_guard lock(mu_);
        std::erase(jobs_, &job);
        std::lock_guard job_lock(job.mu);
        job.closed = true;
      }
      std::unique_lock job_lock(job.mu);
      job.cv.wait(job_lock, [&] { return job.participants == 0; });
    }
    return job.fault;
  }

 private:
  void serve() {
    for (;;) {
      GridJob* job = nullptr;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !jobs_.empty(); });
        job = jobs_.front();
        std::lock_guard job_lock(job->mu);
        if (job->closed || job->next.load() >= job->total) {
          jobs_.pop_front();
          continue;
        }
        ++job->participants;
      }
      job->run();
      // Notified under the lock: once the count reaches 0 the job's owner
      // may return and destroy the job.
      std::lock_guard job_lock(job->mu);
      --job->participants;
      job->cv.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GridJob*> jobs_;
};

BlockPool& pool() {
  static auto* p = new BlockPool;
  return *p;
}

// The kernel's name, for fault reports.
std::string kernel_name(const void* kernel) {
  Dl_info info{};
  if (dladdr(kernel, &info) == 0 || info.dli_sname == nullptr) return "a kernel";
  int status = 0;
  char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : info.dli_sname;
  std::free(demangled);
  return name;
}

}  // namespace

const uint3& thread_index() { return context().running->index; }
const uint3& block_index() { return context().block_index; }
const dim3& block_dim() { return context().block_dim; }
const dim3& grid_dim() { return context().grid_dim; }
void* dynamic_shared_memory() { return context().shared.data(); }

void sync_threads() {
  Thread* t = context().running;
  t->fiber.yield();
}

void trap(const char* why) { throw KernelFault(why); }

void check_atomic_address(const void* p, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a % bytes != 0) {
    trap(("misaligned address: a " + std::to_string(bytes) + "-byte atomic at 0x" +
          [&] {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%zx", static_cast<size_t>(a));
            return std::string(buf);
          }())
             .c_str());
  }
  if (a >= checked_begin && a + bytes <= checked_end) return;
  if (!is_mapped_device_range(p, bytes, &checked_begin, &checked_end)) {
    char buf[96];
    std::snprintf(buf, sizeof buf,
                  "illegal address: a %zu-byte atomic at %p, outside device memory", bytes, p);
    trap(buf);
  }
}

void launch_grid(const void* kernel, dim3 grid, dim3 block_dim, size_t shared_bytes,
                 cudaStream_t stream, KernelBody body) {
  const int device = current_device();
  if (!valid_device(device)) {
    set_last_error(cudaErrorNoDevice);
    return;
  }
  if (const cudaError_t e = sticky_error(device); e != cudaSuccess) {
    set_last_error(e);
    return;
  }
  const int64_t threads_per_block = int64_t{block_dim.x} * block_dim.y * block_dim.z;
  if (kernel == nullptr) {
    set_last_error(cudaErrorInvalidDeviceFunction);
    return;
  }
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads_per_block == 0 ||
      threads_per_block > 1024 || block_dim.z > 64 || grid.x > 0x7FFFFFFFu || grid.y > 65535 ||
      grid.z > 65535) {
    set_last_error(cudaErrorInvalidConfiguration);
    return;
  }
  if (shared_bytes > 48 * 1024) {
    set_last_error(cudaErrorInvalidValue);
    return;
  }
  Stream* s = find_stream(stream);
  if (s == nullptr || s->device() != device) {
    // A stream of another device: the launch goes to the current device,
    // which does not own the stream.
    set_last_error(cudaErrorInvalidResourceHandle);
    return;
  }
  count(&Stats::launches);
  auto shared_body = std::make_shared<KernelBody>(std::move(body));
  enqueue_ordered(s, Task{[shared_body, grid, block_dim, shared_bytes, device, kernel] {
                            GridJob job;
                            job.body = shared_body.get();
                            job.grid = grid;
                            job.block = block_dim;
                            job.shared = shared_bytes;
                            job.total = int64_t{grid.x} * grid.y * grid.z;
                            const std::string fault = pool().run(job);
                            if (!fault.empty()) {
                              set_sticky_error(device, cudaErrorLaunchFailure,
                                               kernel_name(kernel) + ", " + fault);
                            }
                          },
                          {},
                          true});
}

}  // namespace varstate::cuda_emulation
