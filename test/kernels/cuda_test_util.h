// Raw CUDA helpers for the kernel tests that drive kernels/cuda/ directly
// (scatter_gpu_test.cc, training_ops_gpu_test.cc), without the runtime's
// devices: a checked call, a device copy of a host vector and back, a
// stream, and stream-ordered scratch memory as the runtime provides it.
// (random_gpu_test.cc allocates through the Device API instead: its guard
// bytes need the device's own allocator and copies.)
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/scatter.h"

namespace varstate::testing {

inline void cuda_ok(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
  }
}
#define CUDA_OK(call) ::varstate::testing::cuda_ok((call), #call)

// `n` elements at device address `src`, copied to the host.
template <typename T>
std::vector<T> download(const T* src, size_t n) {
  std::vector<T> out(n);
  CUDA_OK(cudaMemcpy(out.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

// Device copy of a host vector, in an allocation of its bytes rounded up to
// `granule` (compute-sanitizer reports any access past them), the padding
// zeroed as the CUDA device's allocator does (device/allocation_tail.h), so
// that initcheck sees defined bytes. An empty vector gets one element.
// kExactBytes allocates the elements alone, so that an access one element
// past the end is reported too.
inline constexpr size_t kExactBytes = 1;

template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host, size_t granule = 16) : size_(host.size()) {
    const size_t bytes = (std::max<size_t>(1, size_) * sizeof(T) + granule - 1) / granule * granule;
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&ptr_), bytes));
    CUDA_OK(cudaMemset(ptr_, 0, bytes));
    CUDA_OK(cudaMemcpy(ptr_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return ptr_; }
  std::vector<T> to_host() const { return download(ptr_, size_); }

 private:
  T* ptr_ = nullptr;
  size_t size_;
};

class Stream {
 public:
  Stream() { CUDA_OK(cudaStreamCreate(&stream_)); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void sync() const { CUDA_OK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

// Stream-ordered scratch memory, as the runtime provides it.
inline kernels::cuda::ScratchAllocator scratch_on(cudaStream_t stream) {
  return {[stream](size_t bytes) {
            void* p = nullptr;
            CUDA_OK(cudaMallocAsync(&p, bytes, stream));
            return p;
          },
          [stream](void* p) { cudaFreeAsync(p, stream); }};
}

}  // namespace varstate::testing
