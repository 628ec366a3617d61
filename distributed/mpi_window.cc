#include "distributed/mpi_window.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::function<void(int, int)>& epoch_locked_hook() {
  static std::function<void(int, int)> hook;
  return hook;
}

}  // namespace

void set_epoch_locked_hook(std::function<void(int lock_type, int target)> hook) {
  epoch_locked_hook() = std::move(hook);
}

LockWatchdog::LockWatchdog(MpiContext& context) : context_(context), thread_([this] { run(); }) {}

LockWatchdog::~LockWatchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void LockWatchdog::run() {
  constexpr int64_t kStallNs = 1'000'000'000;
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stop_; })) {
    const int64_t since = context_.lock_wait_since.load();
    if (since == 0 || steady_ns() - since < kStallNs) continue;
    const int target = context_.lock_wait_target.load();
    try {
      check_peers_alive(context_);
    } catch (const UnavailableError& e) {
      const size_t t = static_cast<size_t>(target);
      std::fprintf(stderr,
                   "varstate: UnavailableError: MPI_Win_lock on %s: waiting for the lock of %s: "
                   "%s; MPI cannot cancel the lock request, so the process ends (status 75)\n",
                   context_.task_names[static_cast<size_t>(context_.my_rank)].c_str(),
                   t < context_.task_names.size() ? context_.task_names[t].c_str() : "?", e.what());
      std::fflush(stderr);
      std::_Exit(75);
    }
  }
}

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
  context.lock_wait_target.store(target);
  context.lock_wait_since.store(steady_ns());
  const int rc = MPI_Win_lock(lock_type, target, 0, win);
  context.lock_wait_since.store(0);
  check(rc, "MPI_Win_lock");
  open_ = true;
  if (const auto& hook = epoch_locked_hook()) hook(lock_type, target);
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
