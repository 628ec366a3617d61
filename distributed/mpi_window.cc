#include "distributed/mpi_window.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <vector>

#include "varstate/error.h"

namespace varstate::internal {
namespace {

// Whether process `pid` of this host has exited (or is a zombie, when
// `thorough`).
bool process_gone(int pid, bool thorough) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  if (!thorough) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t paren = line.rfind(')');
  const char state = paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : '?';
  return state == 'Z' || state == 'X';
}

}  // namespace

void check_peer_alive(MpiContext& context, int rank, bool thorough) {
  const int known = context.dead_rank.load();
  const size_t r = static_cast<size_t>(rank);
  if (known != rank &&
      (r >= context.local_pids.size() || !process_gone(context.local_pids[r], thorough))) {
    return;
  }
  int expected = -1;
  context.dead_rank.compare_exchange_strong(expected, rank);
  const std::string pid =
      r < context.local_pids.size() ? ", process " + std::to_string(context.local_pids[r]) : "";
  throw UnavailableError("task " + context.task_names[r] + " (rank " + std::to_string(rank) + pid +
                         ") has exited; the job cannot continue: MPI has no recovery from a "
                         "dead peer, restart it from the last checkpoint");
}

void check_peers_alive(MpiContext& context) {
  if (const int dead = context.dead_rank.load(); dead >= 0) check_peer_alive(context, dead, false);
  for (size_t r = 0; r < context.local_pids.size(); ++r) {
    check_peer_alive(context, static_cast<int>(r), /*thorough=*/true);
  }
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat:
      return MPI_FLOAT;
    case DType::kDouble:
      return MPI_DOUBLE;
    case DType::kInt8:
    case DType::kQInt8:
      return MPI_INT8_T;
    case DType::kInt16:
    case DType::kQInt16:
      return MPI_INT16_T;
    case DType::kInt32:
    case DType::kQInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    case DType::kUInt8:
    case DType::kQUInt8:
      return MPI_UINT8_T;
    case DType::kUInt16:
    case DType::kQUInt16:
      return MPI_UINT16_T;
    case DType::kUInt32:
      return MPI_UINT32_T;
    case DType::kUInt64:
      return MPI_UINT64_T;
    case DType::kComplex64:
      return MPI_C_FLOAT_COMPLEX;
    case DType::kComplex128:
      return MPI_C_DOUBLE_COMPLEX;
    case DType::kBool:
      return MPI_C_BOOL;
    default:
      return MPI_DATATYPE_NULL;
  }
}

Epoch::Epoch(MpiContext& context, MPI_Win win, int lock_type, int target, const MpiCallCheck& check)
    : win_(win), target_(target), check_(&check) {
  // A dead owner's memory may still be mapped here: fail instead of
  // reading what it left, or waiting for a lock it held.
  check_peer_alive(context, target, /*thorough=*/false);
  check(MPI_Win_lock(lock_type, target, 0, win), "MPI_Win_lock");
  open_ = true;
  context.exchanges.fetch_add(1);
}

Epoch::Epoch(Epoch&& other) noexcept
    : win_(other.win_), target_(other.target_), check_(other.check_), open_(other.open_) {
  other.open_ = false;
}

Epoch::~Epoch() {
  if (open_) MPI_Win_unlock(target_, win_);
}

void Epoch::flush() { (*check_)(MPI_Win_flush(target_, win_), "MPI_Win_flush"); }

void Epoch::close() {
  open_ = false;
  (*check_)(MPI_Win_unlock(target_, win_), "MPI_Win_unlock");
}

void mark_updated(const MpiVar& v, bool initialize, const MpiCallCheck& check) {
  const int64_t one = 1;
  int64_t ignored = 0;
  if (initialize) {
    check(MPI_Fetch_and_op(&one, &ignored, MPI_INT64_T, v.owner, v.base + kFlagOffset, MPI_REPLACE,
                           v.win),
          "MPI_Fetch_and_op");
    v.context->header_bytes.fetch_add(8);
  }
  check(MPI_Accumulate(&one, 1, MPI_INT64_T, v.owner, v.base + kVersionOffset, 1, MPI_INT64_T,
                       MPI_SUM, v.win),
        "MPI_Accumulate");
  v.context->header_bytes.fetch_add(8);
}

void mark_all_rows(const MpiVar& v, const MpiCallCheck& check) {
  if (!v.marking->load()) return;
  // The origin buffer must stay valid until the epoch ends: a constant one.
  static const std::vector<uint8_t> kOnes(size_t{1} << 20, 1);
  const auto chunk = static_cast<int64_t>(kOnes.size());
  for (int64_t begin = 0; begin < v.rows; begin += chunk) {
    const int n = static_cast<int>(std::min(chunk, v.rows - begin));
    check(MPI_Accumulate(kOnes.data(), n, MPI_UINT8_T, v.owner, v.marks + begin, n, MPI_UINT8_T,
                         MPI_REPLACE, v.win),
          "MPI_Accumulate");
  }
  v.context->header_bytes.fetch_add(static_cast<uint64_t>(v.rows));
}

}  // namespace varstate::internal
