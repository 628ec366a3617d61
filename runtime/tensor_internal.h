// The memory behind Tensor handles (not installed, not API).
#pragma once

#include <cstddef>
#include <cstdint>

#include "varstate/device.h"
#include "varstate/dtype.h"

namespace varstate::internal {

// Memory of one tensor on one device; freed (stream-ordered) when the last
// Tensor sharing it goes away.
class Buffer {
 public:
  Buffer(Device& device, DType dtype, int64_t num_elements);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Device& device() const { return *device_; }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  Device* device_;
  DType dtype_;
  int64_t num_elements_;
  size_t bytes_;
  void* data_;
};

}  // namespace varstate::internal
