#include "kernels/cpu/parallel.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>

#include "kernels/cpu/eigen_support.h"

namespace varstate::kernels::cpu {
namespace {

// Recent splits in which the pool threads came too late to take a shard
// (0 .. kMaxLateDoublings): each such split doubles the thresholds, each
// split that a pool thread helped halves them.
std::atomic<int> late_splits{0};

// Whether a split paid: a pool thread took a shard, and the calling thread,
// once done with its own share (`own`), waited for the pool less than half
// as long (`waited`): a pool thread that is descheduled mid-shard (a loaded
// machine) makes the caller wait, and the split loses to one thread.
bool paid(bool pool_took_one, std::chrono::steady_clock::duration own,
          std::chrono::steady_clock::duration waited) {
  return pool_took_one && 2 * waited < own;
}

void record_split(bool pool_helped) {
  int k = late_splits.load(std::memory_order_relaxed);
  const int next = pool_helped ? std::max(0, k - 1) : std::min(kMaxLateDoublings, k + 1);
  if (next != k) late_splits.compare_exchange_strong(k, next, std::memory_order_relaxed);
}

}  // namespace

// What the threads of one run_shards call or ShardOffer share. Held by a
// shared_ptr: a pool task may start after the call has returned (every
// shard taken by then), and must find the record alive to see that nothing
// is left.
struct ShardOffer::State {
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::atomic<int64_t> by_pool{0};
  int64_t shards = 0;
  void (*fn)(void*, int64_t) = nullptr;
  void* context = nullptr;
  std::mutex mu;
  std::condition_variable finished;

  // Claims and runs shards until none is left.
  void work(bool pool) {
    for (int64_t s = next.fetch_add(1); s < shards; s = next.fetch_add(1)) {
      fn(context, s);
      if (pool) by_pool.fetch_add(1);
      std::lock_guard lock(mu);
      done.fetch_add(1);
      finished.notify_all();
    }
  }

  // Returns once `count` shards have finished.
  void wait_for(int64_t count) {
    if (done.load() >= count) return;
    std::unique_lock lock(mu);
    finished.wait(lock, [&] { return done.load() >= count; });
  }

  static std::shared_ptr<State> start(int64_t shards, int64_t first, void (*fn)(void*, int64_t),
                                      void* context) {
    auto state = std::make_shared<State>();
    state->next = first;
    state->shards = shards;
    state->fn = fn;
    state->context = context;
    const int64_t helpers = std::min<int64_t>(shards - first, pool_threads() - 1);
    for (int64_t h = 0; h < helpers; ++h) {
      eigen_device().enqueueNoNotification([state] { state->work(/*pool=*/true); });
    }
    return state;
  }
};

ParallelThresholds& parallel_thresholds() {
  static ParallelThresholds thresholds;
  return thresholds;
}

int pool_threads() { return eigen_device().numThreads(); }

bool worth_splitting(int64_t work, int64_t threshold) {
  if (pool_threads() <= 1) return false;
  const int k = late_splits.load(std::memory_order_relaxed);
  return threshold <= (std::numeric_limits<int64_t>::max() >> k) && work >= (threshold << k);
}

SplitTrials::Choice SplitTrials::choose(uint64_t key) {
  std::lock_guard lock(mu_);
  Class& c = classes_[key];
  if (c.decided) {
    if (++c.calls < kRecheckCalls) return {c.split, false};
    c = Class{};  // measure again
  }
  const int64_t call = c.calls++;
  if (call == 0) return {false, false};  // pages faulted in, caches filled
  // Alternate, then give the way short of samples the rest (calls timed
  // at once may overshoot: harmless).
  bool split = call % 2 == 1;
  if (c.split_samples >= kSamples) split = false;
  if (c.serial_samples >= kSamples) split = true;
  return {split, true};
}

void SplitTrials::record(uint64_t key, bool split, double seconds) {
  std::lock_guard lock(mu_);
  Class& c = classes_[key];
  if (c.decided) return;  // a call timed before the decision, finished after
  (split ? counts_.split : counts_.serial) += 1;
  if (split) {
    c.split_samples += 1;
    c.split_best = std::min(c.split_best, seconds);
  } else {
    c.serial_samples += 1;
    c.serial_best = std::min(c.serial_best, seconds);
  }
  if (c.split_samples >= kSamples && c.serial_samples >= kSamples) {
    c.decided = true;
    c.split = c.split_best <= (1.0 - kMinGain) * c.serial_best;
    c.calls = 0;
  }
}

SplitTrials::Counts SplitTrials::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

void SplitTrials::reset() {
  std::lock_guard lock(mu_);
  classes_.clear();
  counts_ = {};
}

SplitTrials& scatter_split_trials() {
  static SplitTrials trials;
  return trials;
}

void run_shards(int64_t shards, void (*fn)(void*, int64_t), void* context) {
  if (shards <= 1) {
    if (shards == 1) fn(context, 0);
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto state = ShardOffer::State::start(shards, 0, fn, context);
  state->work(/*pool=*/false);
  const auto t1 = std::chrono::steady_clock::now();
  state->wait_for(shards);
  record_split(paid(state->by_pool.load() > 0, t1 - t0, std::chrono::steady_clock::now() - t1));
}

ShardOffer::ShardOffer(int64_t shards, void (*fn)(void*, int64_t), void* context)
    : state_(State::start(shards, 1, fn, context)), start_(std::chrono::steady_clock::now()) {}

ShardOffer::~ShardOffer() {
  if (claimed_end_ < 0) close();
  wait();
}

int64_t ShardOffer::close() {
  claimed_end_ = std::min(state_->next.exchange(state_->shards), state_->shards);
  if (claimed_end_ <= 1) record_split(false);
  return claimed_end_;
}

void ShardOffer::wait() {
  if (waited_ || claimed_end_ <= 1) return;
  waited_ = true;
  const auto t1 = std::chrono::steady_clock::now();
  state_->wait_for(claimed_end_ - 1);
  record_split(paid(true, t1 - start_, std::chrono::steady_clock::now() - t1));
}

// Shard 1 of a two-shard State is the task, offered to one pool thread;
// shard 0 is not run through it. A pool thread that starts after close()
// finds no shard left and does not touch the call record.
SideTask::SideTask(void (*fn)(void*), void* context) : call_{fn, context} {
  auto run = [](void* c, int64_t) {
    const Call& call = *static_cast<const Call*>(c);
    call.fn(call.context);
  };
  state_ = ShardOffer::State::start(2, 1, run, &call_);
}

SideTask::~SideTask() {
  if (!closed_) cancel();
}

bool SideTask::close() {
  closed_ = true;
  return state_->next.exchange(2) > 1;
}

bool SideTask::finish() {
  if (close()) {
    state_->wait_for(1);
    return true;
  }
  call_.fn(call_.context);
  return false;
}

void SideTask::cancel() {
  if (close()) state_->wait_for(1);
}

}  // namespace varstate::kernels::cpu
