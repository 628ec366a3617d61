// The CPU device: host memory with a cache of large blocks, and the host
// copy used between CPU tensors.
#include "device/cpu_device.h"

#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/huge_pages.h"
#include "varstate/error.h"

namespace varstate {
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

// Large host blocks are cached after they are freed: a fresh block from the
// OS costs a page fault per 4 KiB page on first touch, which for a 64 MiB
// tensor is slower than the kernel that fills it, and malloc hands blocks
// above its mmap threshold (128 KiB to 32 MiB, adaptive) back to the OS
// on free: a training step's [8192, 16] temporaries (512 KiB) faulted in
// afresh every step. Blocks from 64 KiB are rounded up to size classes (at
// most 1/8 waste; whole pages, whole huge pages from 2 MiB) and reused by
// class, up to a cap. Under AddressSanitizer nothing is cached, so
// use-after-free stays detectable.
//
// Blocks of 2 MiB and more are mappings of their own, aligned to a huge
// page, so that grow() can move one to a larger size with mremap: the page
// tables move, the bytes stay where they are in physical memory, and the
// new tail is faulted in as it is first written. A dynamic table's arena
// that grows by half 30 times on its way to 1M rows of 256 bytes so copies
// nothing, or only into cached memory faulted in already (it copied 3
// times its final size into fresh memory, and held the old arena, the new
// one and the cached earlier ones at once). Under AddressSanitizer they
// stay malloc's (its redzones catch overflows), and grow() declines.
class HostBlockCache {
 public:
  static constexpr size_t kMinCached = size_t{64} << 10;
  static constexpr size_t kPage = size_t{4} << 10;
  static constexpr size_t kHugePage = internal::kHugePageBytes;

  explicit HostBlockCache(size_t physical_memory)
      : cap_(std::min(physical_memory / 4, size_t{16} << 30)) {}

  void* allocate(size_t bytes) {
    if (bytes < kMinCached) {
      return std::aligned_alloc(kCpuAlignment,
                                (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment);
    }
    size_t size = size_class(bytes);
    {
      std::lock_guard lock(mu_);
      auto it = free_.find(size);
      if (it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        cached_bytes_ -= size;
        live_[p] = size;
        return p;
      }
    }
    void* p = fresh(size);
    if (p == nullptr) {
      release_all();  // give cached blocks back and try once more
      p = fresh(size);
      if (p == nullptr) return nullptr;
    }
    std::lock_guard lock(mu_);
    live_[p] = size;
    return p;
  }

  void deallocate(void* p) {
    if (p == nullptr) return;
    std::unique_lock lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) {
      lock.unlock();
      std::free(p);
      return;
    }
    size_t size = it->second;
    live_.erase(it);
    if (!kCacheEnabled || cached_bytes_ + size > cap_) {
      lock.unlock();
      release(p, size);
      return;
    }
    free_.emplace(size, p);
    cached_bytes_ += size;
  }

  // Grows the block at p (from allocate) to hold `bytes`, keeping its
  // bytes: p itself when its size class holds them already; else the
  // smallest cached block of that class or up to kMaxGrowInto times
  // larger, p copied into it and given back (memory faulted in before is
  // cheaper to copy into than fresh memory is to fault in, and what grows
  // will likely grow on); else the block remapped to the larger class. p
  // is then invalid. nullptr, with the block as it was, for a block that
  // is not a mapping of its own or when the remap fails. Allocates nothing
  // from the heap (live_'s entry is moved, not replaced): never throws.
  static constexpr size_t kMaxGrowInto = 8;
  void* grow(void* p, size_t bytes) noexcept {
    if (!kMapsBlocks || p == nullptr) return nullptr;
    std::unique_lock lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end() || it->second < kHugePage) return nullptr;
    const size_t old_size = it->second;
    if (bytes <= old_size) return p;
    const size_t size = size_class(bytes);
    // live_'s entry for p, to be given the grown block's address and size.
    auto moved_entry = [&](void* to, size_t to_size) {
      auto node = live_.extract(it);
      node.key() = to;
      node.mapped() = to_size;
      live_.insert(std::move(node));  // as many entries as before: no rehash
    };
    if (auto cached = free_.lower_bound(size);
        cached != free_.end() && cached->first / kMaxGrowInto <= size) {
      void* q = cached->second;
      const size_t cached_size = cached->first;
      free_.erase(cached);
      cached_bytes_ -= cached_size;
      moved_entry(q, cached_size);
      lock.unlock();
      std::memcpy(q, p, old_size);
      release(p, old_size);
      return q;
    }
    // A huge-page-aligned place for the grown block, reserved (no access,
    // no memory), and the old mapping moved onto it.
    void* target = internal::map_huge_aligned(size, /*reserve_only=*/true);
    if (target == nullptr) return nullptr;
    if (mremap(p, old_size, size, MREMAP_MAYMOVE | MREMAP_FIXED, target) == MAP_FAILED) {
      internal::unmap_huge_aligned(target, size);
      return nullptr;
    }
    internal::advise_huge_pages(target, size);
    moved_entry(target, size);
    return target;
  }

