#include "kernels/cpu/cpu_isa.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

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

Isa cpu_isa_with_fma() {
  static const Isa isa = [] {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("fma")) return Isa::kBaseline;
    switch (cpu_isa()) {
      case Isa::kAvx512:
        return __builtin_cpu_supports("avx512dq") ? Isa::kAvx512 : Isa::kAvx2;
      case Isa::kAvx2:
        return Isa::kAvx2;
      case Isa::kBaseline:
        break;
    }
#endif
    return Isa::kBaseline;
  }();
  return isa;
}

bool cpu_amx_allowed() {
  static const bool allowed = [] {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    // "baseline" and "avx2" already cap cpu_isa_with_fma() below AVX-512.
    const char* cap = std::getenv("VARSTATE_CPU_ISA");
    if (cap != nullptr && std::strcmp(cap, "avx512") == 0) return false;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
    const bool tile = (edx >> 24) & 1, bf16 = (edx >> 22) & 1;
    return tile && bf16 && cpu_isa_with_fma() == Isa::kAvx512;
#else
    return false;
#endif
  }();
  return allowed;
}

}  // namespace varstate::kernels::cpu
