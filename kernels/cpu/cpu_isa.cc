#include "kernels/cpu/cpu_isa.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace varstate::kernels::cpu {

Isa cpu_isa() {
  static const Isa isa = [] {
    Isa best = Isa::kBaseline;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw")) {
      best = Isa::kAvx512;
    } else if (__builtin_cpu_supports("avx2")) {
      best = Isa::kAvx2;
    }
#endif
    const char* cap = std::getenv("VARSTATE_CPU_ISA");
    if (cap != nullptr && std::strcmp(cap, "baseline") == 0) return Isa::kBaseline;
    if (cap != nullptr && std::strcmp(cap, "avx2") == 0) return std::min(best, Isa::kAvx2);
    return best;
  }();
  return isa;
}

}  // namespace varstate::kernels::cpu
