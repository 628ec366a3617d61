// Sparse ops (gather, scatter_*) on rows of MPI-held variables, batched.
//
// Only rows travel: each variable's indices are reduced to its distinct
// rows first (a scatter's duplicates combined locally with the op's own
// semantics: add/sub sum, mul multiplies, min/max keep the extreme, update
// keeps the single-process scatter's last-wins). The jobs are then grouped
// by (owner, window): the parts of one partitioned variable on one task
// share a window (distributed/mpi_window.h), so each owner is one exchange
// -- one access epoch and one MPI call moving exactly its rows through an
// indexed datatype (one accumulate for add/sub/mul/min/max/update; a get
// and a put under the exclusive lock for div and the dtypes MPI cannot
// add). Every group's epoch is open at once, so the owners' transfers
// overlap. The caller holds the context's mutex and has validated rows,
// updates and divisors.
#pragma once

#include <vector>

#include "distributed/mpi_window.h"
#include "kernels/common.h"
#include "varstate/tensor.h"

namespace varstate::internal {

// One variable's share: its rows, and a scatter's updates ([rows.size()] +
// row shape, or the scalar) or a gather's result.
struct SparseJob {
  const MpiVar* var = nullptr;
  std::vector<int64_t> rows;
  Tensor values;
};

// ref[rows[p]] (op)= values[p] on every job's variable.
void mpi_scatter(kernels::ScatterOp op, std::vector<SparseJob>& jobs, bool updates_scalar,
                 const MpiCallCheck& check);

// Sets every job's values to its variable's rows, [rows.size()] + row shape.
void mpi_gather(std::vector<SparseJob>& jobs, const MpiCallCheck& check);

}  // namespace varstate::internal
