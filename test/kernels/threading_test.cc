// The CPU kernels' split over the thread pool (kernels/cpu/parallel.h): the
// shard hand-off runs every shard once, and each kernel gives the same
// bytes on the calling thread alone and split over the pool (the training
// ops' bytes against their reference loop: test/kernels/training_ops_test.cc).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/common.h"
#include "kernels/cpu/dense_update.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gather.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/random.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/cpu/training_ops.h"
#include "test_util.h"
#include "training_test_util.h"

using namespace varstate;
using namespace varstate::testing;
namespace cpu = varstate::kernels::cpu;
using kernels::BinaryGeometry;
using kernels::BinaryOp;
using kernels::DenseUpdateOp;

namespace {

// Runs fn with every threshold out of reach (serial), then with every
// threshold 0 (the pool), and returns both outputs.
template <typename Fn>
std::pair<std::vector<char>, std::vector<char>> both_paths(const Fn& fn) {
  const cpu::ParallelThresholds saved = cpu::parallel_thresholds();
  cpu::parallel_thresholds() = cpu::ParallelThresholds::all(std::numeric_limits<int64_t>::max());
  std::vector<char> serial = fn();
  cpu::parallel_thresholds() = cpu::ParallelThresholds::all(0);
  std::vector<char> pool = fn();
  cpu::parallel_thresholds() = saved;
  return {serial, pool};
}

// "" when the two outputs are the same bytes, else where they first differ
// (not the outputs themselves: Catch would print megabytes).
std::string first_difference(const std::vector<char>& serial, const std::vector<char>& pool) {
  if (serial.size() != pool.size()) {
    return "sizes " + std::to_string(serial.size()) + " and " + std::to_string(pool.size());
  }
  const auto [s, p] = std::mismatch(serial.begin(), serial.end(), pool.begin());
  if (s == serial.end()) return "";
  return "byte " + std::to_string(s - serial.begin()) + " of " + std::to_string(serial.size());
}

template <typename T>
std::vector<char> bytes_of(const std::vector<T>& v) {
  std::vector<char> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<float> random_floats(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

}  // namespace

TEST_CASE("run_shards runs every shard exactly once", "[threads]") {
  for (int64_t shards : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{7}, int64_t{64}}) {
    CAPTURE(shards);
    std::vector<std::atomic<int>> runs(static_cast<size_t>(shards));
    auto fn = [&](int64_t s) { runs[s].fetch_add(1); };
    cpu::run_shards(shards, fn);
    for (auto& r : runs) CHECK(r.load() == 1);
  }
}

TEST_CASE("a ShardOffer's shards are run by the pool or taken back, never both", "[threads]") {
  for (int round = 0; round < 200; ++round) {
    const int64_t shards = 2 + round % 5;
    std::vector<std::atomic<int>> runs(static_cast<size_t>(shards));
    auto fn = [&](int64_t s) { runs[s].fetch_add(1); };
    int64_t taken_from = 0;
    {
      cpu::ShardOffer offer(shards, fn);
      taken_from = offer.close();
      for (int64_t s = taken_from; s < shards; ++s) runs[s].fetch_add(1);  // the caller's
      offer.wait();
      CAPTURE(round, shards, taken_from);
      REQUIRE(taken_from >= 1);
      REQUIRE(taken_from <= shards);
      CHECK(runs[0].load() == 0);
      for (int64_t s = 1; s < shards; ++s) CHECK(runs[s].load() == 1);
    }
  }
}

TEST_CASE("a SideTask runs once: on the pool, or at finish on the caller", "[threads]") {
  int by_pool = 0;
  for (int round = 0; round < 300; ++round) {
    std::atomic<int> runs{0};
    std::atomic<bool> on_caller{false};
    const auto caller = std::this_thread::get_id();
    auto fn = [&] {
      runs.fetch_add(1);
      on_caller.store(std::this_thread::get_id() == caller);
    };
    cpu::SideTask task(fn);
    if (round % 3 == 0) std::this_thread::yield();  // give the pool a chance
    const bool pool_ran = task.finish();
    CAPTURE(round, pool_ran);
    CHECK(runs.load() == 1);  // done when finish returns
    CHECK(on_caller.load() == !pool_ran);
    by_pool += pool_ran;
  }
  if (cpu::pool_threads() <= 1) CHECK(by_pool == 0);
}

TEST_CASE("a cancelled SideTask runs at most once, and not after cancel returns", "[threads]") {
  std::atomic<int> runs{0};
  int rounds = 0;
  for (; rounds < 300; ++rounds) {
    const int before = runs.load();
    auto fn = [&] { runs.fetch_add(1); };
    {
      cpu::SideTask task(fn);
      if (rounds % 2 == 0) {
        task.cancel();
      }  // else the destructor cancels
    }
    CHECK(runs.load() - before <= 1);
  }
  const int after = runs.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(runs.load() == after);  // no pool thread ran one late
  CHECK(after <= rounds);
}

TEST_CASE("worth_splitting needs the threshold and a pool of several threads", "[threads]") {
  CHECK_FALSE(cpu::worth_splitting(0, 1));
  CHECK_FALSE(cpu::worth_splitting(1000, std::numeric_limits<int64_t>::max()));
  CHECK(cpu::worth_splitting(1000, 0) == (cpu::pool_threads() > 1));
}

namespace {

// Runs a class of calls through `trials` until it has decided, each split
// call taking `split_s` seconds and each serial one `serial_s`; returns the
// ways of the timed calls, in order.
std::vector<bool> run_trial(cpu::SplitTrials& trials, uint64_t key, double serial_s,
                            double split_s) {
  std::vector<bool> ways;
  for (int call = 0; call < 100; ++call) {
    const cpu::SplitTrials::Choice c = trials.choose(key);
    if (!c.timed) {
      if (!ways.empty()) break;  // decided
      continue;                  // the untimed first call
    }
    ways.push_back(c.split);
    trials.record(key, c.split, c.split ? split_s : serial_s);
  }
  return ways;
}

}  // namespace

TEST_CASE("a split trial times both ways alternately, then keeps the faster", "[threads]") {
  cpu::SplitTrials trials;
  // The first call of a class runs on one thread, untimed.
  const cpu::SplitTrials::Choice first = trials.choose(7);
  CHECK_FALSE(first.split);
  CHECK_FALSE(first.timed);
  const std::vector<bool> ways = run_trial(trials, 7, /*serial_s=*/2.0, /*split_s=*/1.0);
  CHECK(ways == std::vector<bool>{true, false, true, false, true, false});
  const cpu::SplitTrials::Choice after = trials.choose(7);
  CHECK(after.split);
  CHECK_FALSE(after.timed);
  CHECK(trials.counts().split == cpu::SplitTrials::kSamples);
  CHECK(trials.counts().serial == cpu::SplitTrials::kSamples);

  // Each class decides alone: here the pool is slower, there it saves less
  // than kMinGain, and both stay on one thread.
  (void)run_trial(trials, 8, 1.0, 2.0);
  CHECK_FALSE(trials.choose(8).split);
  (void)run_trial(trials, 9, 1.0, 1.0 - cpu::SplitTrials::kMinGain / 2);
  CHECK_FALSE(trials.choose(9).split);
  CHECK(trials.choose(7).split);

  // The fastest call of each way counts: one slow split call (a page
  // fault, a descheduled thread) does not hide a faster split.
  cpu::SplitTrials outliers;
  (void)outliers.choose(1);
  int split_calls = 0;
  while (true) {
    const cpu::SplitTrials::Choice c = outliers.choose(1);
    if (!c.timed) break;
    outliers.record(1, c.split, c.split ? (split_calls++ == 0 ? 50.0 : 1.0) : 2.0);
  }
  CHECK(outliers.choose(1).split);
}

TEST_CASE("a split trial measures again after kRecheckCalls calls", "[threads]") {
  cpu::SplitTrials trials;
  (void)run_trial(trials, 3, /*serial_s=*/2.0, /*split_s=*/1.0);
  // run_trial's last call was the first decided one: kRecheckCalls - 2
  // more, then the untimed first call of the new trial; the call that ends
  // the loop is its first timed one.
  int64_t untimed = 0;
  while (!trials.choose(3).timed) ++untimed;
  CHECK(untimed == cpu::SplitTrials::kRecheckCalls - 1);
  // The machine changed: one thread is now the faster way.
  trials.record(3, true, 3.0);
  (void)run_trial(trials, 3, /*serial_s=*/1.0, /*split_s=*/3.0);
  CHECK_FALSE(trials.choose(3).split);
}

TEST_CASE("a split trial whose splits the pool refuses keeps asking for one", "[threads]") {
  // A loaded pool (worth_splitting) turns the requested splits into serial
  // calls, recorded as such: the class does not decide on serial samples
  // alone, and asks for a split every call once it has them.
  cpu::SplitTrials trials;
  (void)trials.choose(5);
  for (int call = 0; call < 20; ++call) {
    const cpu::SplitTrials::Choice c = trials.choose(5);
    REQUIRE(c.timed);
    if (call >= 2 * cpu::SplitTrials::kSamples) CHECK(c.split);
    trials.record(5, /*split=*/false, 1.0);
  }
  CHECK(trials.counts().split == 0);
  CHECK(trials.counts().serial == 20);
}

TEST_CASE("split trials are safe to use from many threads at once", "[threads]") {
  cpu::SplitTrials trials;
  constexpr int kThreads = 4;
  constexpr int kCalls = 1000;
  std::atomic<int64_t> recorded{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t) + 1);
      for (int i = 0; i < kCalls; ++i) {
        const uint64_t key = rng() % 5;
        const cpu::SplitTrials::Choice c = trials.choose(key);
        if (!c.timed) continue;
        // Key 0's splits are faster, the others' slower.
        trials.record(key, c.split, (c.split == (key == 0)) ? 1.0 : 2.0);
        recorded.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const cpu::SplitTrials::Counts counts = trials.counts();
  // Records that arrive after their class decided are dropped, so the
  // counts may be fewer than the records, never more.
  CHECK(counts.serial + counts.split <= recorded.load());
  CHECK(counts.serial >= cpu::SplitTrials::kSamples);
  CHECK(counts.split >= cpu::SplitTrials::kSamples);
  // Each class has decided, and none has come to its next measurement yet
  // (about 4 * 1000 / 5 calls each, under kRecheckCalls).
  for (uint64_t key = 0; key < 5; ++key) {
    CAPTURE(key);
    const cpu::SplitTrials::Choice c = trials.choose(key);
    CHECK_FALSE(c.timed);
    CHECK(c.split == (key == 0));
  }
}

TEST_CASE("a ThreadScratch is kept per thread, and one held twice at once is two buffers",
          "[threads]") {
  struct Tag;
  using Scratch = kernels::cpu::ThreadScratch<int64_t, Tag>;
  const int64_t* kept = nullptr;
  {
    Scratch a(1000);
    REQUIRE(a.size() >= 1000);
    kept = a.data();
    std::fill_n(a.data(), 1000, int64_t{7});
    {
      // Held at once with `a`: a buffer of its own, `a`'s values untouched.
      Scratch b(1000);
      REQUIRE(b.size() >= 1000);
      CHECK(b.data() != a.data());
      std::fill_n(b.data(), 1000, int64_t{-1});
      Scratch c(10);
      CHECK(c.data() != a.data());
      CHECK(c.data() != b.data());
    }
    CHECK(std::count(a.data(), a.data() + 1000, int64_t{7}) == 1000);
  }
  {
    // The next call on this thread gets the kept buffer again, grown in place
    // only when it asks for more.
    Scratch again(500);
    CHECK(again.data() == kept);
    CHECK(again.size() >= 1000);
  }
  // Another thread keeps a buffer of its own.
  const int64_t* other = nullptr;
  std::thread([&] {
    Scratch s(1000);
    other = s.data();
  }).join();
  CHECK(other != kept);
  {
    // Buffers above kMaxKept bytes are given back after the call.
    struct Big;
    using BigScratch = kernels::cpu::ThreadScratch<uint8_t, Big>;
    { BigScratch big(BigScratch::kMaxKept + 1); }
    BigScratch small(1);
    CHECK(small.size() < BigScratch::kMaxKept);
  }
}

TEST_CASE("CPU kernels give the same bytes on one thread and split over the pool", "[threads]") {
  // Sizes around and above the default thresholds, odd counts: generated,
  // not looped over, since Catch enters a section once per run of the test
  // case (a loop around the sections ran them for its first size alone).
  const int64_t n = GENERATE(int64_t{1}, int64_t{1001}, int64_t{300007}, int64_t{1} << 20);
  CAPTURE(n);
  const std::vector<float> a = random_floats(n, kSeed), b = random_floats(n, kSeed + 1);
  SECTION("dense assign_add and assign of a scalar") {
    auto [serial, pool] = both_paths([&] {
      std::vector<float> t = a;
      cpu::dense_update<float>(DenseUpdateOp::kAdd, t.data(), b.data(), n, false);
      const float s = 0.5f;
      std::vector<float> u = a;
      cpu::dense_update<float>(DenseUpdateOp::kSub, u.data(), &s, n, true);
      t.insert(t.end(), u.begin(), u.end());
      return bytes_of(t);
    });
    CHECK(first_difference(serial, pool) == "");
  }
  SECTION("elementwise add and unary negation") {
    auto [serial, pool] = both_paths([&] {
      std::vector<float> out(2 * n);
      BinaryGeometry g;
      g.n = n;
      cpu::arithmetic<float>(BinaryOp::kAdd, a.data(), b.data(), out.data(), g);
      cpu::unary<float>(kernels::UnaryOp::kNegative, a.data(), out.data() + n, n);
      return bytes_of(out);
    });
    CHECK(first_difference(serial, pool) == "");
  }
  SECTION("random uniform, normal, truncated normal (offset start)") {
    auto [serial, pool] = both_paths([&] {
      std::vector<float> out(3 * n);
      cpu::random_uniform<float>(out.data(), n, 3, 11, 12, -1.0f, 1.0f);
      cpu::random_normal<float>(out.data() + n, n, 5, 11, 12, 0.0f, 1.0f);
      cpu::truncated_normal<float>(out.data() + 2 * n, n, 0, 11, 12, 0.0f, 1.0f);
      return bytes_of(out);
    });
    CHECK(first_difference(serial, pool) == "");
  }
  SECTION("sparse Adagrad and lazy Adam with repeated rows") {
    const int64_t width = 16, rows = n / width + 1;
    const int64_t ids = std::min<int64_t>(n, 65536);
    const std::vector<int64_t> idx = duplicate_indices<int64_t>(ids, rows, kSeed);
    const kernels::TrainingHyper h = test_hyper(false);
    const TrainingData<float> start = training_data<float>(rows * width, rows, ids * width, kSeed);
    auto [serial, pool] = both_paths([&] {
      TrainingData<float> adagrad = start, lazy = start;
      cpu::apply_sparse<float, int64_t>(TrainingOp::kAdagrad, h, adagrad.slots(), rows, width,
                                        idx.data(), ids, adagrad.grad.data(), false);
      cpu::apply_sparse<float, int64_t>(TrainingOp::kLazyAdam, h, lazy.slots(), rows, width,
                                        idx.data(), ids, lazy.grad.data(), false);
      std::vector<float> out;
      for (const TrainingData<float>* d : {&adagrad, &lazy}) {
        for (const std::vector<float>* v : {&d->var, &d->s0, &d->s1}) {
          out.insert(out.end(), v->begin(), v->end());
        }
      }
      return bytes_of(out);
    });
    CHECK(first_difference(serial, pool) == "");
    CHECK(std::memcmp(serial.data(), start.var.data(), start.var.size() * 4) != 0);
  }
  SECTION("gather rows, whole table and parts") {
    // Rows of 3 floats (12 bytes: no constant-size copy), 16 and 64 (64
    // and 256 bytes); n = 1 is shorter than the prefetch distance.
    const int64_t rows = 4099;
    for (const int64_t width : {3, 16, 64}) {
      CAPTURE(width);
      const std::vector<float> table = random_floats(rows * width, kSeed + 2);
      std::mt19937_64 gen(kSeed);
      std::vector<int64_t> idx(n);
      for (auto& i : idx) i = static_cast<int64_t>(gen() % rows);
      const std::vector<int64_t> begin = {0, 1000, 1001, rows};
      const std::vector<const void*> parts = {table.data(), table.data() + 1000 * width,
                                              table.data() + 1001 * width};
      auto [serial, pool] = both_paths([&] {
        std::vector<float> out(2 * n * width);
        cpu::gather_rows<int64_t>(table.data(), width * 4, idx.data(), n, out.data());
        cpu::gather_rows_parts<int64_t>(parts.data(), begin.data(), 3, width * 4, idx.data(), n,
                                        out.data() + n * width);
        return bytes_of(out);
      });
      CHECK(first_difference(serial, pool) == "");
      std::vector<float> want(n * width);
      for (int64_t i = 0; i < n; ++i) {
        std::memcpy(&want[i * width], &table[idx[i] * width], width * 4);
      }
      const size_t half = want.size() * 4;
      CHECK(std::memcmp(serial.data(), want.data(), half) == 0);         // whole table
      CHECK(std::memcmp(serial.data() + half, want.data(), half) == 0);  // parts
    }
  }
}
