// The cuBLAS calls varstate makes (kernels/cuda/matmul.cu), on emulated
// GPUs: handles bound to a stream, and cublasGemmEx as a column-major
// C = alpha op(A) op(B) + beta C, run in stream order, accumulating in the
// compute type (float for 16-bit inputs with CUBLAS_COMPUTE_32F), reading C
// only when beta is not zero. Declared by the toolkit's cublas_v2.h.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <complex>
#include <cstdint>

#include "cuda_emulation/device_work.h"
#include "cuda_emulation/emulator_internal.h"

namespace emu = varstate::cuda_emulation;

struct cublasContext {
  cudaStream_t stream = nullptr;
  int device = 0;
};

namespace {

template <typename T>
struct Element;  // storage type <-> accumulation type
template <>
struct Element<float> {
  using Acc = float;
  static Acc load(float x) { return x; }
  static float store(Acc x) { return x; }
};
template <>
struct Element<double> {
  using Acc = double;
  static Acc load(double x) { return x; }
  static double store(Acc x) { return x; }
};
template <>
struct Element<__half> {
  using Acc = float;
  static Acc load(__half x) { return __half2float(x); }
  static __half store(Acc x) { return __float2half_rn(x); }
};
template <>
struct Element<__nv_bfloat16> {
  using Acc = float;
  static Acc load(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __nv_bfloat16 store(Acc x) { return __float2bfloat16_rn(x); }
};
template <>
struct Element<std::complex<float>> {
  using Acc = std::complex<float>;
  static Acc load(std::complex<float> x) { return x; }
  static std::complex<float> store(Acc x) { return x; }
};
template <>
struct Element<std::complex<double>> {
  using Acc = std::complex<double>;
  static Acc load(std::complex<double> x) { return x; }
  static std::complex<double> store(Acc x) { return x; }
};

template <typename T>
cublasStatus_t gemm(cublasContext* h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, const void* alpha, const void* a, int lda, const void* b, int ldb,
                    const void* beta, void* c, int ldc) {
  using E = Element<T>;
  using Acc = typename E::Acc;
  const int a_rows = ta == CUBLAS_OP_N ? m : k, b_rows = tb == CUBLAS_OP_N ? k : n;
  if (m < 0 || n < 0 || k < 0 || lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) ||
      ldc < std::max(1, m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const Acc al = *static_cast<const Acc*>(alpha), be = *static_cast<const Acc*>(beta);
  const auto* A = static_cast<const T*>(a);
  const auto* B = static_cast<const T*>(b);
  auto* C = static_cast<T*>(c);
  auto at = [=](int i, int p) {
    return E::load(ta == CUBLAS_OP_N ? A[i + static_cast<int64_t>(p) * lda]
                                     : A[p + static_cast<int64_t>(i) * lda]);
  };
  auto bt = [=](int p, int j) {
    return E::load(tb == CUBLAS_OP_N ? B[p + static_cast<int64_t>(j) * ldb]
                                     : B[j + static_cast<int64_t>(p) * ldb]);
  };
  emu::count(&emu::Stats::launches);
  const cudaError_t err = emu::enqueue_device_work(h->stream, [=] {
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        Acc sum{};
        for (int p = 0; p < k; ++p) sum += at(i, p) * bt(p, j);
        T& out = C[i + static_cast<int64_t>(j) * ldc];
        out = E::store(be == Acc{} ? al * sum : al * sum + be * E::load(out));
      }
    }
  });
  return err == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  int device = 0;
  cudaGetDevice(&device);
  if (!emu::valid_device(device)) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new cublasContext{nullptr, device};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    default:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (Atype != Btype || Atype != Ctype) return CUBLAS_STATUS_NOT_SUPPORTED;
  // The current device must be the handle's (cuBLAS launches on it).
  int device = 0;
  cudaGetDevice(&device);
  if (device != handle->device) return CUBLAS_STATUS_EXECUTION_FAILED;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    return gemm<T>(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  };
  switch (Atype) {
    case CUDA_R_32F:
      return computeType == CUBLAS_COMPUTE_32F ? run(float{}) : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUDA_R_64F:
      return computeType == CUBLAS_COMPUTE_64F ? run(double{}) : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUDA_R_16F:
      return computeType == CUBLAS_COMPUTE_32F ? run(__half{}) : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUDA_R_16BF:
      return computeType == CUBLAS_COMPUTE_32F ? run(__nv_bfloat16{}) : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUDA_C_32F:
      return computeType == CUBLAS_COMPUTE_32F ? run(std::complex<float>{})
                                               : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUDA_C_64F:
      return computeType == CUBLAS_COMPUTE_64F ? run(std::complex<double>{})
                                               : CUBLAS_STATUS_NOT_SUPPORTED;
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

}  // extern "C"
