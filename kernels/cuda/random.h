// CUDA random number kernels: the values of TensorFlow's stateful random ops
// (RandomUniform, RandomUniformInt, RandomStandardNormal, TruncatedNormal,
// with the Python layer's scaling) for a generator seeded with (seed, seed2).
//
// Same contract as kernels/cpu/random.h, and bit-identical results: each
// function fills out[0, n) with elements [first_element, first_element + n)
// of the row-major flattened tensor, whatever the grid and block sizes.
// out is device memory of the stream's device, aligned to sizeof(T);
// 16-byte stores are used where the group layout and out's alignment allow.
// Asynchronous: returns once the work is enqueued on `stream`. Throws
// InternalError if the launch fails. first_element + n must not exceed 2^62.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace varstate::kernels::cuda {

// Floats (half, bfloat16, float, double): U[0, 1) * (maxval - minval) +
// minval, each operation rounded to T. Integers (int32_t, int64_t): uniform
// in [minval, maxval), which must be non-empty (minval < maxval).
template <typename T>
void random_uniform(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2,
                    T minval, T maxval, cudaStream_t stream);

// N(0, 1) * stddev + mean (Box-Muller). half, bfloat16, float, double.
template <typename T>
void random_normal(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2, T mean,
                   T stddev, cudaStream_t stream);

// N(0, 1) redrawn beyond 2 standard deviations, * stddev + mean. half,
// bfloat16, float, double.
template <typename T>
void truncated_normal(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2,
                      T mean, T stddev, cudaStream_t stream);

// Which rows of `out` the keyed-row fills below write, for i in [0, n):
// row slots[i] (kSlots: new rows of a table's arena; the slots distinct),
// or row i where slots[i] is negative and none where it is not (kAbsent:
// the rows of a lookup's output whose keys the index did not find).
enum class RowsAt {
  kSlots,
  kAbsent
};

// The initial rows of a hash-keyed table (runtime/keyed_table.h): the row
// of i (see RowsAt) of `out` (rows of `width` elements) gets elements
// [0, width) of the op's tensor for the seeds (seed, seed2 + keys[i]),
// bit for bit what the CPU op fills for those seeds. `keys` and `slots`
// are device memory. Floats only.
template <typename T>
void random_uniform_rows(T* out, int64_t width, const int64_t* keys, const int64_t* slots,
                         int64_t n, uint64_t seed, uint64_t seed2, T minval, T maxval,
                         cudaStream_t stream, RowsAt at = RowsAt::kSlots);
template <typename T>
void random_normal_rows(T* out, int64_t width, const int64_t* keys, const int64_t* slots, int64_t n,
                        uint64_t seed, uint64_t seed2, T mean, T stddev, cudaStream_t stream,
                        RowsAt at = RowsAt::kSlots);
template <typename T>
void truncated_normal_rows(T* out, int64_t width, const int64_t* keys, const int64_t* slots,
                           int64_t n, uint64_t seed, uint64_t seed2, T mean, T stddev,
                           cudaStream_t stream, RowsAt at = RowsAt::kSlots);
// The row of i (see RowsAt) of `out` set to `value` in every element.
template <typename T>
void constant_rows(T* out, int64_t width, const int64_t* slots, int64_t n, T value,
                   cudaStream_t stream, RowsAt at = RowsAt::kSlots);

}  // namespace varstate::kernels::cuda
