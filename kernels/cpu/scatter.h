// CPU sparse row updates (scatter_update / add / sub / mul / div / min / max)
// with their bounds check, and the bounds check alone.
//
// Below the scatter threshold (eigen_support.h) a call runs on the calling
// thread: one pass checks the indices, a second applies them. Above it, the
// rows are owned by shards (blocks of rows spread by a hash, times column
// ranges for very wide rows), one per pool thread; each shard reads all
// indices once, checking each and listing the positions of its own rows, and
// then applies those in their original order. Nothing is shared between
// shards, so there are no races and no lost duplicates, and every element
// sees its updates in the same order as a serial loop: results are bitwise
// those of the loop, run to run, whatever the thread count (for
// scatter_update, the last of several updates of a row wins).
#pragma once

#include <atomic>
#include <cstdint>

#include "kernels/common.h"

namespace varstate::kernels::cpu {

// For i in [0, num_indices), in order:
//   table[indices[i], c] = op(table[indices[i], c], u(i, c)),  c in [0, row_width)
// where u(i, c) = updates[i * row_width + c], or updates[0] for every i and c
// when updates_scalar. `table` is rows x row_width, row-major.
//
// Every index is checked against [0, rows) first: when one is outside,
// returns the position of the first such index and writes nothing; else
// applies all updates and returns -1.
//
// Preconditions (runtime/ checks them; the kernel does not): updates do not
// overlap the table; for kDiv on an integer type no update is 0. Throws
// InvalidArgumentError for kMin/kMax on complex T. Signed integer +, -, *
// wrap around; INT_MIN / -1 gives INT_MIN.
//
// Results never depend on thread scheduling, so `deterministic` changes
// nothing on the CPU; it is taken so that runtime/ calls both backends alike.
// Defined for every numeric storage type T and Index in {int32_t, int64_t}.
// Thread-safe for distinct tables; the caller serializes calls on one table.
//
// With `marks` (one byte per table row: a variable's dirty rows for
// incremental checkpoints), sets marks[indices[i]] for every index, each
// just before its row is written (in the pass that applies the updates,
// where the row's own cache miss is waited for); a bad index marks nothing.
// (A variable's scatter passes them only while its row log is overflowing:
// runtime/dirty_rows.h.)
template <typename T, typename Index>
int64_t scatter(ScatterOp op, T* table, int64_t rows, int64_t row_width, const Index* indices,
                int64_t num_indices, const T* updates, bool updates_scalar, bool deterministic,
                std::atomic<uint8_t>* marks = nullptr);

// scatter on a table split by rows into parts (a partitioned variable):
// part k, at parts[k], holds rows [part_begin[k], part_begin[k + 1]) of the
// table (part_begin[0] == 0; part_begin[num_parts] is the table's row
// count). One call over all parts, as over one table: every index is a row
// of the whole table and each update row is read once, in place. With
// `marks` (marks[k]: one byte per row of part k), marks the rows as scatter
// does, each in its own part's array. Otherwise as scatter. Index is int64_t.
template <typename T, typename Index>
int64_t scatter_parts(ScatterOp op, T* const* parts, const int64_t* part_begin, int num_parts,
                      int64_t row_width, const Index* indices, int64_t num_indices,
                      const T* updates, bool updates_scalar,
                      std::atomic<uint8_t>* const* marks = nullptr);

// The position of the first index outside [0, rows), or -1 when all n are
// in range (for callers that do not run the CPU scatter: gather, GPU tables
// with host indices, remote variables). Parallel above the gather
// threshold's bytes of indices.
// Defined for Index in {int32_t, int64_t}.
template <typename Index>
int64_t validate_indices(const Index* indices, int64_t n, int64_t rows);

}  // namespace varstate::kernels::cpu
