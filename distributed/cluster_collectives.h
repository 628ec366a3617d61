// Collectives of a Cluster for DistributedSaver (distributed/distributed_saver.cc),
// and its traffic counters for tests and benchmarks.
#pragma once

#include <string>
#include <vector>

#include "distributed/mpi_window.h"
#include "varstate/cluster.h"
#include "varstate/variable.h"

namespace varstate::internal {

struct ClusterAccess {
  // `value` of rank `root` on every rank (AbortedError on failure).
  static std::string broadcast(Cluster& cluster, const std::string& value, int root);
  // Every rank's `value`, by rank.
  static std::vector<int> allgather(Cluster& cluster, int value);
  // Every rank's `value`, by rank: one MPI_Iallgatherv.
  static std::vector<std::string> allgather_bytes(Cluster& cluster, const std::string& value);
  // The rank holding `v`, or -1 when `v` lives in this process.
  static int owner_rank(const Variable& v);
  // This process's remote-variable traffic so far (tests, benchmarks).
  static WireStats wire_stats(Cluster& cluster);
};

}  // namespace varstate::internal
