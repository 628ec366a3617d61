// The device-side bounds check and the radix sort of the deterministic path.
// The scatter kernels themselves are in scatter_internal.cuh, instantiated
// per dtype group in scatter_{float,half,int,int_wide,complex}.cu.
#include <cub/device/device_radix_sort.cuh>

#include <utility>

#include "kernels/cuda/scatter_internal.cuh"

namespace varstate::kernels::cuda {
namespace {

struct ValidateConfig {
  static constexpr int kThreads = 256;
};

// Each thread records the first bad position of its grid-stride sequence with
// an atomicMin (rare: only bad indices write). The last block to finish —
// counted in blocks_done, which starts at 0xFFFFFFFF — reads the overall
// first bad position, stores the index found there and resets the counter.
template <typename Index>
__global__ void __launch_bounds__(ValidateConfig::kThreads)
    validate_indices_kernel(const Index* __restrict__ indices, int64_t n, uint64_t rows,
                            IndexCheck* check, uint8_t* __restrict__ marks) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const auto index = static_cast<uint64_t>(static_cast<int64_t>(indices[i]));
    if (index >= rows) {
      atomicMin(reinterpret_cast<unsigned long long*>(&check->first_bad_position),
                static_cast<unsigned long long>(i));
      break;
    }
    if (marks != nullptr) marks[index] = 1;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence();
  const unsigned done_before = atomicAdd(&check->blocks_done, 1u);
  if (done_before != gridDim.x - 2u) return;  // gridDim.x - 2 wraps for one block
  __threadfence();
  const uint64_t first =
      atomicOr(reinterpret_cast<unsigned long long*>(&check->first_bad_position), 0ull);
  if (first != IndexCheck::kNone) check->bad_index = static_cast<int64_t>(indices[first]);
  check->blocks_done = ~0u;
}

// Every element is tested, so that the smallest zero position wins the
// atomicMin on bad_index (0xFF.. after the reset: the largest unsigned).
template <typename W>
__global__ void __launch_bounds__(ValidateConfig::kThreads)
    validate_nonzero_kernel(const W* __restrict__ values, int64_t n, IndexCheck* check) {
  if (check->first_bad_position < IndexCheck::kZeroDivisor) return;  // a bad index comes first
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    if (values[i] == W{0}) {
      atomicMin(reinterpret_cast<unsigned long long*>(&check->first_bad_position),
                static_cast<unsigned long long>(IndexCheck::kZeroDivisor));
      atomicMin(reinterpret_cast<unsigned long long*>(&check->bad_index),
                static_cast<unsigned long long>(i));
      break;
    }
  }
}

template <typename W>
void launch_validate_nonzero(const void* values, int64_t n, IndexCheck* check,
                             cudaStream_t stream) {
  constexpr int kThreads = ValidateConfig::kThreads;
  launch_kernel(validate_nonzero_kernel<W>, grid_for(n, kThreads), kThreads, 0, stream,
                static_cast<const W*>(values), n, check);
}

template <typename Index, typename Key>
__global__ void make_sort_pairs_kernel(const Index* __restrict__ indices, int64_t n,
                                       Key* __restrict__ keys, uint32_t* __restrict__ positions) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    keys[i] = static_cast<Key>(static_cast<int64_t>(indices[i]));
    positions[i] = static_cast<uint32_t>(i);
  }
}

constexpr size_t kScratchAlign = 256;

size_t align_up(size_t bytes) {
  return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

// Bits that distinguish indices in [0, rows): the radix sort skips the rest.
int key_bits(int64_t rows) {
  int bits = 1;
  while (bits < 64 && (uint64_t{1} << bits) < static_cast<uint64_t>(rows)) ++bits;
  return bits;
}

bool wide_keys(int64_t rows) { return static_cast<uint64_t>(rows) > (uint64_t{1} << 32); }

// Scratch layout: keys (two buffers), positions (two buffers), CUB storage.
template <typename Key>
size_t cub_bytes(int64_t n, int64_t rows) {
  cub::DoubleBuffer<Key> keys(nullptr, nullptr);
  cub::DoubleBuffer<uint32_t> positions(nullptr, nullptr);
  size_t bytes = 0;
  VARSTATE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, positions,
                                                      static_cast<uint32_t>(n), 0, key_bits(rows)));
  return bytes;
}

