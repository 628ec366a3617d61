// Runs of float16 values to and from float, with the x86 F16C instructions
// where the CPU has them (every CPU with AVX2 does): 8 values an
// instruction, against about a dozen integer operations a value for the
// portable conversions (kernels/host16.h), which made float16's element-wise
// ops and casts compute-bound at half the memory speed bfloat16 reaches.
//
// The values are the portable conversions' (and varstate/dtype.h's): exact
// widening, rounding to nearest even, overflow to infinity, subnormals kept;
// only a NaN's payload may differ (F16C keeps the payload's high bits and
// quiets a signaling NaN), but in combine_halves_f16c, which makes every
// NaN result the portable one. VARSTATE_CPU_ISA=baseline (kernels/cpu/cpu_isa.h)
// turns F16C off with the other wide instructions.
#pragma once

#include <cstdint>

#include "varstate/dtype.h"

namespace varstate::kernels::cpu {

// out[i] = float(in[i]) for i in [0, n).
void widen_halves(const half* in, float* out, int64_t n);
// out[i] = half(in[i]) for i in [0, n).
void round_to_halves(const float* in, half* out, int64_t n);

// round_to_halves, but every NaN made the quiet NaN of its sign (0x7e00 or
// 0xfe00) as the portable conversion makes it, so that the bits are
// kernels/host16.h's to the last one whatever the CPU (the float16
// training ops' blocks, kernels/cpu/training_ops.cc).
void round_to_halves_portable_nans(const float* in, half* out, int64_t n);

// Whether widen_halves and the rounding functions run on F16C here (not
// with VARSTATE_CPU_ISA=baseline): where they do not, a loop that converts
// element by element inline is as fast as going through them.
bool halves_convert_in_hardware();

// dst[i] = dst[i] + y or dst[i] - y (subtract) for i in [0, n), y = src[i],
// or src[0] when src_is_scalar: in float, rounded once (assign_add and
// assign_sub of float16), in one pass over memory.
void add_to_halves(half* dst, const half* src, int64_t n, bool subtract, bool src_is_scalar);

// The element-wise ops float16 runs in one pass with F16C.
enum class HalfBinaryOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMaximum,
  kMinimum
};

// out[i] = op(x, y) for i in [0, n), x = a[i] (a[0] when a_is_scalar), y
// likewise from b: widened, computed in float, rounded once, as
// kernels/elementwise_functors.h's functors (maximum and minimum pass a
// NaN on: x if x is NaN or x > y, else y). Converts 8 values an
// instruction in one loop over memory. Returns false, writing nothing,
// when the CPU has no F16C (or VARSTATE_CPU_ISA=baseline): the caller
// computes the op itself.
bool binary_halves_f16c(HalfBinaryOp op, const half* a, bool a_is_scalar, const half* b,
                        bool b_is_scalar, half* out, int64_t n);

// dst[i] = op(dst[i], y) for i in [0, n), y = src[i] (src[0] when
// src_is_scalar), for op kAdd, kSub, kMul or kDiv: widened, computed in
// float, rounded once, a NaN result made the quiet NaN of its sign (0x7e00
// or 0xfe00) as the portable conversion makes it, so that the bits are
// kernels/host16.h's to the last one (the 16-bit scatters' row update,
// kernels/cpu/scatter_internal.h). Returns false, writing nothing, when the
// CPU has no F16C (or VARSTATE_CPU_ISA=baseline), or for another op.
bool combine_halves_f16c(HalfBinaryOp op, half* dst, const half* src, bool src_is_scalar,
                         int64_t n);

// Elements per block for the kernels that convert float16 runs into an
// on-stack float buffer and compute on it. Small, so that the operands'
// reads stay interleaved (the memory system keeps several streams in
// flight, not one run after another): c = a + b of 64M float16 on the
// 2-vCPU VM took 15-20 ms with blocks of 256, 25 ms with 1,024 and 31 ms
// with 4,096 (bfloat16's single loop: 16 ms).
inline constexpr int64_t kHalfBlock = 256;

}  // namespace varstate::kernels::cpu
