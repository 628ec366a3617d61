// Training ops on MPI-held variables (RemoteStorage::modify_with): one
// atomic read-modify-write of a variable and its slots on their owner.
//
// The variables' windows (a variable and each slot are usually windows of
// their own) are locked exclusively on the owner in ascending creation
// order -- the same on every task, so two tasks updating overlapping sets
// cannot deadlock --, then the rows (or whole values) are read with one
// MPI_Get per variable (an indexed datatype of its rows), handed to the
// caller's function, and put back; the rows' marks (incremental saves)
// and the versions are updated within the same epochs. While the locks
// are held no other task reads or updates any of the variables.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "distributed/mpi_window.h"
#include "varstate/tensor.h"

namespace varstate::internal {

// `vars` (one owner; the caller holds the context's mutex): `fn` gets, in
// the order of `vars`, the rows `rows` of each ([rows.size()] + its row
// shape; distinct, ascending, in range) or, with `rows` null, the whole
// values, and what it leaves there is written back. When `fn` throws the
// locks are released and nothing is written.
void mpi_modify(const std::vector<const MpiVar*>& vars, const std::vector<int64_t>* rows,
                const std::function<void(std::vector<Tensor>&)>& fn, const MpiCallCheck& check);

}  // namespace varstate::internal
