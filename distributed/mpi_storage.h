// Variable storage on another task, over MPI one-sided operations.
// Internal: Cluster (cluster.cc) creates it, Variable uses it through
// runtime/remote_storage.h.
//
// Each creation batch (one variable, or the parts of one partitioned
// variable) is one MPI window, allocated collectively by every rank; each
// owner's segment holds its variables (distributed/mpi_window.h). Reads
// are MPI_Get(_accumulate), assign is MPI_Put or an MPI_REPLACE
// accumulate, assign_add is MPI_Get_accumulate(SUM), the sparse ops move
// only their rows (distributed/mpi_sparse.h), count_up_to is Fetch_and_op
// + Compare_and_swap; dtypes MPI cannot add are updated by
// read-modify-write under an exclusive window lock.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/mpi_window.h"
#include "runtime/remote_storage.h"
#include "varstate/dtype.h"
#include "varstate/tensor_shape.h"

namespace varstate::internal {

// The text of MPI error code `rc`.
std::string mpi_error_string(int rc);

// Reports a failed MPI call (its return code, what it did) by throwing.
using MpiCheck = std::function<void(int rc, const std::string& what)>;

// Collective over context->comm (every rank calls it, in the same order):
// allocates the window of variable `op_name` (`dtype`, fully defined
// `shape`) owned by rank `owner`, zeroes it on the owner, and returns the
// storage over it on this rank (`rank`). Throws UnavailableError once the
// Cluster has shut down; MPI failures go to `check`.
std::shared_ptr<RemoteStorage> create_mpi_storage(std::shared_ptr<MpiContext> context, int rank,
                                                  const std::string& op_name, int owner,
                                                  DType dtype, const TensorShape& shape,
                                                  const MpiCheck& check);

// Creation batches (runtime/remote_storage.h): while one is open,
// create_mpi_storage only records the variable; ending the outermost
// allocates one window for all of them (collective; nothing when the batch
// created no cluster variable, the same on every rank).
void begin_mpi_batch(MpiContext& context);
void end_mpi_batch(MpiContext& context, int rank, const MpiCheck& check);

// The Cluster's traffic so far.
WireStats mpi_wire_stats(const MpiContext& context);

// The rank owning `storage` when it is MPI storage, else -1.
int mpi_owner_rank(const RemoteStorage* storage);

}  // namespace varstate::internal
