#include "varstate/kernels/cpu/gather.h"

#include <cstring>

#include "varstate/kernels/cpu/eigen_internal.h"

namespace varstate::kernels::cpu {

template <typename Index>
void gather_rows(const void* table, int64_t row_bytes, const Index* indices, int64_t n,
                 void* out) {
  if (n == 0 || row_bytes == 0) return;
  const char* src = static_cast<const char*>(table);
  char* dst = static_cast<char*>(out);
  auto copy = [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      std::memcpy(dst + i * row_bytes, src + static_cast<int64_t>(indices[i]) * row_bytes,
                  row_bytes);
    }
  };
  if (n * row_bytes < kParallelBytesThreshold || eigen_device().numThreads() <= 1) {
    copy(0, n);
    return;
  }
  eigen_device().parallelFor(n, Eigen::TensorOpCost(2.0 * row_bytes, 2.0 * row_bytes, 0),
                             [&](Eigen::Index first, Eigen::Index last) { copy(first, last); });
}

template void gather_rows<int32_t>(const void*, int64_t, const int32_t*, int64_t, void*);
template void gather_rows<int64_t>(const void*, int64_t, const int64_t*, int64_t, void*);

}  // namespace varstate::kernels::cpu
