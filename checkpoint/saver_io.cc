#include "checkpoint/saver_io_internal.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <span>

#include "varstate/device_manager.h"
#include "varstate/error.h"

namespace varstate {

void* StagingBuffers::buffer(int i) {
  PinnedBuffer& b = buffers_[i];
  if (b.data() == nullptr) b = PinnedBuffer(chunk_bytes_);
  return b.data();
}

TensorView host_view(const Tensor& tensor) {
  TensorView view;
  view.dtype = tensor.dtype();
  view.shape = tensor.shape().dims();
  if (tensor.dtype() == DType::kString) {
    view.strings = std::span<const std::string>(static_cast<const std::string*>(tensor.raw_data()),
                                                static_cast<size_t>(tensor.num_elements()));
  } else {
    view.bytes = std::span<const std::byte>(static_cast<const std::byte*>(tensor.raw_data()),
                                            tensor.nbytes());
  }
  return view;
}

TensorSlice slice_of(const SaveSliceInfo& info) {
  std::vector<TensorSlice::Extent> extents;
  for (size_t d = 0; d < info.var_offset.size(); ++d)
    extents.push_back({info.var_offset[d], info.var_shape[d]});
  return TensorSlice(std::move(extents));
}

namespace {

// Streams a GPU tensor through the two staging buffers: the copy of chunk
// k+1 is enqueued before chunk k is written.
void stream_from_device(BundleWriter& writer, const std::string& key, const Tensor& tensor,
                        StagingBuffers& staging) {
  Device& device = tensor.device();
  const auto* src = static_cast<const std::byte*>(tensor.raw_data());
  const size_t total = tensor.nbytes();
  const size_t chunk = staging.chunk_bytes();
  writer.begin_tensor(key, tensor.dtype(), tensor.shape().dims());
  std::shared_ptr<Event> ready[2];
  auto enqueue = [&](size_t k) {
    const size_t offset = k * chunk;
    const size_t n = std::min(chunk, total - offset);
    device.copy_to_host_async(staging.buffer(static_cast<int>(k % 2)), src + offset, n);
    ready[k % 2] = device.record_event();
  };
  const size_t num_chunks = (total + chunk - 1) / chunk;
  // An empty tensor still gets one (empty) append, which gives the writer
  // its checksum: with no append at all, end_tensor has none and refuses.
  if (num_chunks == 0) writer.append_tensor_bytes({});
  if (num_chunks > 0) enqueue(0);
  for (size_t k = 0; k < num_chunks; ++k) {
    if (k + 1 < num_chunks) enqueue(k + 1);
    ready[k % 2]->wait_host();
    const size_t offset = k * chunk;
    const size_t n = std::min(chunk, total - offset);
    writer.append_tensor_bytes(std::span<const std::byte>(
        static_cast<const std::byte*>(staging.buffer(static_cast<int>(k % 2))), n));
  }
  writer.end_tensor();
}

}  // namespace

void write_variable_tensor(BundleWriter& writer, const std::string& key,
                           const std::optional<SaveSliceInfo>& slice, const Tensor& tensor,
                           StagingBuffers& staging) {
  const bool on_host = tensor.device().is_cpu();
  if (!slice) {
    if (on_host) {
      writer.add(key, host_view(tensor));
    } else {
      stream_from_device(writer, key, tensor, staging);
    }
    return;
  }
  const Tensor host = on_host ? tensor : tensor.to_host();
  writer.add_slice(key, slice->full_shape, slice_of(*slice), host_view(host));
}

Tensor tensor_from_data(const TensorData& data, const TensorShape& shape, Device& device) {
  if (data.num_elements() != shape.num_elements()) {
    throw InternalError("tensor_from_data: " + std::to_string(data.num_elements()) +
                        " elements for shape " + shape.to_string());
  }
  if (data.dtype == DType::kString) {
    Tensor t(DType::kString, shape);
    auto* out = t.data<std::string>();
    for (size_t i = 0; i < data.strings.size(); ++i) out[i] = data.strings[i];
    return t.on(device);
  }
  Tensor t(data.dtype, shape, device);
  if (t.nbytes() == 0) return t;
  copy_bytes(device, t.raw_data(), DeviceManager::instance().cpu(), data.bytes.data(),
             data.bytes.size());
  return t;
}

}  // namespace varstate
