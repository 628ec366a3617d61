// CUDA sparse row updates (scatter_update / add / sub / mul / div / min /
// max), the device-side bounds check that gates them, and the deterministic
// sort-and-reduce path. Everything is enqueued on the given stream; no call
// synchronizes with the host.
//
// Atomic path: a group of lanes (up to a warp) per update row, 16-byte
// vector accesses when the row allows. add/sub use the hardware atomics the
// type has (float4, double, 32/64-bit integers, half2/bfloat162, complex per
// component), min/max those of 32/64-bit integers; mul/div, float min/max
// and the 8/16-bit integers use compare-and-swap loops (16-bit types on the
// element, 8-bit types on their aligned 16-bit halfword, complex128 on 16
// bytes). Duplicates all take effect;
// their order (so float rounding, and which update wins, chosen per element,
// not per row) is unspecified. Hardware float32/half atomics may flush
// subnormal results to zero.
//
// Deterministic path: (index, position) pairs are radix-sorted (CUB) and one
// lane group per distinct index applies its updates in their original order
// and writes the row once; a very hot index is folded by a single lane group,
// several updates in flight at a time. The result is identical run to run
// and equals the CPU kernel's (a serial loop in index order) bit for bit, for
// every op and type except complex mul/div (device and host complex
// arithmetic may round differently) and NaN payloads (a GPU produces the
// canonical NaN, an x86 CPU its default NaN).
//
// Bounds protocol, without host synchronization:
//   1. reset_index_check(check)      -- or memset the IndexCheck to 0xFF
//   2. validate_indices(..., check)  -- records the first bad position
//      (validate_nonzero(..., check) -- integer kDiv: records a zero divisor)
//   3. scatter(..., check, ...)      -- writes nothing if one was recorded
//   4. later, after any synchronizing call, the runtime reads *check.
// An out-of-range index thus leaves the table exactly as it was.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "kernels/common.h"

namespace varstate::kernels::cuda {

// Device-memory record of the first out-of-range index. 0xFF in every byte
// is the reset state (reset_index_check writes it; so may a plain memset).
struct IndexCheck {
  static constexpr uint64_t kNone = ~uint64_t{0};
  // first_bad_position after validate_nonzero found a zero (and no bad index
  // had been recorded); bad_index then holds the position of the first zero.
  static constexpr uint64_t kZeroDivisor = kNone - 1;
  // Smallest position i with indices[i] outside [0, rows); kNone if none.
  uint64_t first_bad_position;
  // indices[first_bad_position] when that is set (written by the last block
  // of validate_indices, so it is valid once validate_indices has finished).
  int64_t bad_index;
  // validate_indices's count of finished blocks; back at 0xFFFFFFFF after
  // each call.
  uint32_t blocks_done;
  uint32_t reserved;
};

// Scratch memory for the deterministic path. `allocate` returns device
// memory of at least `bytes` bytes, 256-byte aligned, usable by work that is
// enqueued on the stream afterwards; `deallocate` must be stream-ordered (the
// memory is reused only after the work enqueued before it has finished) —
// as Device::allocate / Device::deallocate are. Both may throw; scatter frees
// what it allocated before it returns or throws.
struct ScratchAllocator {
  std::function<void*(size_t bytes)> allocate;
  std::function<void(void* ptr)> deallocate;
};

// Enqueues the reset of *check (device memory) to "no bad index".
void reset_index_check(IndexCheck* check, cudaStream_t stream);

// Enqueues the bounds check of indices[0, n) (device memory) against
// [0, rows): lowers check->first_bad_position to the first bad position and
// sets check->bad_index. One call per reset_index_check. One pass over the
// indices; no host synchronization. Defined for Index in {int32_t, int64_t}.
// Throws InternalError if the launch fails. With `marks` (one byte per row,
// device memory: a variable's dirty rows, runtime/dirty_rows.h),
// also sets marks[indices[i]] = 1 for each index in range, in the same pass.
template <typename Index>
void validate_indices(const Index* indices, int64_t n, int64_t rows, IndexCheck* check,
                      cudaStream_t stream, uint8_t* marks = nullptr);

// Enqueues the check that none of values[0, n) is zero, for the integer
// divisors of kDiv (device memory; elements of `elem_bytes` in {1, 2, 4, 8}
// bytes, an integer being zero when all its bytes are). Run after
// validate_indices and before scatter, with the same check: unless a bad
// index is already recorded, a zero sets first_bad_position to kZeroDivisor
// and bad_index to the smallest zero position, so the scatter writes
// nothing. No host synchronization. Throws InternalError if the launch fails.
void validate_nonzero(const void* values, int64_t n, int elem_bytes, IndexCheck* check,
                      cudaStream_t stream);

// Enqueues, for i in [0, num_indices):
//   table[indices[i], c] = op(table[indices[i], c], u(i, c)),  c in [0, row_width)
// where u(i, c) = updates[i * row_width + c], or updates[0] for every i and c
// when updates_scalar. All pointers are device memory of the stream's device;
// `table` (rows x row_width, row-major) is aligned to its element size, and
// updates do not overlap it. 8-bit types are updated with compare-and-swap
// on whole 16-bit halfwords (so are 16-byte row vectors of 8/16-bit types, on
// 32-bit words): the table's allocation must extend to the next even address
// past its last byte (Device::allocate pads every allocation to 16 bytes),
// and no other work may write the bytes that share a halfword with the table
// while the call runs (true of separate allocations).
//
// `check` (may be null): when it records a bad index, every kernel of the
// call returns before writing, so the table is left unchanged. Without a
// check every index must be in [0, rows).
// `deterministic`: take the sorted path (see above); `scratch` provides its
// memory (about 16 bytes per index plus CUB's temporary storage). The atomic
// path allocates nothing.
//
// Preconditions as for the CPU kernel: for kDiv on an integer type no update
// is 0; op is not kMin/kMax for complex T (InvalidArgumentError). Integer
// +, -, * wrap around. Defined for every numeric storage type T and Index in
// {int32_t, int64_t}. Throws InternalError if a launch fails.
template <typename T, typename Index>
void scatter(ScatterOp op, T* table, int64_t rows, int64_t row_width, const Index* indices,
             int64_t num_indices, const T* updates, bool updates_scalar, bool deterministic,
             const IndexCheck* check, const ScratchAllocator& scratch, cudaStream_t stream);

}  // namespace varstate::kernels::cuda
