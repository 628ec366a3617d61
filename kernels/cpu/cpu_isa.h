// The widest x86 instruction set the CPU kernels built for several
// (the dense training loops, the bounds check) may use on this machine.
#pragma once

namespace varstate::kernels::cpu {

enum class Isa {
  kBaseline,  // the build's target (x86-64: SSE2), and every non-x86 CPU
  kAvx2,
  kAvx512,  // AVX-512 F, VL and BW
};

// What the CPU supports, capped by the environment variable
// VARSTATE_CPU_ISA: "baseline" or "avx2" (any other value caps nothing).
// Read once; the tests run the narrower variants that way.
Isa cpu_isa();

}  // namespace varstate::kernels::cpu
