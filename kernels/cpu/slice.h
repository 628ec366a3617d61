// CPU strided copies for slicing: read a strided view, write another
// (strided_slice reads a slice into a contiguous tensor; the slice assign
// writes a contiguous value into a slice). Instantiated per element size
// (kernels::Opaque<1|2|4|8|16>) and for std::string.
#pragma once

#include <string>

#include "kernels/common.h"

namespace varstate::kernels::cpu {

// For each index tuple i over c.dims: dst[c.dst at i] = src[c.src at i].
// The two views must not overlap.
template <typename T>
void strided_copy(const T* src, T* dst, const StridedCopy& c);

}  // namespace varstate::kernels::cpu
