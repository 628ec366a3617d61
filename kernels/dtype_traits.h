// Compile-time categories of element types, the one set used by the CPU and
// CUDA kernels, the runtime's dispatch and the tests (the run-time
// counterparts are dtype_is_*() in varstate/dtype.h). Compiled as C++17 by nvcc
// and C++20 by the host compiler.
#pragma once

#include <type_traits>
#include <utility>

#include "varstate/dtype.h"

namespace varstate::kernels {

// Complex numbers: the storage types complex64/complex128 and every backend's
// arithmetic type for them (std::complex on the host, cuda::std::complex on
// the device): any type with real() and imag() members.
template <typename T, typename = void>
inline constexpr bool kIsComplex = false;
template <typename T>
inline constexpr bool kIsComplex<T, std::void_t<decltype(std::declval<const T&>().real()),
                                                decltype(std::declval<const T&>().imag())>> = true;

// 16-bit floating-point storage types.
template <typename T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;
template <typename T>
inline constexpr bool kIsFloating = std::is_floating_point_v<T> || kIsHalfLike<T>;
template <typename T>
inline constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <typename T>
inline constexpr bool kIsReal = kIsFloating<T> || kIsInteger<T>;
template <typename T>
inline constexpr bool kIsNumeric = kIsReal<T> || kIsComplex<T>;

}  // namespace varstate::kernels
