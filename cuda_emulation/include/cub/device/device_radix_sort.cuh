// The emulated build's cub::DeviceRadixSort::SortPairs and cub::DoubleBuffer
// (found before CUB's own header: cuda_emulation/include comes first on the
// include path of the emulated .cu files). The contract is CUB's:
//  - with d_temp_storage null, only temp_storage_bytes is set;
//  - otherwise the pairs are sorted, stably, by bits [begin_bit, end_bit) of
//    the keys (other bits are ignored), in stream order; the result is in
//    the buffers the DoubleBuffers' selectors point to when the call
//    returns, and both buffers of each pair may be overwritten.
// The sort runs as least-significant-digit passes of 8 bits, each from one
// buffer into the other, so the selector flips once per pass, as CUB's
// does per pass; the temporary storage is overwritten with the
// uninitialized pattern after the sort. A temporary storage smaller than
// the size query returned, or a buffer outside emulated device memory, is
// cudaErrorInvalidValue.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda_emulation/device_work.h"

namespace cub {

template <typename T>
struct DoubleBuffer {
  T* d_buffers[2] = {nullptr, nullptr};
  int selector = 0;

  DoubleBuffer() = default;
  DoubleBuffer(T* current, T* alternate) : d_buffers{current, alternate} {}
  T* Current() { return d_buffers[selector]; }
  T* Alternate() { return d_buffers[selector ^ 1]; }
};

struct DeviceRadixSort {
  template <typename KeyT, typename ValueT, typename NumItemsT>
  static cudaError_t SortPairs(void* d_temp_storage, size_t& temp_storage_bytes,
                               DoubleBuffer<KeyT>& d_keys, DoubleBuffer<ValueT>& d_values,
                               NumItemsT num_items, int begin_bit = 0,
                               int end_bit = sizeof(KeyT) * 8, cudaStream_t stream = 0) {
    namespace emu = ::varstate::cuda_emulation;
    static_assert(std::is_unsigned_v<KeyT>, "the emulation sorts unsigned keys");
    constexpr int kDigitBits = 8;
    const int64_t n = static_cast<int64_t>(num_items);
    // One histogram per pass, as temporary storage.
    const size_t needed = 256 + sizeof(uint64_t) * (size_t{1} << kDigitBits);
    if (d_temp_storage == nullptr) {
      temp_storage_bytes = needed;
      return cudaSuccess;
    }
    if (n < 0 || begin_bit < 0 || end_bit > static_cast<int>(sizeof(KeyT) * 8) ||
        begin_bit > end_bit || temp_storage_bytes < needed ||
        !emu::is_device_range(d_temp_storage, needed)) {
      return emu::set_last_error(cudaErrorInvalidValue);
    }
    if (n == 0) return cudaSuccess;
    for (int b = 0; b < 2; ++b) {
      if (!emu::is_device_range(d_keys.d_buffers[b], n * sizeof(KeyT)) ||
          !emu::is_device_range(d_values.d_buffers[b], n * sizeof(ValueT))) {
        return emu::set_last_error(cudaErrorInvalidValue);
      }
    }
    const int passes = (end_bit - begin_bit + kDigitBits - 1) / kDigitBits;
    KeyT* keys[2] = {d_keys.Current(), d_keys.Alternate()};
    ValueT* values[2] = {d_values.Current(), d_values.Alternate()};
    auto* histogram = static_cast<uint64_t*>(d_temp_storage);
    const cudaError_t err = emu::enqueue_device_work(stream, [=] {
      int from = 0;
      for (int pass = 0; pass < passes; ++pass, from ^= 1) {
        const int shift = begin_bit + pass * kDigitBits;
        const int bits = end_bit - shift < kDigitBits ? end_bit - shift : kDigitBits;
        const uint64_t mask = (uint64_t{1} << bits) - 1;
        auto digit = [&](KeyT k) { return (static_cast<uint64_t>(k) >> shift) & mask; };
        std::memset(histogram, 0, sizeof(uint64_t) << kDigitBits);
        for (int64_t i = 0; i < n; ++i) ++histogram[digit(keys[from][i])];
        uint64_t sum = 0;
        for (uint64_t d = 0; d <= mask; ++d) {
          const uint64_t c = histogram[d];
          histogram[d] = sum;
          sum += c;
        }
        for (int64_t i = 0; i < n; ++i) {  // stable: in order of the input
          const uint64_t at = histogram[digit(keys[from][i])]++;
          keys[from ^ 1][at] = keys[from][i];
          values[from ^ 1][at] = values[from][i];
        }
      }
      std::memset(d_temp_storage, emu::kUninitializedByte, needed);
    });
    if (err != cudaSuccess) return err;
    d_keys.selector ^= passes & 1;
    d_values.selector ^= passes & 1;
    return cudaSuccess;
  }
};

}  // namespace cub
