// Training ops on MPI-held variables (RemoteStorage::modify_rows): one
// atomic read-modify-write of variables and their slots on their owners --
// one training op, or all of an optimizer's apply_gradients.
//
// The windows involved (each (window, owner) pair once: the parts of a
// partitioned variable on one task share a window, as do the slots an
// optimizer created together) are locked exclusively in ascending
// (creation order, owner) -- the same on every task, so two tasks updating
// overlapping sets cannot deadlock --; then the rows (or whole values) of
// every variable are read with one MPI_Get each (an indexed datatype of
// its rows), handed to the updates' functions, and put back; the rows'
// marks (incremental saves) and the versions are updated within the same
// epochs. While the locks are held no other task reads or updates any of
// the variables.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "distributed/mpi_window.h"
#include "varstate/tensor.h"

namespace varstate::internal {

// One update: `fn` gets, in the order of `vars`, the rows `rows` of each
// ([rows.size()] + its row shape; distinct, ascending, in range) or,
// without `rows`, the whole values, and what it leaves there is written
// back.
struct MpiUpdate {
  std::vector<const MpiVar*> vars;
  const std::optional<std::vector<int64_t>>* rows = nullptr;
  const std::function<void(std::vector<Tensor>&)>* fn = nullptr;
};

// Runs `updates` as one (the caller holds the context's mutex). When a
// `fn` throws the locks are released and nothing is written.
void mpi_modify(const std::vector<MpiUpdate>& updates, const MpiCallCheck& check);

}  // namespace varstate::internal
