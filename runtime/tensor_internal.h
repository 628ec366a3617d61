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
  // Grows the memory to `num_elements` in place where the device can
  // (Device::grow); false, nothing changed, where it cannot. Not for
  // strings. The caller is the buffer's only user.
  bool grow(int64_t num_elements);

 private:
  Device* device_;
  DType dtype_;
  int64_t num_elements_;
  size_t bytes_;
  void* data_;
};

// Grows axis 0 of `t` to `rows` (at least its size now) without copying
// its buffer, where its device can (Device::grow: the CPU, for buffers of
// 2 MiB and more): the rows it had keep their values, the new ones are
// uninitialized. Only for the sole handle of its buffer (sole_owner()), of
// rank 1 or more and not of strings; returns false, nothing changed,
// otherwise or when the device declines.
bool grow_rows_in_place(Tensor& t, int64_t rows);

}  // namespace varstate::internal
