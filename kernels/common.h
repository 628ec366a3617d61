// Definitions shared by the CPU and CUDA kernels. Kernels work on raw
// buffers: pointers, element counts and (CUDA) a stream; they know nothing of
// Tensor or Variable and do no validation — runtime/ validates shapes, dtypes
// and devices once, then calls a kernel with arguments that are known good.
// Element types are varstate's storage types (base/dtype.h); each backend maps
// them to its native arithmetic type.
#pragma once

#include <cstdint>

// The CUDA runtime's stream handle, declared the way cuda_runtime_api.h does
// so that kernel headers need no CUDA include.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace varstate::kernels {

// Dense element-wise updates: dst[i] = src[i], dst[i] += src[i], dst[i] -= src[i].
enum class DenseUpdateOp { kAssign, kAdd, kSub };

// Sparse row updates: table[indices[i], :] (op)= updates[i, :]. kUpdate
// overwrites; the others combine the row with the update element-wise:
// +, -, *, /, and min/max (table = u < t ? u : t, t < u ? u : t; not defined
// for complex types). Integer +, -, * wrap around.
enum class ScatterOp { kUpdate, kAdd, kSub, kMul, kDiv, kMin, kMax };

}  // namespace varstate::kernels