template <typename Index, typename Key>
scatter_internal::SortedRun sort_with(const Index* indices, int64_t n, int64_t rows, void* scratch,
                                      size_t scratch_bytes, cudaStream_t stream) {
  constexpr int kThreads = 256;
  char* p = static_cast<char*>(scratch);
  Key* keys0 = reinterpret_cast<Key*>(p);
  Key* keys1 = reinterpret_cast<Key*>(p += align_up(n * sizeof(Key)));
  uint32_t* pos0 = reinterpret_cast<uint32_t*>(p += align_up(n * sizeof(Key)));
  uint32_t* pos1 = reinterpret_cast<uint32_t*>(p += align_up(n * sizeof(uint32_t)));
  void* temp = p + align_up(n * sizeof(uint32_t));
  // CUB's storage: the rest of the scratch, which sort_scratch_bytes sized.
  const size_t layout = 2 * align_up(n * sizeof(Key)) + 2 * align_up(n * sizeof(uint32_t));
  launch_kernel(make_sort_pairs_kernel<Index, Key>, grid_for(n, kThreads), kThreads, 0, stream,
                indices, n, keys0, pos0);
  cub::DoubleBuffer<Key> keys(keys0, keys1);
  cub::DoubleBuffer<uint32_t> positions(pos0, pos1);
  size_t temp_bytes = scratch_bytes - layout;
  VARSTATE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      temp, temp_bytes, keys, positions, static_cast<uint32_t>(n), 0, key_bits(rows), stream));
  return {positions.Current(), keys.Current(), sizeof(Key) == 8};
}

}  // namespace

void reset_index_check(IndexCheck* check, cudaStream_t stream) {
  VARSTATE_CUDA_CHECK(cudaMemsetAsync(check, 0xFF, sizeof(IndexCheck), stream));
}

template <typename Index>
void validate_indices(const Index* indices, int64_t n, int64_t rows, IndexCheck* check,
                      cudaStream_t stream, uint8_t* marks) {
  if (n == 0) return;
  constexpr int kThreads = ValidateConfig::kThreads;
  launch_kernel(validate_indices_kernel<Index>, grid_for(n, kThreads), kThreads, 0, stream, indices,
                n, static_cast<uint64_t>(rows), check, marks);
}

template void validate_indices<int32_t>(const int32_t*, int64_t, int64_t, IndexCheck*, cudaStream_t,
                                        uint8_t*);
template void validate_indices<int64_t>(const int64_t*, int64_t, int64_t, IndexCheck*, cudaStream_t,
                                        uint8_t*);

void validate_nonzero(const void* values, int64_t n, int elem_bytes, IndexCheck* check,
                      cudaStream_t stream) {
  if (n == 0) return;
  switch (elem_bytes) {
    case 1:
      return launch_validate_nonzero<uint8_t>(values, n, check, stream);
    case 2:
      return launch_validate_nonzero<uint16_t>(values, n, check, stream);
    case 4:
      return launch_validate_nonzero<uint32_t>(values, n, check, stream);
    case 8:
      return launch_validate_nonzero<unsigned long long>(values, n, check, stream);
    default:
      throw InvalidArgumentError("validate_nonzero: unsupported element size " +
                                 std::to_string(elem_bytes));
  }
}

namespace scatter_internal {

size_t sort_scratch_bytes(int64_t n, int64_t rows) {
  const size_t key_size = wide_keys(rows) ? 8 : 4;
  const size_t cub = wide_keys(rows) ? cub_bytes<uint64_t>(n, rows) : cub_bytes<uint32_t>(n, rows);
  return 2 * align_up(n * key_size) + 2 * align_up(n * sizeof(uint32_t)) + cub;
}

template <typename Index>
SortedRun sort_indices(const Index* indices, int64_t n, int64_t rows, void* scratch,
                       size_t scratch_bytes, cudaStream_t stream) {
  if (wide_keys(rows)) {
    return sort_with<Index, uint64_t>(indices, n, rows, scratch, scratch_bytes, stream);
  }
  return sort_with<Index, uint32_t>(indices, n, rows, scratch, scratch_bytes, stream);
}

template SortedRun sort_indices<int32_t>(const int32_t*, int64_t, int64_t, void*, size_t,
                                         cudaStream_t);
template SortedRun sort_indices<int64_t>(const int64_t*, int64_t, int64_t, void*, size_t,
                                         cudaStream_t);

bool kernel_has_cas128(const void* kernel, Cas128Cache& cache) {
  int device = 0;
  VARSTATE_CUDA_CHECK(cudaGetDevice(&device));
  std::atomic<int8_t>* known =
      device >= 0 && device < Cas128Cache::kDevices ? &cache.by_device[device] : nullptr;
  if (known != nullptr) {
    const int8_t k = known->load(std::memory_order_relaxed);
    if (k != 0) return k == 2;
  }
  // Two threads may both ask the runtime the first time: the same answer.
  cudaFuncAttributes attributes{};
  VARSTATE_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  const bool has = ptx_has_cas128(attributes.ptxVersion);
  if (known != nullptr) known->store(has ? 2 : 1, std::memory_order_relaxed);
  return has;
}

}  // namespace scatter_internal
}  // namespace varstate::kernels::cuda
