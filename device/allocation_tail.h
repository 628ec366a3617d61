// The CUDA device's allocation sizes: every allocation is a whole number of
// 16-byte granules, and the bytes between the requested size and the end of
// the last granule are zeroed when the allocation is made. Private to
// device/; the arithmetic is here, free of CUDA, so that CPU tests check it.
//
// Why: kernels update a 1-byte element with a compare-and-swap on the
// aligned 16-bit halfword that holds it (kernels/cuda/scatter_internal.cuh,
// cas_apply), and may read a row with one 16-byte vector. The halfword of the
// last byte of an odd-sized table reaches one byte past the requested size;
// that byte must be allocated (padding) and hold a defined value (zeroing),
// or compute-sanitizer's initcheck reports the CAS's read of it.
#pragma once

#include <cstddef>

namespace varstate::detail {

constexpr size_t kAllocationGranularity = 16;

// `bytes` rounded up to a whole number of granules; 0 when that overflows
// size_t (no such allocation can succeed).
constexpr size_t padded_allocation_bytes(size_t bytes) {
  const size_t rest = bytes % kAllocationGranularity;
  if (rest == 0) return bytes;
  const size_t pad = kAllocationGranularity - rest;
  return bytes > static_cast<size_t>(-1) - pad ? 0 : bytes + pad;
}

// The padding of an allocation of `bytes`: [offset, offset + length), the
// bytes past the requested size up to the end of its last granule.
struct AllocationTail {
  size_t offset;
  size_t length;
};

constexpr AllocationTail allocation_tail(size_t bytes) {
  const size_t padded = padded_allocation_bytes(bytes);
  return {bytes, padded > bytes ? padded - bytes : 0};
}

}  // namespace varstate::detail
