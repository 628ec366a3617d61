#include "kernels/cuda/training_ops.h"

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/scatter_internal.cuh"
#include "varstate/error.h"

namespace varstate::kernels::cuda {
namespace {

using scatter_internal::SortedRun;

struct TrainingConfig {
  static constexpr int kThreads = 256;
  // Threads of a block that updates one row of a sparse update.
  static constexpr int kMaxRowThreads = 256;
};

template <TrainingOp Op, typename C, typename T>
__global__ void dense_kernel(TrainingParams<C> p, TrainingSlots<T> s, const T* __restrict__ grad,
                             int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    update_element<Op, false>(p, s, i, load_as<C>(grad[i]));
  }
}

template <typename C, typename T>
__global__ void rowwise_dense_kernel(TrainingParams<C> p, TrainingSlots<T> s,
                                     const T* __restrict__ grad, int64_t rows, int64_t width) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += stride) {
    const T* g = grad + r * width;
    rowwise_adagrad_row(p, s, r, width, [g](int64_t c) { return load_as<C>(g[c]); });
  }
}

// The end of the run of equal keys that starts at sorted position k.
__device__ __forceinline__ int64_t run_end(const SortedRun& run, int64_t k, int64_t n) {
  const uint64_t key = run.key(k);
  int64_t e = k + 1;
  while (e < n && run.key(e) == key) ++e;
  return e;
}

__device__ __forceinline__ bool run_head(const SortedRun& run, int64_t k) {
  return k == 0 || run.key(k) != run.key(k - 1);
}

// The gradient of the run [k, e) at column c, summed as the CPU sums it.
template <typename C, typename T>
__device__ __forceinline__ C run_sum(const SortedRun& run, int64_t k, int64_t e,
                                     const T* __restrict__ grad, int64_t width, int64_t c) {
  C g = 0;
  for (int64_t q = k; q < e; ++q) {
    g = round_through<T>(g + load_as<C>(grad[static_cast<int64_t>(run.positions[q]) * width + c]));
  }
  return g;
}

// Whether a bad index was recorded in `check` (none given: the caller
// checked): the sparse kernels then write nothing.
__device__ __forceinline__ bool rejected(const IndexCheck* check) {
  return check != nullptr && check->first_bad_position != IndexCheck::kNone;
}

// One block per sorted position; the head of each run updates its row.
template <TrainingOp Op, typename C, typename T>
__global__ void sparse_kernel(TrainingParams<C> p, TrainingSlots<T> s, SortedRun run, int64_t n,
                              const T* __restrict__ grad, int64_t width, const IndexCheck* check) {
  if (rejected(check)) return;
  for (int64_t k = blockIdx.x; k < n; k += gridDim.x) {
    if (!run_head(run, k)) continue;
    const int64_t e = run_end(run, k, n);
    const int64_t base = static_cast<int64_t>(run.key(k)) * width;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      update_element<Op, true>(p, s, base + c, run_sum<C>(run, k, e, grad, width, c));
    }
  }
}

// One thread per sorted position; the head of each run updates its row.
template <typename C, typename T>
__global__ void rowwise_sparse_kernel(TrainingParams<C> p, TrainingSlots<T> s, SortedRun run,
                                      int64_t n, const T* __restrict__ grad, int64_t width,
                                      const IndexCheck* check) {
  if (rejected(check)) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += stride) {
    if (!run_head(run, k)) continue;
    const int64_t e = run_end(run, k, n);
    rowwise_adagrad_row(p, s, static_cast<int64_t>(run.key(k)), width,
                        [&](int64_t c) { return run_sum<C>(run, k, e, grad, width, c); });
  }
}

__global__ void mark_runs_kernel(SortedRun run, int64_t n, int64_t* run_of_row,
                                 const IndexCheck* check) {
  if (rejected(check)) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += stride) {
    if (run_head(run, k)) run_of_row[run.key(k)] = k;
  }
}

// compat.v1 sparse Adam: every element; rows in the batch with their run's
// gradient, the others decay.
template <typename C, typename T>
__global__ void adam_sparse_kernel(TrainingParams<C> p, TrainingSlots<T> s, SortedRun run,
                                   int64_t n, const int64_t* __restrict__ run_of_row,
                                   const T* __restrict__ grad, int64_t rows, int64_t width,
                                   const IndexCheck* check) {
  if (rejected(check)) return;
  const int64_t total = rows * width;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int64_t k = run_of_row[i / width];
    if (k >= 0) {
      const int64_t e = run_end(run, k, n);
      update_element<TrainingOp::kAdam, true>(p, s, i,
                                              run_sum<C>(run, k, e, grad, width, i % width));
    } else {
      adam_decay_element(p, s, i);
    }
  }
}

template <typename C, typename T>
TrainingSlots<C> device_slots(const TrainingSlots<T>& s) {
  return {reinterpret_cast<C*>(s.var), reinterpret_cast<C*>(s.s0), reinterpret_cast<C*>(s.s1),
          reinterpret_cast<C*>(s.s2)};
}

// Scratch memory released (stream-ordered) when the call ends.
class Scratch {
 public:
  Scratch(const ScratchAllocator& allocator, size_t bytes)
      : allocator_(allocator), ptr_(allocator.allocate(bytes)) {}
  ~Scratch() { allocator_.deallocate(ptr_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return ptr_; }

 private:
  const ScratchAllocator& allocator_;
  void* ptr_;
};

int row_threads(int64_t width) {
  const int64_t warps = (width + 31) / 32;
  return static_cast<int>(std::min<int64_t>(warps * 32, TrainingConfig::kMaxRowThreads));
}

unsigned row_grid(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>(n, 1, int64_t{1} << 30));
}

}  // namespace

