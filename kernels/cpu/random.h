// CPU random number kernels: the values of TensorFlow's stateful random ops
// (RandomUniform, RandomUniformInt, RandomStandardNormal, TruncatedNormal,
// with the Python layer's scaling) for a generator seeded with (seed, seed2).
//
// Each function fills out[0, n) with elements [first_element,
// first_element + n) of the row-major flattened tensor the op would produce,
// so a shard of a partitioned variable gets exactly its slice of the full
// tensor. Element values depend only on (seed, seed2, element index): not on
// the thread count, nor on how the tensor is split into calls, and they are
// bit-identical to the CUDA kernels of kernels/cuda/random.h. The mapping of
// elements to Philox counters is described in kernels/random_distributions.h.
//
// Work above a size threshold is spread over the Eigen thread pool; each
// call returns when `out` is filled. out must not be shared with another
// call running at the same time. first_element + n must not exceed 2^62.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace varstate::kernels::cpu {

// Floats (half, bfloat16, float, double): U[0, 1) * (maxval - minval) +
// minval, each operation rounded to T. Integers (int32_t, int64_t): uniform
// in [minval, maxval), which must be non-empty (minval < maxval).
template <typename T>
void random_uniform(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2,
                    T minval, T maxval);

// N(0, 1) * stddev + mean (Box-Muller). half, bfloat16, float, double.
template <typename T>
void random_normal(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2, T mean,
                   T stddev);

// N(0, 1) redrawn beyond 2 standard deviations, * stddev + mean. half,
// bfloat16, float, double.
template <typename T>
void truncated_normal(T* out, int64_t n, int64_t first_element, uint64_t seed, uint64_t seed2,
                      T mean, T stddev);

}  // namespace varstate::kernels::cpu