 private:
#if defined(__SANITIZE_ADDRESS__)
  static constexpr bool kCacheEnabled = false;  // a freed block stays freed
#else
  static constexpr bool kCacheEnabled = true;
#endif
  static constexpr bool kMapsBlocks = internal::kMapHugeBlocks;

  // A new block of a size class: from 2 MiB a huge-page-aligned mapping of
  // its own (base/huge_pages.h), else malloc's.
  static void* fresh(size_t size) {
    if (size >= kHugePage) return internal::allocate_huge_block(size);
    return std::aligned_alloc(kPage, size);
  }

  static void release(void* p, size_t size) {
    if (size >= kHugePage) {
      internal::free_huge_block(p, size);
    } else {
      std::free(p);
    }
  }

  // Rounds up to a multiple of 1/8 of the largest power of two <= bytes,
  // and to whole pages (below 2 MiB) or huge pages.
  static size_t size_class(size_t bytes) {
    size_t pow2 = size_t{1} << (63 - __builtin_clzll(bytes));
    size_t step = std::max(pow2 / 8, bytes >= kHugePage ? kHugePage : kPage);
    return (bytes + step - 1) / step * step;
  }

  void release_all() {
    std::multimap<size_t, void*> blocks;
    {
      std::lock_guard lock(mu_);
      blocks.swap(free_);
      cached_bytes_ = 0;
    }
    for (auto& [size, p] : blocks) release(p, size);
  }

  const size_t cap_;
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  std::unordered_map<void*, size_t> live_;
  size_t cached_bytes_ = 0;
};

class CpuDevice final : public Device {
 public:
  CpuDevice() : Device(DeviceType::kCPU, 0), model_(cpu_model_name()) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    memory_ = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
    cache_ = std::make_unique<HostBlockCache>(memory_);
    // The most one allocation can ever get: physical memory plus swap.
    struct sysinfo info {};
    const size_t swap =
        ::sysinfo(&info) == 0 ? static_cast<size_t>(info.totalswap) * info.mem_unit : 0;
    max_allocation_ = memory_ == 0 ? SIZE_MAX / 2 : memory_ + swap;
  }
  std::string model() const override { return model_; }
  size_t total_memory() const override { return memory_; }

  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    // Refused before asking the allocator: a request beyond memory + swap
    // can never succeed (and rounding it to a size class could overflow).
    if (bytes > max_allocation_) {
      throw ResourceExhaustedError("out of memory on " + name() + " allocating " +
                                   std::to_string(bytes) + " bytes (more than its " +
                                   std::to_string(max_allocation_) + " bytes of memory and swap)");
    }
    void* p = cache_->allocate(bytes);
    if (p == nullptr) {
      throw ResourceExhaustedError("out of memory on " + name() + " allocating " +
                                   std::to_string(bytes) + " bytes");
    }
    return p;
  }
  void deallocate(void* ptr) noexcept override { cache_->deallocate(ptr); }
  void* grow(void* ptr, size_t bytes) noexcept override { return cache_->grow(ptr, bytes); }
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
  size_t max_allocation_ = 0;
  std::unique_ptr<HostBlockCache> cache_;
};

}  // namespace

namespace detail {

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

void host_memcpy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kParallelThreshold = size_t{8} << 20;
  // hardware_concurrency() reads sysfs on every call: asked once, and only
  // for copies large enough to split.
  static const unsigned kThreads = std::min(std::thread::hardware_concurrency(), 8u);
  if (bytes < kParallelThreshold || kThreads < 2) {
    if (bytes) std::memcpy(dst, src, bytes);
    return;
  }
  const unsigned threads = kThreads;
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
}  // namespace varstate
