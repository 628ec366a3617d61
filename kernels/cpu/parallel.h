// When and how the CPU kernels split their work over the process's thread
// pool (kernels/cpu/eigen_support.h): per-op work thresholds, and a cheap
// hand-off of a few shards to the pool. No Eigen here, so that tests and
// benchmarks can set the thresholds.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace varstate::kernels::cpu {

// Per-op work (bytes read + written, or elements produced) from which a
// kernel splits its work over the pool; below it runs on the calling
// thread. Measured with bench/threading_bench.cc (each op at doubling sizes,
// serial and pool interleaved, medians of 15) on the 2-vCPU development VM
// idle (load ~1, two runs; bench/results/threading-crossover-*-idle*.json):
// each threshold is the crossover, the size from which the pool wins at
// every larger size, taken up to a power of two; below it a split only
// loses. On a loaded machine (load 4-8) no split paid; worth_splitting
// raises the thresholds there while splits do not pay.
//   scatter (every op)   6.5-13 MB touched in bench_threading (1.4-1.5x
//                        above), but in bench_scatter's cases
//                        (compare_threads.py, idle) splits of 50-800 MB
//                        ran at 0.77-1.18x of one thread -> 1 GiB;
//                        combining ops on spread ids into tables larger
//                        than the cache: 8 MiB (scatter_split_threshold);
//                        between 8 MiB and those, each class of call
//                        times both ways and keeps the faster
//                        (SplitTrials): on an Intel Xeon VM the same
//                        splits ran 1.2-1.7x faster than one thread
//   gather               1-8 MB copied       -> 8 MiB  (1.5-1.7x above)
//   dense update         6 MB touched        -> 8 MiB  (1.3-1.5x: bandwidth)
//   random fills         33-98 Ki floats     -> 128 Ki (1.5-2.0x above)
//   elementwise          3-12 MB touched     -> 8 MiB  (1.2-1.7x above)
//   sparse training      256 KiB of rows touched: the threshold the
//                        sparse updates had on Eigen's parallelFor (which
//                        the dense ones keep: kParallelBytesThreshold)
struct ParallelThresholds {
  int64_t scatter_bytes = int64_t{1} << 30;
  // Combining scatters (every op but scatter_update) into tables of more
  // than kSplitTableCaches last-level caches, whose ids do not repeat rows
  // often, split from here instead (scatter_split_threshold in scatter.h).
  int64_t scatter_combining_bytes = int64_t{8} << 20;
  // A scatter of this much work or more, below its threshold, splits or
  // not as its class's earlier calls found pays on this machine
  // (scatter_split_trials(), below).
  int64_t scatter_trial_bytes = int64_t{8} << 20;
  int64_t gather_bytes = int64_t{8} << 20;
  int64_t dense_update_bytes = int64_t{8} << 20;
  int64_t random_elements = int64_t{128} << 10;
  int64_t elementwise_bytes = int64_t{8} << 20;
  // The row updates of the sparse training ops (kernels/cpu/training_ops.h):
  // bytes of the variable, slot and gradient rows they touch.
  int64_t sparse_training_bytes = int64_t{256} << 10;
  // A sparse training op whose indices name this many bytes of rows (the
  // variable's, its slots' and the gradient's, counting repeats), and that
  // repeats rows or has 1M ids or more, splits its rows by owner over the
  // pool, each part numbering, summing and updating its own rows; else one
  // thread numbers and sums them all (kernels/cpu/training_ops.cc).
  int64_t sparse_row_parts_bytes = int64_t{1} << 20;

  // Every threshold `value`: 0 splits whatever the pool may split, the
  // int64 maximum nothing (tests and benchmarks forcing one path).
  static ParallelThresholds all(int64_t value) {
    return {value, value, value, value, value, value, value, value, value};
  }
};
static_assert(sizeof(ParallelThresholds) == 9 * sizeof(int64_t),
              "ParallelThresholds::all must set every threshold");

