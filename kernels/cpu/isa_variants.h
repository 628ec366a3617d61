// A loop built once per x86 instruction set and picked at run time
// (cpu_isa): the CPU kernels are built for the baseline (x86-64: SSE2), and
// their hot loops again for AVX2 and AVX-512 where that pays.
//
// for_cpu_isa(fn) calls fn() from a function compiled for the widest set
// this CPU has. `flatten` inlines fn, and everything it calls that can be
// inlined, into that function, where it is compiled (and vectorized) for
// its target; what stays out of line (library calls, functions the
// compiler will not inline) is the baseline build. A loop built this way
// rounds as the baseline loop does: IEEE operations give the same result
// in any lane width, and neither target enables FMA (GCC's avx512f does not
// imply it), so no multiply-add is fused. (training_ops.cc is built with
// -ffp-contract=off besides.) Which of two NaN operands an operation
// passes on may differ between builds: IEEE 754 leaves it open.
#pragma once

#include "kernels/cpu/cpu_isa.h"

namespace varstate::kernels::cpu {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VARSTATE_ISA_VARIANTS 1
#ifdef __clang__
#define VARSTATE_AVX512_TARGET "avx512f,avx512vl,avx512bw"
#else
#define VARSTATE_AVX512_TARGET "avx512f,avx512vl,avx512bw,prefer-vector-width=512"
#endif

template <typename Fn>
__attribute__((target(VARSTATE_AVX512_TARGET), flatten)) void call_avx512(const Fn& fn) {
  fn();
}
template <typename Fn>
__attribute__((target("avx2"), flatten)) void call_avx2(const Fn& fn) {
  fn();
}

template <typename Fn>
__attribute__((target(VARSTATE_AVX512_TARGET ",f16c"), flatten)) void call_avx512_f16c(
    const Fn& fn) {
  fn();
}
template <typename Fn>
__attribute__((target("avx2,f16c"), flatten)) void call_avx2_f16c(const Fn& fn) {
  fn();
}

// for_cpu_isa for a loop that converts float16 values with F16C inline
// (kernels/cpu/f16c_inline.h), built with F16C added to the set; only
// where the CPU has it (halves_convert_in_hardware(), which is false under
// VARSTATE_CPU_ISA=baseline).
template <typename Fn>
void for_f16c_isa(const Fn& fn) {
  if (cpu_isa() == Isa::kAvx512) return call_avx512_f16c(fn);
  call_avx2_f16c(fn);
}
#endif

template <typename Fn>
void for_cpu_isa(const Fn& fn) {
#ifdef VARSTATE_ISA_VARIANTS
  switch (cpu_isa()) {
    case Isa::kAvx512:
      return call_avx512(fn);
    case Isa::kAvx2:
      return call_avx2(fn);
    case Isa::kBaseline:
      break;
  }
#endif
  fn();
}

}  // namespace varstate::kernels::cpu
