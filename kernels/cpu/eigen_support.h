// Eigen glue for the CPU kernels: the process-wide Eigen thread pool and the
// mapping from varstate storage types to Eigen's arithmetic types. When to
// split work over the pool: kernels/cpu/parallel.h.
#pragma once

#define EIGEN_USE_THREADS
#include <cstdint>
#include <unsupported/Eigen/CXX11/Tensor>

#include "kernels/cpu/parallel.h"
#include "varstate/dtype.h"

namespace varstate::kernels::cpu {

// Eigen device backed by a pool of hardware_concurrency() threads (override
// with VARSTATE_CPU_THREADS). Created on first use; thread-safe.
const Eigen::ThreadPoolDevice& eigen_device();

// Work below this many bytes runs on the calling thread: waking the pool
// costs more than it saves. For kernels with no measured threshold of their
// own (ParallelThresholds in kernels/cpu/parallel.h).
inline constexpr int64_t kParallelBytesThreshold = 256 * 1024;

template <typename T>
struct EigenTypeOf {
  using type = T;
};
template <>
struct EigenTypeOf<half> {
  using type = Eigen::half;
};
template <>
struct EigenTypeOf<bfloat16> {
  using type = Eigen::bfloat16;
};
template <typename T>
using eigen_t = typename EigenTypeOf<T>::type;

static_assert(sizeof(Eigen::half) == sizeof(half));
static_assert(sizeof(Eigen::bfloat16) == sizeof(bfloat16));

}  // namespace varstate::kernels::cpu
