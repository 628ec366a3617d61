// Scratch arrays a CPU kernel keeps per thread from one call to the next
// (the scatters' position lists, the sparse optimizers' row numbering).
#pragma once

#include <cstddef>
#include <vector>

namespace varstate::kernels::cpu {

// A thread's scratch array of T, kept from one call to the next:
// allocating it afresh on each call costs more than the kernel once the
// heap is fragmented (a program that freed many small objects: malloc then
// sorts its free lists on every large request). Buffers above kMaxKept
// bytes are freed after the call. Each (T, Tag) pair is one buffer per
// thread: scratches a kernel holds at the same time need distinct tags.
template <typename T, typename Tag = void>
class ThreadScratch {
 public:
  static constexpr size_t kMaxKept = size_t{64} << 20;
  explicit ThreadScratch(size_t n) : buffer_(kept()) {
    if (buffer_.size() < n) buffer_.resize(n);
  }
  ~ThreadScratch() {
    if (buffer_.capacity() * sizeof(T) > kMaxKept) std::vector<T>().swap(buffer_);
  }
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  T* data() { return buffer_.data(); }
  // The whole buffer's length (at least the n asked for).
  size_t size() const { return buffer_.size(); }

 private:
  static std::vector<T>& kept() {
    thread_local std::vector<T> buffer;
    return buffer;
  }
  std::vector<T>& buffer_;
};

}  // namespace varstate::kernels::cpu
