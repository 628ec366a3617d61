// Scratch arrays a CPU kernel keeps per thread from one call to the next
// (the scatters' position lists, the sparse optimizers' row numbering, a
// partitioned gather's routes).
#pragma once

#include <cstddef>
#include <vector>

namespace varstate::kernels::cpu {

// A thread's scratch array of T, kept from one call to the next:
// allocating it afresh on each call costs more than the kernel once the
// heap is fragmented (a program that freed many small objects: malloc then
// sorts its free lists on every large request), and a block above malloc's
// mmap threshold goes back to the OS when freed, to be faulted in again,
// page by page, on the next call. Buffers above kMaxKept bytes are freed
// after the call. Each (T, Tag) pair is one kept buffer per thread; a
// second scratch of the same pair alive at once on the thread (scratches
// a kernel holds together should have distinct tags) gets a buffer of its
// own for its lifetime instead of sharing the kept one.
template <typename T, typename Tag = void>
class ThreadScratch {
 public:
  static constexpr size_t kMaxKept = size_t{64} << 20;
  explicit ThreadScratch(size_t n) {
    Kept& kept = thread_kept();
    if (!kept.in_use) {
      kept.in_use = true;
      buffer_ = &kept.buffer;
    }
    if (buffer_->size() < n) buffer_->resize(n);
  }
  ~ThreadScratch() {
    if (buffer_ == &own_) return;
    if (buffer_->capacity() * sizeof(T) > kMaxKept) std::vector<T>().swap(*buffer_);
    thread_kept().in_use = false;
  }
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  T* data() { return buffer_->data(); }
  const T* data() const { return buffer_->data(); }
  // The whole buffer's length (at least the n asked for).
  size_t size() const { return buffer_->size(); }

 private:
  struct Kept {
    std::vector<T> buffer;
    bool in_use = false;
  };
  static Kept& thread_kept() {
    thread_local Kept kept;
    return kept;
  }
  std::vector<T> own_;
  std::vector<T>* buffer_ = &own_;
};

}  // namespace varstate::kernels::cpu
