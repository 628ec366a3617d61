// Runtime-internal helpers for ops that pick rows by position
// (sparse_mask, PartitionedVariable's routing).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "varstate/tensor.h"

namespace varstate::internal {

// True for the dtypes indices may have: int32 and int64.
inline bool is_index_dtype(DType dtype) { return dtype == DType::kInt32 || dtype == DType::kInt64; }

// The elements of an int32/int64 tensor, on the host, as int64.
std::vector<int64_t> host_indices(const Tensor& t);

// Rows `positions` (host values, each in [0, values.shape()[0])) of
// `values` (rank >= 1), gathered into a new tensor on values' device.
Tensor gather_rows(const Tensor& values, std::span<const int64_t> positions);

}  // namespace varstate::internal
