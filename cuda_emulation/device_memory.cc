// Emulated device memory and pinned host memory
// (cuda_emulation/emulator_internal.h).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_emulation/device_work.h"
#include "cuda_emulation/emulator_internal.h"

#include "cuda_emulation/asan.h"
#ifdef VARSTATE_EMULATION_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace varstate::cuda_emulation {
namespace {

constexpr unsigned char kCanary = 0xFD;

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t round_up(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

struct Allocation {
  size_t bytes = 0;     // as requested
  char* map = nullptr;  // the mapping: data pages, then the guard page
  size_t mapped = 0;    // bytes of data pages
  int device = 0;
  bool freeing = false;  // cudaFree(Async) called; unmapped when its stream gets there
};

struct Heap {
  std::mutex mu;
  std::map<uintptr_t, Allocation> live;  // by start address
  std::vector<size_t> used;              // bytes per device
  int busy = 0;                          // device work running
};

Heap& heap() {
  static Heap* h = [] {
    auto* x = new Heap;
    x->used.resize(static_cast<size_t>(config().devices), 0);
    return x;
  }();
  return *h;
}

// Opens or closes the host's access to the allocation at `start` (device
// work runs, or none is queued). Under AddressSanitizer the bytes are
// poisoned: a host access is a use-after-poison report with its stack, and
// the switch costs no system call, so a program with thousands of live
// allocations pays little per launch. Otherwise the data pages are
// protected (a host access is a SEGV); each switch is an mprotect per
// allocation.
void set_host_access(uintptr_t start, const Allocation& a, bool accessible) {
#ifdef VARSTATE_EMULATION_ASAN
  if (accessible) {
    ASAN_UNPOISON_MEMORY_REGION(reinterpret_cast<void*>(start), a.bytes);
  } else {
    ASAN_POISON_MEMORY_REGION(reinterpret_cast<void*>(start), a.bytes);
  }
#else
  (void)start;
  if (mprotect(a.map, a.mapped, accessible ? PROT_READ | PROT_WRITE : PROT_NONE) != 0) {
    std::perror("varstate: emulated GPU: mprotect");
    std::abort();
  }
#endif
}

// The allocation holding [p, p + bytes), or live.end(). Holds heap().mu.
std::map<uintptr_t, Allocation>::iterator find_locked(Heap& h, const void* p, size_t bytes) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto it = h.live.upper_bound(addr);
  if (it == h.live.begin()) return h.live.end();
  --it;
  if (addr - it->first > it->second.bytes || bytes > it->second.bytes - (addr - it->first)) {
    return h.live.end();
  }
  return it;
}

struct PinnedRegistry {
  std::mutex mu;
  std::map<uintptr_t, size_t> blocks;
};

PinnedRegistry& pinned() {
  static auto* p = new PinnedRegistry;
  return *p;
}

}  // namespace

void* allocate_device(int device, size_t bytes) {
  Heap& h = heap();
  const size_t mapped = round_up(std::max<size_t>(bytes, 1), page_size());
  {
    std::lock_guard lock(h.mu);
    if (bytes > config().memory - h.used[static_cast<size_t>(device)]) return nullptr;
    h.used[static_cast<size_t>(device)] += bytes;
  }
  void* map = mmap(nullptr, mapped + page_size(), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) {
    std::lock_guard lock(h.mu);
    h.used[static_cast<size_t>(device)] -= bytes;
    return nullptr;
  }
  char* base = static_cast<char*>(map);
#ifdef VARSTATE_EMULATION_ASAN
  // Addresses reused from an earlier mapping (a fiber stack, say) may still
  // carry its shadow.
  ASAN_UNPOISON_MEMORY_REGION(base, mapped);
#endif
  mprotect(base + mapped, page_size(), PROT_NONE);  // the guard page
  // As late in the pages as cudaMalloc's 256-byte alignment allows, so that
  // an access past the end soon meets the guard page; the bytes between are
  // poisoned (AddressSanitizer) or a canary.
  char* p = base + (mapped - round_up(std::max<size_t>(bytes, 1), 256));
  std::memset(base, kCanary, static_cast<size_t>(p - base));
  std::memset(p, kUninitializedByte, bytes);
  const size_t tail = static_cast<size_t>(base + mapped - (p + bytes));
#ifdef VARSTATE_EMULATION_ASAN
  ASAN_POISON_MEMORY_REGION(base, static_cast<size_t>(p - base));
  ASAN_POISON_MEMORY_REGION(p + bytes, tail);
#else
  std::memset(p + bytes, kCanary, tail);
#endif
  std::lock_guard lock(h.mu);
  Allocation a{bytes, base, mapped, device, false};
  if (h.busy == 0) set_host_access(reinterpret_cast<uintptr_t>(p), a, false);
  h.live.emplace(reinterpret_cast<uintptr_t>(p), a);
  return p;
}

