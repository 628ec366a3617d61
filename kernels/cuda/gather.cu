// Row gather: one thread per word of output, grid-stride.
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/gather.h"
#include "kernels/cuda/scatter.h"

namespace varstate::kernels::cuda {
namespace {

struct GatherConfig {
  static constexpr int kThreads = 256;
};

// kFill: a negative index reads `fill` (a row), or with fill null writes
// nothing.
template <typename W, typename Index, bool kFill>
__global__ void __launch_bounds__(GatherConfig::kThreads)
    gather_rows_kernel(const W* __restrict__ table, int64_t row_words,
                       const Index* __restrict__ indices, int64_t n, W* __restrict__ out,
                       const IndexCheck* check, const W* __restrict__ fill) {
  if (check != nullptr && check->first_bad_position != IndexCheck::kNone) return;
  const int64_t total = n * row_words;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < total;
       w += stride) {
    const int64_t i = w / row_words, c = w - i * row_words;
    const auto row = static_cast<int64_t>(indices[i]);
    if (kFill && row < 0) {
      if (fill != nullptr) out[w] = fill[c];
      continue;
    }
    out[w] = table[row * row_words + c];
  }
}

struct alignas(16) Word16 {
  unsigned long long lo, hi;
};

template <typename W, typename Index, bool kFill>
void launch(const void* table, int64_t row_bytes, const Index* indices, int64_t n, void* out,
            cudaStream_t stream, const IndexCheck* check, const void* fill) {
  const int64_t row_words = row_bytes / static_cast<int64_t>(sizeof(W));
  constexpr int kThreads = GatherConfig::kThreads;
  launch_kernel(gather_rows_kernel<W, Index, kFill>, grid_for(n * row_words, kThreads), kThreads, 0,
                stream, static_cast<const W*>(table), row_words, indices, n, static_cast<W*>(out),
                check, static_cast<const W*>(fill));
}

// Picks the widest word every row, `table`, `out` and `fill` align to.
template <typename Index, bool kFill>
void dispatch(const void* table, int64_t row_bytes, const Index* indices, int64_t n, void* out,
              cudaStream_t stream, const IndexCheck* check, const void* fill) {
  if (n == 0 || row_bytes == 0) return;
  const uint64_t align = static_cast<uint64_t>(row_bytes) | reinterpret_cast<uintptr_t>(table) |
                         reinterpret_cast<uintptr_t>(out) | reinterpret_cast<uintptr_t>(fill);
  if (align % 16 == 0) {
    return launch<Word16, Index, kFill>(table, row_bytes, indices, n, out, stream, check, fill);
  }
  if (align % 8 == 0) {
    return launch<uint64_t, Index, kFill>(table, row_bytes, indices, n, out, stream, check, fill);
  }
  if (align % 4 == 0) {
    return launch<uint32_t, Index, kFill>(table, row_bytes, indices, n, out, stream, check, fill);
  }
  if (align % 2 == 0) {
    return launch<uint16_t, Index, kFill>(table, row_bytes, indices, n, out, stream, check, fill);
  }
  launch<uint8_t, Index, kFill>(table, row_bytes, indices, n, out, stream, check, fill);
}

}  // namespace

template <typename Index>
void gather_rows(const void* table, int64_t row_bytes, const Index* indices, int64_t n, void* out,
                 cudaStream_t stream, const IndexCheck* check) {
  dispatch<Index, false>(table, row_bytes, indices, n, out, stream, check, nullptr);
}

void gather_rows_or_fill(const void* table, int64_t row_bytes, const int64_t* indices, int64_t n,
                         void* out, const void* fill, cudaStream_t stream) {
  dispatch<int64_t, true>(table, row_bytes, indices, n, out, stream, nullptr, fill);
}

template void gather_rows<int32_t>(const void*, int64_t, const int32_t*, int64_t, void*,
                                   cudaStream_t, const IndexCheck*);
template void gather_rows<int64_t>(const void*, int64_t, const int64_t*, int64_t, void*,
                                   cudaStream_t, const IndexCheck*);

}  // namespace varstate::kernels::cuda
