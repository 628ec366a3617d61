// The CUDA atomics that kernels/cuda uses, for emulated device code: each at
// its real width on the real address, so that blocks running in parallel on
// host threads contend as a GPU's do. Floating-point and 16-bit-float
// atomics are compare-and-swap loops on their bits; the 16-byte atomicCAS
// (sm_90) is the host's 16-byte compare-exchange. Every atomic checks that
// its address is aligned to its width and lies in emulated device memory,
// and traps otherwise (a GPU faults: misaligned or illegal address).
// Included by cuda_emulation/prelude.h only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda_emulation/kernel_launch.h"

namespace varstate::cuda_emulation::atomics {

template <typename T>
inline T* checked(T* p) {
  check_atomic_address(p, sizeof(T));
  return p;
}

// The bits of `from` as To (the 16-bit float types are not trivially
// copyable for std::bit_cast).
template <typename To, typename From>
inline To bit_copy(const From& from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(static_cast<void*>(&to), static_cast<const void*>(&from), sizeof(To));
  return to;
}

template <typename T>
inline T cas(T* p, T expected, T desired) {
  T* a = checked(p);
  if constexpr (sizeof(T) == 16) {
    auto e = bit_copy<unsigned __int128>(expected);
    __atomic_compare_exchange_n(reinterpret_cast<unsigned __int128*>(a), &e,
                                bit_copy<unsigned __int128>(desired), false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    return bit_copy<T>(e);
  } else {
    using W = std::conditional_t<sizeof(T) == 2, uint16_t,
                                 std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
    auto e = bit_copy<W>(expected);
    __atomic_compare_exchange_n(reinterpret_cast<W*>(a), &e, bit_copy<W>(desired), false,
                                __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return bit_copy<T>(e);  // the value seen
  }
}

// *p = f(*p) with a compare-and-swap loop on the bits of T; returns the old value.
template <typename T, typename F>
inline T rmw(T* p, F f) {
  using W = std::conditional_t<sizeof(T) == 2, uint16_t,
                               std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
  static_assert(sizeof(T) == sizeof(W));
  W* w = reinterpret_cast<W*>(checked(p));
  W seen = __atomic_load_n(w, __ATOMIC_RELAXED);
  for (;;) {
    const T old = bit_copy<T>(seen);
    const W want = bit_copy<W>(f(old));
    if (__atomic_compare_exchange_n(w, &seen, want, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
      return old;
  }
}

template <typename T>
inline T fetch_add(T* p, T v) {
  return __atomic_fetch_add(checked(p), v, __ATOMIC_SEQ_CST);
}
template <typename T>
inline T fetch_or(T* p, T v) {
  return __atomic_fetch_or(checked(p), v, __ATOMIC_SEQ_CST);
}
template <typename T>
inline T fetch_min(T* p, T v) {
  return rmw(p, [v](T t) { return v < t ? v : t; });
}
template <typename T>
inline T fetch_max(T* p, T v) {
  return rmw(p, [v](T t) { return t < v ? v : t; });
}

}  // namespace varstate::cuda_emulation::atomics

// Integer add, or, min, max, exchange and compare-and-swap.
#define VARSTATE_EMULATED_INTEGER_ATOMICS(T)                                                   \
  inline T atomicAdd(T* p, T v) { return varstate::cuda_emulation::atomics::fetch_add(p, v); } \
  inline T atomicSub(T* p, T v) {                                                              \
    return varstate::cuda_emulation::atomics::fetch_add(p, static_cast<T>(0 - v));             \
  }                                                                                            \
  inline T atomicOr(T* p, T v) { return varstate::cuda_emulation::atomics::fetch_or(p, v); }   \
  inline T atomicMin(T* p, T v) { return varstate::cuda_emulation::atomics::fetch_min(p, v); } \
  inline T atomicMax(T* p, T v) { return varstate::cuda_emulation::atomics::fetch_max(p, v); } \
  inline T atomicExch(T* p, T v) {                                                             \
    return __atomic_exchange_n(varstate::cuda_emulation::atomics::checked(p), v,               \
                               __ATOMIC_SEQ_CST);                                              \
  }                                                                                            \
  inline T atomicCAS(T* p, T compare, T value) {                                               \
    return varstate::cuda_emulation::atomics::cas(p, compare, value);                          \
  }
VARSTATE_EMULATED_INTEGER_ATOMICS(int)
VARSTATE_EMULATED_INTEGER_ATOMICS(unsigned int)
VARSTATE_EMULATED_INTEGER_ATOMICS(long long)
VARSTATE_EMULATED_INTEGER_ATOMICS(unsigned long long)
#undef VARSTATE_EMULATED_INTEGER_ATOMICS

// 16-bit compare-and-swap (sm_70 and later).
inline unsigned short atomicCAS(unsigned short* p, unsigned short compare, unsigned short value) {
  return varstate::cuda_emulation::atomics::cas(p, compare, value);
}

#if VARSTATE_EMULATED_CUDA_ARCH >= 900
// 16-byte compare-and-swap (sm_90): any trivially copyable 16-byte type.
template <typename T, typename = std::enable_if_t<sizeof(T) == 16>>
inline T atomicCAS(T* p, T compare, T value) {
  return varstate::cuda_emulation::atomics::cas(p, compare, value);
}
#endif

inline float atomicAdd(float* p, float v) {
  return varstate::cuda_emulation::atomics::rmw(p, [v](float t) { return t + v; });
}
inline double atomicAdd(double* p, double v) {
  return varstate::cuda_emulation::atomics::rmw(p, [v](double t) { return t + v; });
}
inline __half atomicAdd(__half* p, __half v) {
  return varstate::cuda_emulation::atomics::rmw(
      p, [v](__half t) { return __float2half_rn(__half2float(t) + __half2float(v)); });
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* p, __nv_bfloat16 v) {
  return varstate::cuda_emulation::atomics::rmw(p, [v](__nv_bfloat16 t) {
    return __float2bfloat16_rn(__bfloat162float(t) + __bfloat162float(v));
  });
}
// A pair is one 32-bit atomic: both halves change together.
inline __half2 atomicAdd(__half2* p, __half2 v) {
  return varstate::cuda_emulation::atomics::rmw(p, [v](__half2 t) {
    __half2 r;
    r.x = __float2half_rn(__half2float(t.x) + __half2float(v.x));
    r.y = __float2half_rn(__half2float(t.y) + __half2float(v.y));
    return r;
  });
}
inline __nv_bfloat162 atomicAdd(__nv_bfloat162* p, __nv_bfloat162 v) {
  return varstate::cuda_emulation::atomics::rmw(p, [v](__nv_bfloat162 t) {
    __nv_bfloat162 r;
    r.x = __float2bfloat16_rn(__bfloat162float(t.x) + __bfloat162float(v.x));
    r.y = __float2bfloat16_rn(__bfloat162float(t.y) + __bfloat162float(v.y));
    return r;
  });
}
#if VARSTATE_EMULATED_CUDA_ARCH >= 900
// sm_90's vector atomicAdd: 16-byte aligned, each element added atomically.
inline float4 atomicAdd(float4* p, float4 v) {
  varstate::cuda_emulation::check_atomic_address(p, sizeof(float4));
  float* f = reinterpret_cast<float*>(p);
  float4 old;
  old.x = atomicAdd(f + 0, v.x);
  old.y = atomicAdd(f + 1, v.y);
  old.z = atomicAdd(f + 2, v.z);
  old.w = atomicAdd(f + 3, v.w);
  return old;
}
#endif
