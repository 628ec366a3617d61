#include "kernels/cuda/matmul.h"

#include <cublas_v2.h>

#include <climits>
#include <map>
#include <mutex>
#include <string>

#include "kernels/cuda/cuda_types.cuh"
#include "varstate/error.h"

namespace varstate::kernels::cuda {
namespace {

struct MatmulConfig {
  static constexpr int kTile = 16;  // int32 kernel: kTile x kTile threads per block
};

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, int device) {
  throw InternalError(std::string(call) + " failed on GPU:" + std::to_string(device) + ": " +
                      cublasGetStatusString(status));
}

#define VARSTATE_CUBLAS_CHECK(call, device)                       \
  do {                                                            \
    cublasStatus_t varstate_cublas_status_ = (call);              \
    if (varstate_cublas_status_ != CUBLAS_STATUS_SUCCESS)         \
      throw_cublas_error(varstate_cublas_status_, #call, device); \
  } while (0)

// One cuBLAS handle per device, bound to that device's stream. Handles live
// until exit (destroying them at static destruction races the driver).
cublasHandle_t cublas_handle(int device, cudaStream_t stream) {
  static std::mutex mu;
  static auto* handles = new std::map<int, cublasHandle_t>();
  std::lock_guard lock(mu);
  auto it = handles->find(device);
  if (it != handles->end()) return it->second;
  cublasHandle_t handle = nullptr;
  VARSTATE_CUBLAS_CHECK(cublasCreate(&handle), device);
  VARSTATE_CUBLAS_CHECK(cublasSetStream(handle, stream), device);
  handles->emplace(device, handle);
  return handle;
}

template <typename T>
struct GemmTypes;
template <>
struct GemmTypes<float> {
  static constexpr cudaDataType_t kData = CUDA_R_32F;
  static constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F;
  using Scale = float;
};
template <>
struct GemmTypes<double> {
  static constexpr cudaDataType_t kData = CUDA_R_64F;
  static constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_64F;
  using Scale = double;
};
template <>
struct GemmTypes<half> {
  static constexpr cudaDataType_t kData = CUDA_R_16F;
  static constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F;
  using Scale = float;
};
template <>
struct GemmTypes<bfloat16> {
  static constexpr cudaDataType_t kData = CUDA_R_16BF;
  static constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F;
  using Scale = float;
};
template <>
struct GemmTypes<complex64> {
  static constexpr cudaDataType_t kData = CUDA_C_32F;
  static constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F;
  using Scale = cuComplex;
};
template <>
struct GemmTypes<complex128> {
  static constexpr cudaDataType_t kData = CUDA_C_64F;
  static constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_64F;
  using Scale = cuDoubleComplex;
};

template <typename S>
S scale_one();
template <>
float scale_one<float>() {
  return 1.f;
}
template <>
double scale_one<double>() {
  return 1.0;
}
template <>
cuComplex scale_one<cuComplex>() {
  return make_cuComplex(1.f, 0.f);
}
template <>
cuDoubleComplex scale_one<cuDoubleComplex>() {
  return make_cuDoubleComplex(1.0, 0.0);
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: pass B
// first and swap m and n; the stored matrices need no copy.
template <typename T>
void gemm(const T* a, const T* b, T* c, int m, int n, int k, bool transpose_a, bool transpose_b,
          int device, cudaStream_t stream) {
  using Types = GemmTypes<T>;
  using S = typename Types::Scale;
  const S one = scale_one<S>();
  const S zero{};
  ::varstate::detail::CudaDeviceGuard guard(device);  // cuBLAS needs its handle's device
  cublasHandle_t handle = cublas_handle(device, stream);
  VARSTATE_CUBLAS_CHECK(
      cublasGemmEx(handle, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                   transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &one, b, Types::kData,
                   transpose_b ? k : n, a, Types::kData, transpose_a ? m : k, &zero, c,
                   Types::kData, n, Types::kCompute, CUBLAS_GEMM_DEFAULT),
      device);
}

// int32: one thread per output element, operands staged through shared
// memory in kTile x kTile tiles. Wrapping arithmetic as on the CPU.
__global__ void matmul_int32_kernel(const int32_t* __restrict__ a, const int32_t* __restrict__ b,
                                    int32_t* __restrict__ c, int64_t m, int64_t n, int64_t k,
                                    bool transpose_a, bool transpose_b) {
  constexpr int kTile = MatmulConfig::kTile;
  __shared__ int32_t ta[kTile][kTile];
  __shared__ int32_t tb[kTile][kTile];
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  uint32_t acc = 0;
  for (int64_t t = 0; t < k; t += kTile) {
    const int64_t ka = t + threadIdx.x, kb = t + threadIdx.y;
    ta[threadIdx.y][threadIdx.x] =
        row < m && ka < k ? a[transpose_a ? ka * m + row : row * k + ka] : 0;
    tb[threadIdx.y][threadIdx.x] =
        kb < k && col < n ? b[transpose_b ? col * k + kb : kb * n + col] : 0;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kTile; ++i) {
      acc += static_cast<uint32_t>(ta[threadIdx.y][i]) * static_cast<uint32_t>(tb[i][threadIdx.x]);
    }
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = static_cast<int32_t>(acc);
}

}  // namespace

template <typename T>
void matmul(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
            bool transpose_b, int device, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, int32_t>) {
    constexpr int kTile = MatmulConfig::kTile;
    if ((m + kTile - 1) / kTile > 65535) {
      throw UnimplementedError("int32 matmul on GPU: " + std::to_string(m) + " rows is too many");
    }
    ::varstate::detail::CudaDeviceGuard guard(device);  // cuBLAS needs its handle's device
    dim3 block(kTile, kTile);
    dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile),
              static_cast<unsigned>((m + kTile - 1) / kTile));
    launch_kernel(matmul_int32_kernel, grid, block, 0, stream, a, b, c, m, n, k, transpose_a,
                  transpose_b);
  } else {
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
      throw UnimplementedError("matmul on GPU: dimensions [" + std::to_string(m) + "," +
                               std::to_string(k) + "] x [" + std::to_string(k) + "," +
                               std::to_string(n) + "] exceed cuBLAS's 32-bit sizes");
    }
    gemm<T>(a, b, c, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), transpose_a,
            transpose_b, device, stream);
  }
}

template void matmul<float>(const float*, const float*, float*, int64_t, int64_t, int64_t, bool,
                            bool, int, cudaStream_t);
template void matmul<double>(const double*, const double*, double*, int64_t, int64_t, int64_t, bool,
                             bool, int, cudaStream_t);
template void matmul<half>(const half*, const half*, half*, int64_t, int64_t, int64_t, bool, bool,
                           int, cudaStream_t);
template void matmul<bfloat16>(const bfloat16*, const bfloat16*, bfloat16*, int64_t, int64_t,
                               int64_t, bool, bool, int, cudaStream_t);
template void matmul<complex64>(const complex64*, const complex64*, complex64*, int64_t, int64_t,
                                int64_t, bool, bool, int, cudaStream_t);
template void matmul<complex128>(const complex128*, const complex128*, complex128*, int64_t,
                                 int64_t, int64_t, bool, bool, int, cudaStream_t);
template void matmul<int32_t>(const int32_t*, const int32_t*, int32_t*, int64_t, int64_t, int64_t,
                              bool, bool, int, cudaStream_t);

}  // namespace varstate::kernels::cuda
