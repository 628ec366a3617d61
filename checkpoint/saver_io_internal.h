// Moving variable bytes between devices and checkpoint files: the V2
// CheckpointWriter's shards (checkpoint/checkpoint_writer.h) and restores.
// Internal.
//
// write_variable_tensor() appends one tensor to a BundleWriter: host tensors
// straight from their buffer; GPU tensors through a StagingBuffers pair,
// double-buffered so that the device-to-host copy of chunk k+1 runs while
// chunk k is written (and checksummed). Peak host memory is the two staging
// buffers per writer, whatever the tensor size; only a GPU partition of a
// partitioned variable is copied to the host whole (BundleWriter takes a
// slice in one piece).
//
// tensor_from_data() builds a fresh tensor on a device from restored host
// data (host-to-device copies are staged through pinned memory by
// copy_bytes).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "checkpoint/tensor_bundle.h"
#include "varstate/device.h"
#include "varstate/tensor.h"
#include "varstate/tensor_data.h"
#include "varstate/tensor_slice.h"
#include "varstate/variable.h"

namespace varstate {

// Two pinned host buffers for staged GPU transfers, allocated on first use.
class StagingBuffers {
 public:
  explicit StagingBuffers(size_t chunk_bytes)
      : chunk_bytes_(chunk_bytes < 4096 ? 4096 : chunk_bytes) {}
  size_t chunk_bytes() const { return chunk_bytes_; }
  // Buffer i (0 or 1), allocated on first use.
  void* buffer(int i);

 private:
  size_t chunk_bytes_;
  PinnedBuffer buffers_[2];
};

// The host-side view of a tensor that lives on the CPU (strings included).
TensorView host_view(const Tensor& tensor);

// The checkpoint slice a partitioned variable's SaveSliceInfo names.
TensorSlice slice_of(const SaveSliceInfo& info);

// Appends `tensor` to `writer` under `key`, as slice `slice` of the full
// tensor when given. The tensor may live on any device.
void write_variable_tensor(BundleWriter& writer, const std::string& key,
                           const std::optional<SaveSliceInfo>& slice, const Tensor& tensor,
                           StagingBuffers& staging);

// A new tensor of `shape` on `device` holding `data`'s elements (whose count
// must match).
Tensor tensor_from_data(const TensorData& data, const TensorShape& shape, Device& device);

}  // namespace varstate
