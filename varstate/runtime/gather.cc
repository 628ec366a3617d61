#include "varstate/runtime/gather_internal.h"

#include <algorithm>
#include <string>

#include "varstate/device/device.h"
#include "varstate/kernels/cpu/gather.h"
#ifdef VARSTATE_HAVE_CUDA
#include "varstate/kernels/cuda/gather.h"
#endif

namespace varstate::internal {

std::vector<int64_t> host_indices(const Tensor& t) {
  if (t.dtype() == DType::kInt32) {
    std::vector<int32_t> v = t.to_vector<int32_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }
  return t.to_vector<int64_t>();
}

Tensor gather_rows(const Tensor& values, const std::vector<int64_t>& positions) {
  TensorShape shape = TensorShape({static_cast<int64_t>(positions.size())})
                          .concatenate(values.shape().tail(1));
  Device& device = values.device();
  Tensor out(values.dtype(), shape, device);
  const int64_t rows = values.shape().dim(0);
  const int64_t row_elems = rows == 0 ? 0 : values.num_elements() / rows;
  if (values.dtype() == DType::kString) {
    const auto* src = static_cast<const std::string*>(values.raw_data());
    auto* dst = static_cast<std::string*>(out.raw_data());
    for (size_t i = 0; i < positions.size(); ++i) {
      std::copy_n(src + positions[i] * row_elems, row_elems, dst + static_cast<int64_t>(i) * row_elems);
    }
    return out;
  }
  const int64_t row_bytes = row_elems * static_cast<int64_t>(dtype_size(values.dtype()));
  if (device.is_cpu()) {
    kernels::cpu::gather_rows<int64_t>(values.raw_data(), row_bytes, positions.data(),
                                       static_cast<int64_t>(positions.size()), out.raw_data());
    return out;
  }
#ifdef VARSTATE_HAVE_CUDA
  Tensor dev_pos = Tensor::from_vector<int64_t>(positions).to(device);
  DeviceGuard guard(device);
  kernels::cuda::gather_rows<int64_t>(values.raw_data(), row_bytes,
                                      static_cast<const int64_t*>(dev_pos.raw_data()),
                                      dev_pos.num_elements(), out.raw_data(), device.stream());
#endif
  return out;
}

}  // namespace varstate::internal