template <typename T>
void apply_dense(TrainingOp op, const TrainingHyper& hyper, const TrainingSlots<T>& slots,
                 const T* grad, int64_t n, int64_t row_width, cudaStream_t stream) {
  if (n == 0) return;
  using D = cuda_t<T>;
  using C = training_compute_t<D>;
  const TrainingParams<C> p = training_params<D, C>(hyper);
  const TrainingSlots<D> s = device_slots<D>(slots);
  const D* g = reinterpret_cast<const D*>(grad);
  constexpr int kThreads = TrainingConfig::kThreads;
  dispatch_training_op(op, [&](auto tag) {
    constexpr TrainingOp kOp = decltype(tag)::value;
    if constexpr (kOp == TrainingOp::kRowwiseAdagrad) {
      const int64_t rows = row_width > 0 ? n / row_width : 0;
      if (rows == 0) return;
      launch_kernel(rowwise_dense_kernel<C, D>, grid_for(rows, kThreads), kThreads, 0, stream, p, s,
                    g, rows, row_width);
    } else {
      launch_kernel(dense_kernel<kOp, C, D>, grid_for(n, kThreads), kThreads, 0, stream, p, s, g,
                    n);
    }
  });
}

template <typename T, typename Index>
void apply_sparse(TrainingOp op, const TrainingHyper& hyper, const TrainingSlots<T>& slots,
                  int64_t rows, int64_t row_width, const Index* indices, int64_t num_indices,
                  const T* grad, bool /*deterministic*/, const ScratchAllocator& scratch,
                  cudaStream_t stream, const IndexCheck* check) {
  // compat.v1 sparse Adam decays every row, even for a batch without rows.
  if (rows == 0 || row_width == 0 || (num_indices == 0 && op != TrainingOp::kAdam)) return;
  if (num_indices >= scatter_internal::ScatterConfig::kMaxSortItems) {
    throw InvalidArgumentError("sparse training op: " + std::to_string(num_indices) +
                               " indices on a GPU (at most 2^31 - 1)");
  }
  using D = cuda_t<T>;
  using C = training_compute_t<D>;
  const TrainingParams<C> p = training_params<D, C>(hyper);
  const TrainingSlots<D> s = device_slots<D>(slots);
  const D* g = reinterpret_cast<const D*>(grad);
  const int64_t n = num_indices;
  const size_t sort_bytes = n > 0 ? scatter_internal::sort_scratch_bytes(n, rows) : 0;
  const size_t map_bytes = op == TrainingOp::kAdam ? static_cast<size_t>(rows) * 8 : 0;
  Scratch memory(scratch, sort_bytes + map_bytes);
  const SortedRun run = n > 0 ? scatter_internal::sort_indices(
                                    indices, n, rows, static_cast<char*>(memory.get()) + map_bytes,
                                    sort_bytes, stream)
                              : SortedRun{nullptr, nullptr, false};
  constexpr int kThreads = TrainingConfig::kThreads;
  dispatch_training_op(op, [&](auto tag) {
    constexpr TrainingOp kOp = decltype(tag)::value;
    if constexpr (kOp == TrainingOp::kAdam) {
      auto* run_of_row = static_cast<int64_t*>(memory.get());
      VARSTATE_CUDA_CHECK(cudaMemsetAsync(run_of_row, 0xFF, map_bytes, stream));
      if (n > 0) {
        launch_kernel(mark_runs_kernel, grid_for(n, kThreads), kThreads, 0, stream, run, n,
                      run_of_row, check);
      }
      launch_kernel(adam_sparse_kernel<C, D>, grid_for(rows * row_width, kThreads), kThreads, 0,
                    stream, p, s, run, n, run_of_row, g, rows, row_width, check);
    } else if constexpr (kOp == TrainingOp::kRowwiseAdagrad) {
      launch_kernel(rowwise_sparse_kernel<C, D>, grid_for(n, kThreads), kThreads, 0, stream, p, s,
                    run, n, g, row_width, check);
    } else if constexpr (kOp != TrainingOp::kGradientDescent) {
      launch_kernel(sparse_kernel<kOp, C, D>, row_grid(n), row_threads(row_width), 0, stream, p, s,
                    run, n, g, row_width, check);
    }
  });
}

#define VARSTATE_INSTANTIATE(E, T)                                                                 \
  template void apply_dense<T>(TrainingOp, const TrainingHyper&, const TrainingSlots<T>&,          \
                               const T*, int64_t, int64_t, cudaStream_t);                          \
  template void apply_sparse<T, int32_t>(                                                          \
      TrainingOp, const TrainingHyper&, const TrainingSlots<T>&, int64_t, int64_t, const int32_t*, \
      int64_t, const T*, bool, const ScratchAllocator&, cudaStream_t, const IndexCheck*);          \
  template void apply_sparse<T, int64_t>(                                                          \
      TrainingOp, const TrainingHyper&, const TrainingSlots<T>&, int64_t, int64_t, const int64_t*, \
      int64_t, const T*, bool, const ScratchAllocator&, cudaStream_t, const IndexCheck*);
VARSTATE_FOR_EACH_TRAINING_TYPE(VARSTATE_INSTANTIATE)
#undef VARSTATE_INSTANTIATE

}  // namespace varstate::kernels::cuda
