// What the emulated CUB and cuBLAS (and the runtime API) build on: work
// enqueued on an emulated stream, and the emulated device memory. Internal
// to cuda_emulation/ and its CUB header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace varstate::cuda_emulation {

// The byte uninitialized emulated device memory holds (fresh allocations,
// dynamic shared memory, CUB's temporary storage after a sort): 0xCBCBCBCB
// is -2.67e7 as a float, a large negative int, never zero.
inline constexpr unsigned char kUninitializedByte = 0xCB;

// Enqueues `fn` on `stream` (0: the current device's legacy default
// stream), in stream order; it runs on the stream's worker with device
// memory accessible. Returns cudaErrorInvalidResourceHandle for an unknown
// stream, the device's sticky error after a fault.
cudaError_t enqueue_device_work(cudaStream_t stream, std::function<void()> fn);

// True if [p, p + bytes) lies inside one live emulated device allocation,
// one that no cudaFree(Async) has been called for: what work enqueued now
// may use.
bool is_device_range(const void* p, size_t bytes);
// The same, counting allocations whose stream-ordered free is enqueued but
// has not run yet: what running work may use. On success, the allocation's
// [begin, end) when `begin` and `end` are given.
bool is_mapped_device_range(const void* p, size_t bytes, uintptr_t* begin = nullptr,
                            uintptr_t* end = nullptr);

// Records `error` as the result cudaGetLastError() returns next, and
// returns it.
cudaError_t set_last_error(cudaError_t error);

}  // namespace varstate::cuda_emulation