bool begin_free(void* p) {
  Heap& h = heap();
  std::lock_guard lock(h.mu);
  auto it = h.live.find(reinterpret_cast<uintptr_t>(p));
  if (it == h.live.end() || it->second.freeing) return false;
  it->second.freeing = true;
  return true;
}

void finish_free(void* p) {
  Heap& h = heap();
  Allocation a;
  {
    std::lock_guard lock(h.mu);
    auto it = h.live.find(reinterpret_cast<uintptr_t>(p));
    if (it == h.live.end()) return;
    a = it->second;
    h.live.erase(it);
    h.used[static_cast<size_t>(a.device)] -= a.bytes;
    set_host_access(reinterpret_cast<uintptr_t>(p), a, true);
  }
  char* c = static_cast<char*>(p);
  const size_t tail = static_cast<size_t>(a.map + a.mapped - (c + a.bytes));
#ifdef VARSTATE_EMULATION_ASAN
  // The next mapping at these addresses starts unpoisoned.
  (void)tail;
  ASAN_UNPOISON_MEMORY_REGION(a.map, a.mapped);
#else
  for (size_t i = 0; i < tail; ++i) {
    if (static_cast<unsigned char>(c[a.bytes + i]) != kCanary) {
      set_sticky_error(a.device, cudaErrorIllegalAddress,
                       "a write " + std::to_string(i) + " bytes past the end of a " +
                           std::to_string(a.bytes) + "-byte allocation");
      break;
    }
  }
#endif
  munmap(a.map, a.mapped + page_size());
}

int device_of(const void* p) {
  Heap& h = heap();
  std::lock_guard lock(h.mu);
  auto it = find_locked(h, p, 0);
  return it == h.live.end() ? -1 : it->second.device;
}

bool is_device_range(const void* p, size_t bytes) {
  Heap& h = heap();
  std::lock_guard lock(h.mu);
  auto it = find_locked(h, p, bytes);
  return it != h.live.end() && !it->second.freeing;
}

bool is_mapped_device_range(const void* p, size_t bytes, uintptr_t* begin, uintptr_t* end) {
  Heap& h = heap();
  std::lock_guard lock(h.mu);
  auto it = find_locked(h, p, bytes);
  if (it == h.live.end()) return false;
  if (begin != nullptr) *begin = it->first;
  if (end != nullptr) *end = it->first + it->second.bytes;
  return true;
}

size_t device_memory_used(int device) {
  Heap& h = heap();
  std::lock_guard lock(h.mu);
  return h.used[static_cast<size_t>(device)];
}

void begin_device_work() {
  Heap& h = heap();
  std::lock_guard lock(h.mu);
  if (h.busy++ == 0) {
    for (const auto& [start, a] : h.live) set_host_access(start, a, true);
  }
}

void end_device_work() {
  Heap& h = heap();
  std::lock_guard lock(h.mu);
  if (--h.busy == 0) {
    for (const auto& [start, a] : h.live) set_host_access(start, a, false);
  }
}

void* allocate_pinned(size_t bytes) {
  void* p = std::aligned_alloc(4096, round_up(std::max<size_t>(bytes, 1), 4096));
  if (p == nullptr) return nullptr;
  PinnedRegistry& r = pinned();
  std::lock_guard lock(r.mu);
  r.blocks.emplace(reinterpret_cast<uintptr_t>(p), bytes);
  return p;
}

bool free_pinned(void* p) {
  PinnedRegistry& r = pinned();
  {
    std::lock_guard lock(r.mu);
    if (r.blocks.erase(reinterpret_cast<uintptr_t>(p)) == 0) return false;
  }
  std::free(p);
  return true;
}

bool is_pinned_range(const void* p, size_t bytes) {
  PinnedRegistry& r = pinned();
  std::lock_guard lock(r.mu);
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto it = r.blocks.upper_bound(addr);
  if (it == r.blocks.begin()) return false;
  --it;
  return addr - it->first <= it->second && bytes <= it->second - (addr - it->first);
}

}  // namespace varstate::cuda_emulation
