// CPU row gather: copies whole rows of a table, picked by index, into a
// dense output. Rows are handled as opaque bytes, so one instantiation per
// index type serves every dtype. Used by gather, sparse_mask and
// IndexedSlices.
#pragma once

#include <cstdint>

namespace varstate::kernels::cpu {

// out[i, :] = table[indices[i], :] for i in [0, n), each row `row_bytes`
// bytes. Precondition (runtime/ checks it): every index is a valid row of
// `table`; `out` does not overlap `table`. Parallel above
// kParallelBytesThreshold bytes of output. Defined for Index in {int32_t,
// int64_t}. Thread-safe.
template <typename Index>
void gather_rows(const void* table, int64_t row_bytes, const Index* indices, int64_t n, void* out);

// The same on a table split by rows into parts (a partitioned variable):
// part k, at parts[k], holds rows [part_begin[k], part_begin[k + 1]);
// every index is a row of the whole table. Index is int64_t.
template <typename Index>
void gather_rows_parts(const void* const* parts, const int64_t* part_begin, int num_parts,
                       int64_t row_bytes, const Index* indices, int64_t n, void* out);

}  // namespace varstate::kernels::cpu
