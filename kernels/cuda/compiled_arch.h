// What the CUDA kernels may use follows the virtual architecture their code
// was compiled for, not the compute capability of the device that runs
// them: a build without sm_90 code runs on an H100 from older PTX,
// JIT-compiled, in which the device code saw __CUDA_ARCH__ < 900 and has no
// 16-byte atomicCAS. Device code tests __CUDA_ARCH__; the host asks the
// runtime which code a kernel runs as on the current device
// (cudaFuncAttributes::ptxVersion) and decides with the same threshold.
// Plain C++, so that CPU tests check the decision.
#pragma once

namespace varstate::kernels::cuda {

// The first virtual architecture (major * 10 + minor) with 16-byte
// atomicCAS.
inline constexpr int kCas128PtxVersion = 90;

// True if kernel code compiled for virtual architecture `ptx_version`
// (major * 10 + minor, as cudaFuncAttributes::ptxVersion reports it; 0 when
// unknown) has 16-byte compare-and-swap.
constexpr bool ptx_has_cas128(int ptx_version) { return ptx_version >= kCas128PtxVersion; }

}  // namespace varstate::kernels::cuda
