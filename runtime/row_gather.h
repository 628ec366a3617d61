// Runtime-internal helpers for ops that pick rows by position
// (sparse_mask, PartitionedVariable's routing).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kernels/cpu/thread_scratch.h"
#include "varstate/tensor.h"

namespace varstate::internal {

// True for the dtypes indices may have: int32 and int64.
inline bool is_index_dtype(DType dtype) { return dtype == DType::kInt32 || dtype == DType::kInt64; }

// The elements of an int32/int64 tensor, on the host, as int64.
std::vector<int64_t> host_indices(const Tensor& t);

// The elements of an int32/int64 tensor as int64 on the host, for the
// object's lifetime: a host int64 tensor's own buffer, read in place, else
// a copy (int32 widened, or read back from a GPU) in this thread's scratch,
// kept from one call to the next (a fresh block of 512 KiB for 65,536
// indices is faulted in page by page on every call).
class HostIndices {
 public:
  explicit HostIndices(const Tensor& indices);
  HostIndices(const HostIndices&) = delete;
  HostIndices& operator=(const HostIndices&) = delete;
  std::span<const int64_t> view() const { return view_; }

 private:
  struct CopyTag;
  std::optional<kernels::cpu::ThreadScratch<int64_t, CopyTag>> copy_;
  std::span<const int64_t> view_;
};

// Rows `positions` (host values, each in [0, values.shape()[0])) of
// `values` (rank >= 1), gathered into a new tensor on values' device.
Tensor gather_rows(const Tensor& values, std::span<const int64_t> positions);

}  // namespace varstate::internal
