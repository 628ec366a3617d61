// Variable storage on another task, over MPI one-sided operations.
// Internal: Cluster (cluster.cc) creates it, Variable uses it through
// runtime/remote_storage_internal.h.
//
// Each remote variable is one MPI window, allocated collectively by every
// rank and holding bytes only on its owner: a 16-byte header (int64
// initialized flag, int64 version counter), then the value. Reads are
// MPI_Get(_accumulate), assign is MPI_Put or an MPI_REPLACE accumulate,
// assign_add and the scatters are MPI_Accumulate (SUM/PROD/MIN/MAX/REPLACE)
// where MPI has the element type, count_up_to is Fetch_and_op +
// Compare_and_swap; dtypes MPI cannot add are updated by
// read-modify-write under an exclusive window lock.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/remote_storage_internal.h"
#include "varstate/dtype.h"
#include "varstate/tensor_shape.h"

namespace varstate::internal {

// What every remote variable of one Cluster shares: the communicator, the
// task names, and the mutex serializing this process's MPI calls.
struct MpiContext {
  std::mutex mu;
  bool alive = true;
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<std::string> task_names;  // by rank
  std::vector<MPI_Win> windows;         // creation order; freed at shutdown
};

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

// The rank owning `storage` when it is MPI storage, else -1.
int mpi_owner_rank(const RemoteStorage* storage);

}  // namespace varstate::internal