// The thresholds in use. Tests and benchmarks may change them (to force
// either path) while no kernel runs; kernels only read them.
ParallelThresholds& parallel_thresholds();

// Threads of the pool (VARSTATE_CPU_THREADS, else the hardware's).
int pool_threads();

// True when `work` (in the threshold's unit) is worth splitting over the
// pool: the pool has more than one thread, and `work` is at least
// `threshold` times 2^k. k counts (up to kMaxLateDoublings) recent splits
// that did not pay: no pool thread started before the calling thread had
// done its own share, or the caller then waited for the pool more than half
// as long as it had worked. On a loaded machine the thresholds so rise
// until (nearly) nothing is split, and fall back one step with each split
// that pays.
bool worth_splitting(int64_t work, int64_t threshold);
inline constexpr int kMaxLateDoublings = 10;

// Whether splitting a call over the pool pays on this machine, learned from
// the calls themselves, for the calls a fixed threshold cannot settle.
// Whether one thread already keeps the memory busy depends on the machine:
// split scatters of 50-800 MB ran at 0.77-1.18x of one thread on a 2-vCPU
// AMD EPYC VM, and at 1.2-1.7x on a 2-vCPU Intel Xeon VM
// (docs/cpu-threading.md). Calls fall in classes, a key the caller makes of
// what decides the outcome (the op, its sizes in powers of two). A class's
// first call runs on one thread, untimed (it may fault pages in); the next
// calls alternate one thread and the pool, timed, until each way has
// kSamples; the class then keeps the way whose fastest call was faster, the
// pool only when it saved at least kMinGain of the time (it also takes a
// second core). After kRecheckCalls more calls the class measures again:
// the machine's load may have changed. A call's results must not depend on
// the way it runs (the split kernels are bitwise those of one thread);
// only its time does. Thread-safe.
class SplitTrials {
 public:
  static constexpr int kSamples = 3;
  static constexpr double kMinGain = 0.1;
  static constexpr int64_t kRecheckCalls = 1024;

  struct Choice {
    bool split = false;
    bool timed = false;  // a trial: record() the call's time
  };
  Choice choose(uint64_t key);
  // The wall time of a call choose() marked timed, and whether it did
  // split (a split the pool's load refused counts as one thread).
  void record(uint64_t key, bool split, double seconds);

  // The timed calls recorded so far, each way (tests).
  struct Counts {
    int64_t serial = 0;
    int64_t split = 0;
  };
  Counts counts() const;
  // Forgets every class (tests).
  void reset();

 private:
  struct Class {
    int64_t calls = 0;  // since the trial (re)started, or since the decision
    int serial_samples = 0;
    int split_samples = 0;
    double serial_best = std::numeric_limits<double>::infinity();
    double split_best = std::numeric_limits<double>::infinity();
    bool decided = false;
    bool split = false;
  };
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Class> classes_;
  Counts counts_;
};

// The trials of the CPU scatters (kernels/cpu/scatter.h).
SplitTrials& scatter_split_trials();

// The part (of `parts`) that owns row r when rows are split by owner:
// blocks of 2^block_shift rows spread by a multiplicative hash, so that hot
// rows, even neighbouring ones (a frequency-sorted vocabulary), and runs of
// new rows land on different parts.
inline int64_t owner_of(int64_t r, int block_shift, int64_t parts) {
  const uint32_t h = static_cast<uint32_t>(static_cast<uint64_t>(r) >> block_shift) * 0x9E3779B1u;
  return static_cast<int64_t>((uint64_t{h} * static_cast<uint64_t>(parts)) >> 32);
}
bool worth_splitting(int64_t work, int64_t threshold);

// Runs fn(context, s) for every shard s in [0, shards), each exactly once,
// on the calling thread and up to shards - 1 pool threads, and returns when
// all have finished. Shards are claimed one at a time, so a pool thread
// that starts late (a loaded machine) leaves its shard to the calling
// thread instead of making it wait. fn must not throw.
void run_shards(int64_t shards, void (*fn)(void* context, int64_t shard), void* context);

