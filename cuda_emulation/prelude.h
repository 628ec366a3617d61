// Force-included (-include) into every kernels/cuda/*.cu file of the
// emulated build (VARSTATE_CUDA=EMULATE), which the host C++ compiler
// compiles as ordinary C++. It gives device code what nvcc would:
//  - the CUDA headers the kernels use (runtime API, __half, __nv_bfloat16,
//    libcu++ complex), included first, as a host compiler sees them;
//  - then __CUDACC__ and __CUDA_ARCH__ (VARSTATE_EMULATED_CUDA_ARCH), so that
//    device code takes its device branches: the emulated code is the code
//    that runs on a GPU of that architecture;
//  - the built-in variables (threadIdx, blockIdx, blockDim, gridDim) of the
//    emulated thread that runs, __syncthreads, __threadfence, __trap, __ldg,
//    per-block __shared__ memory, the float intrinsics, and every atomic the
//    kernels use at its real width (cuda_emulation/atomics.h).
// Nothing here is compiled into the library for real GPUs.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cuda/std/complex>

#include "cuda_emulation/include/cub/device/device_radix_sort.cuh"
#include "cuda_emulation/kernel_launch.h"

#ifndef VARSTATE_EMULATED_CUDA_ARCH
#error "VARSTATE_EMULATED_CUDA_ARCH (e.g. 900) must be defined by the build"
#endif
#define __CUDACC__ 1
#define __CUDA_ARCH__ VARSTATE_EMULATED_CUDA_ARCH

// Per block: each block runs all its threads on one host thread, one block
// at a time (cuda_emulation/kernel_launch.h), so a thread_local is the
// block's.
#undef __shared__
#define __shared__ static thread_local
#undef __launch_bounds__
#define __launch_bounds__(...)

#define threadIdx (::varstate::cuda_emulation::thread_index())
#define blockIdx (::varstate::cuda_emulation::block_index())
#define blockDim (::varstate::cuda_emulation::block_dim())
#define gridDim (::varstate::cuda_emulation::grid_dim())

inline void __syncthreads() { ::varstate::cuda_emulation::sync_threads(); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
[[noreturn]] inline void __trap() { ::varstate::cuda_emulation::trap("__trap() called"); }
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}

// Bit casts and correctly rounded arithmetic: one IEEE operation each (the
// .cu files are compiled with -ffp-contract=off, as nvcc runs --fmad=false).
inline unsigned int __float_as_uint(float x) { return std::bit_cast<unsigned int>(x); }
inline float __uint_as_float(unsigned int u) { return std::bit_cast<float>(u); }
inline long long __double_as_longlong(double x) { return std::bit_cast<long long>(x); }
inline double __longlong_as_double(long long u) { return std::bit_cast<double>(u); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }

#include "cuda_emulation/atomics.h"
