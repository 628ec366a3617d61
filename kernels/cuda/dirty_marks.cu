#include "kernels/cuda/dirty_marks.h"

#include "kernels/cuda/cuda_types.cuh"

namespace varstate::kernels::cuda {
namespace {

struct DirtyMarksConfig {
  static constexpr int kThreads = 256;
};

__global__ void __launch_bounds__(DirtyMarksConfig::kThreads)
    take_marks_kernel(uint8_t* __restrict__ marks, uint8_t* __restrict__ out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = marks[i];
    marks[i] = 0;
  }
}

template <typename Index>
__global__ void __launch_bounds__(DirtyMarksConfig::kThreads)
    mark_rows_kernel(const Index* __restrict__ indices, int64_t n, int64_t rows,
                     uint8_t* __restrict__ marks) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int64_t r = static_cast<int64_t>(indices[i]);
    if (r >= 0 && r < rows) marks[r] = 1;
  }
}

}  // namespace

template <typename Index>
void mark_rows(const Index* indices, int64_t n, int64_t rows, uint8_t* marks, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kThreads = DirtyMarksConfig::kThreads;
  launch_kernel(mark_rows_kernel<Index>, grid_for(n, kThreads), kThreads, 0, stream, indices, n,
                rows, marks);
}

template void mark_rows<int32_t>(const int32_t*, int64_t, int64_t, uint8_t*, cudaStream_t);
template void mark_rows<int64_t>(const int64_t*, int64_t, int64_t, uint8_t*, cudaStream_t);

void take_marks(uint8_t* marks, uint8_t* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kThreads = DirtyMarksConfig::kThreads;
  launch_kernel(take_marks_kernel, grid_for(n, kThreads), kThreads, 0, stream, marks, out, n);
}

}  // namespace varstate::kernels::cuda
