#include "base/cuda_check.h"

#include <string>

#include "varstate/error.h"

namespace varstate::detail {

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  int device = -1;
  cudaGetDevice(&device);
  cudaGetLastError();  // clear a sticky non-fatal error so later calls work
  std::string msg = std::string("CUDA call ") + call + " failed at " + file + ":" +
                    std::to_string(line) + " on GPU:" + std::to_string(device) + ": " +
                    cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  if (err == cudaErrorMemoryAllocation) throw ResourceExhaustedError(msg);
  throw InternalError(msg);
}

int cuda_exchange_device(int index) {
  int previous = 0;
  VARSTATE_CUDA_CHECK(cudaGetDevice(&previous));
  if (previous != index) VARSTATE_CUDA_CHECK(cudaSetDevice(index));
  return previous;
}

}  // namespace varstate::detail
