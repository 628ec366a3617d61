#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "kernels/cpu/eigen_support.h"

namespace varstate::kernels::cpu {
namespace {

int pool_size() {
  if (const char* env = std::getenv("VARSTATE_CPU_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

}  // namespace

const Eigen::ThreadPoolDevice& eigen_device() {
  static auto* pool = new Eigen::ThreadPool(pool_size());  // lives until exit
  static auto* device = new Eigen::ThreadPoolDevice(pool, pool->NumThreads());
  return *device;
}

}  // namespace varstate::kernels::cpu
