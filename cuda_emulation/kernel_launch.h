// Kernel execution on emulated GPUs: the launch that kernels/cuda/launch.cuh
// calls in the emulated build, and the built-in variables and barrier that
// emulated device code sees (cuda_emulation/prelude.h maps threadIdx,
// __syncthreads(), ... onto them).
//
// A launch binds the kernel's arguments by value at the call, as a GPU
// launch does, and enqueues the grid on the stream (cuda_emulation/stream.h).
// When the stream reaches it, the grid's blocks run in parallel on a pool of
// host threads; each block runs all of its threads on one host thread, each
// emulated thread a fiber with its own stack. A thread runs until it
// reaches __syncthreads() or returns; when every thread of the block has,
// the waiting ones resume, in the reverse order of the previous phase. So a
// missing __syncthreads() lets a thread read shared memory its neighbours
// have not written yet (or already overwrote), and the result is wrong, as it
// may be on a GPU.
#pragma once

#include <cuda_runtime_api.h>
#include <vector_types.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace varstate::cuda_emulation {

// The running emulated thread's built-in variables. Valid inside a kernel.
const uint3& thread_index();
const uint3& block_index();
const dim3& block_dim();
const dim3& grid_dim();
// The block's dynamic shared memory (the launch's shared_bytes), filled with
// the uninitialized-memory pattern when the block starts.
void* dynamic_shared_memory();

// __syncthreads(): waits until every thread of the block has reached a
// barrier or returned.
void sync_threads();

// Ends the kernel with a device fault: the grid's remaining blocks do not
// run, and the device reports cudaErrorLaunchFailure from then on (a sticky
// error, as a GPU's). `why` is printed to stderr.
[[noreturn]] void trap(const char* why);

// Traps unless [p, p + bytes) is aligned to `bytes` and lies in live
// emulated device memory: what an atomic on a GPU needs.
void check_atomic_address(const void* p, size_t bytes);

using KernelBody = std::function<void()>;

// Validates the configuration (as cudaLaunchKernel: block of at most 1024
// threads, grid dimensions in range, a stream of the current device) and
// enqueues `body` to run once per thread of the grid. A bad configuration
// sets the error that cudaGetLastError() returns and runs nothing.
void launch_grid(const void* kernel, dim3 grid, dim3 block, size_t shared_bytes,
                 cudaStream_t stream, KernelBody body);

template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
            cudaStream_t stream, Args&&... args) {
  auto bound = std::make_shared<std::tuple<std::decay_t<Params>...>>(std::forward<Args>(args)...);
  launch_grid(reinterpret_cast<const void*>(kernel), grid, block, shared_bytes, stream,
              [kernel, bound] { std::apply(kernel, *bound); });
}

}  // namespace varstate::cuda_emulation