template <typename Fn>
void run_shards(int64_t shards, Fn& fn) {
  run_shards(
      shards, [](void* c, int64_t s) { (*static_cast<Fn*>(c))(s); }, &fn);
}

// Shards [1, shards) offered to the pool while the calling thread works on
// shard 0; the caller then closes the offer and takes back every shard no
// pool thread has claimed yet. On a loaded machine, where a pool thread
// starts late, the caller so ends up doing the whole job its own (serial)
// way instead of waiting. Each claimed shard s runs fn(context, s) on a
// pool thread; fn must not throw.
class ShardOffer {
 public:
  ShardOffer(int64_t shards, void (*fn)(void* context, int64_t shard), void* context);
  template <typename Fn>
  ShardOffer(int64_t shards, Fn& fn)
      : ShardOffer(
            shards, [](void* c, int64_t s) { (*static_cast<Fn*>(c))(s); }, &fn) {}
  // Waits for the claimed shards (close() first if the caller did not).
  ~ShardOffer();
  ShardOffer(const ShardOffer&) = delete;
  ShardOffer& operator=(const ShardOffer&) = delete;

  // Ends the offer: shards [1, k) were claimed by pool threads, [k, shards)
  // are now the caller's. Returns k. Call once.
  int64_t close();
  // Returns once every claimed shard has finished.
  void wait();

  struct State;  // shared with run_shards (parallel.cc)

 private:
  std::shared_ptr<State> state_;
  std::chrono::steady_clock::time_point start_;
  int64_t claimed_end_ = -1;
  bool waited_ = false;
};

// A side task: fn(context) offered to a pool thread while the calling
// thread does other work (the dirty-row marks of a scatter, beside its
// kernel). Not a split of the caller's work, so it leaves the split
// statistics of worth_splitting alone. fn must not throw.
class SideTask {
 public:
  SideTask(void (*fn)(void* context), void* context);
  template <typename Fn>
  explicit SideTask(Fn& fn) : SideTask([](void* c) { (*static_cast<Fn*>(c))(); }, &fn) {}
  // cancel(), unless finish() was called.
  ~SideTask();
  SideTask(const SideTask&) = delete;
  SideTask& operator=(const SideTask&) = delete;
  // Returns once fn has run: on the pool thread that took it (waiting for
  // it), or else now, on the calling thread. Returns whether a pool thread
  // ran it.
  bool finish();
  // Drops fn if no pool thread has taken it yet, else waits for it.
  void cancel();

 private:
  // Whether a pool thread took fn (it may still run); after this, no pool
  // thread will.
  bool close();
  struct Call {
    void (*fn)(void*);
    void* context;
  };
  Call call_;
  std::shared_ptr<ShardOffer::State> state_;
  bool closed_ = false;
};

// Runs body(first, last) over [0, n) in ranges that start at multiples of
// `align`: on the calling thread alone unless worth_splitting(work,
// threshold), else in a few ranges per pool thread through run_shards (more
// ranges than threads, so that a thread that starts late takes fewer).
template <typename Body>
void for_ranges(int64_t n, int64_t align, int64_t work, int64_t threshold, const Body& body) {
  constexpr int64_t kRangesPerThread = 4;
  const int64_t blocks = (n + align - 1) / align;
  if (blocks <= 1 || !worth_splitting(work, threshold)) {
    body(int64_t{0}, n);
    return;
  }
  const int64_t ranges = std::min<int64_t>(blocks, kRangesPerThread * pool_threads());
  auto run = [&](int64_t r) {
    const int64_t first = blocks * r / ranges * align;
    const int64_t last = std::min(n, blocks * (r + 1) / ranges * align);
    if (first < last) body(first, last);
  };
  run_shards(ranges, run);
}

}  // namespace varstate::kernels::cpu
