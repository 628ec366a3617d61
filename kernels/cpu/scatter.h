// CPU sparse row updates (scatter_update / add / sub / mul / div / min / max)
// and the bounds check that runs before them.
//
// The table is cut into shards — a range of rows times a range of columns —
// and each shard is updated by exactly one thread of the Eigen pool, which
// scans all indices and applies, in their original order, the ones that land
// in its rows. Nothing is shared between threads, so there are no races and
// no lost duplicates, and every element sees its updates in the same order as
// a serial loop: results are bitwise those of the loop, run to run, whatever
// the thread count. Work below kParallelBytesThreshold runs on the calling
// thread.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace varstate::kernels::cpu {

// For i in [0, num_indices), in order:
//   table[indices[i], c] = op(table[indices[i], c], u(i, c)),  c in [0, row_width)
// where u(i, c) = updates[i * row_width + c], or updates[0] for every i and c
// when updates_scalar. `table` is rows x row_width, row-major.
//
// Preconditions (runtime/ checks them; the kernel does not): every index is in
// [0, rows) (see validate_indices); updates do not overlap the table; for
// kDiv on an integer type no update is 0; op is not kMin/kMax for complex T.
// Signed integer +, -, * wrap around; INT_MIN / -1 gives INT_MIN.
//
// Results never depend on thread scheduling, so `deterministic` changes
// nothing on the CPU; it is taken so that runtime/ calls both backends alike.
// Defined for every numeric storage type T and Index in {int32_t, int64_t}.
// Thread-safe for distinct tables; the caller serializes calls on one table.
template <typename T, typename Index>
void scatter(ScatterOp op, T* table, int64_t rows, int64_t row_width, const Index* indices,
             int64_t num_indices, const T* updates, bool updates_scalar, bool deterministic);

// scatter on a table split by rows into parts (a partitioned variable):
// part k, at parts[k], holds rows [part_begin[k], part_begin[k + 1]) of the
// table (part_begin[0] == 0; part_begin[num_parts] is the table's row
// count). One call over all parts, as over one table: every index is a row
// of the whole table and each update row is read once, in place. Otherwise
// as scatter. Index is int64_t.
template <typename T, typename Index>
void scatter_parts(ScatterOp op, T* const* parts, const int64_t* part_begin, int num_parts,
                   int64_t row_width, const Index* indices, int64_t num_indices, const T* updates,
                   bool updates_scalar);

// The position of the first index outside [0, rows), or -1 when all n are
// in range. Parallel above kParallelBytesThreshold bytes of indices.
// Defined for Index in {int32_t, int64_t}.
template <typename Index>
int64_t validate_indices(const Index* indices, int64_t n, int64_t rows);

}  // namespace varstate::kernels::cpu
