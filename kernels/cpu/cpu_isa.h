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
// VARSTATE_CPU_ISA: "baseline" or "avx2" ("avx512" caps only the AMX
// tiles, below; any other value caps nothing). Read once; the tests run the
// narrower variants that way.
Isa cpu_isa();

// The widest set whose builds with FMA this CPU runs (matmul's GEMM,
// kernels/cpu/matmul_rows.h): cpu_isa() where the CPU also has FMA, and
// for AVX-512 its DQ subset, which those builds are compiled with.
Isa cpu_isa_with_fma();

// Whether kernels may use the AMX tiles: the CPU has AMX-TILE and AMX-BF16,
// cpu_isa_with_fma() is AVX-512, and VARSTATE_CPU_ISA caps nothing (any of
// "baseline", "avx2" or "avx512" turns the tiles off). The kernel's grant
// of the tiles' state is the caller's to ask for (matmul_amx::available).
bool cpu_amx_allowed();

}  // namespace varstate::kernels::cpu
