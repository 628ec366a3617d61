// The log of rows a CPU scatter appends after its write
// (runtime/dirty_rows.h): folds when it would overflow, the int64
// log of very tall buffers, and concurrent scatters and takes that lose no
// row.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "device_fixture.h"
#include "runtime/dirty_rows.h"
#include "scatter_test_util.h"
#include "varstate/scatter.h"

using namespace varstate;
using namespace varstate::testing;
using internal::dirty_rows;
using internal::DirtyRows;

namespace {

using Rows = std::vector<int64_t>;

Rows ascending(const std::set<int64_t>& rows) { return Rows(rows.begin(), rows.end()); }

std::vector<int64_t> random_rows(std::mt19937_64& rng, int64_t rows, int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
  return ids;
}

// A take returns exactly `written` (and not "all"), and the take after it
// nothing; `generation` follows them.
void check_take(DirtyRows& dirty, int64_t rows, uint64_t& generation,
                const std::set<int64_t>& written) {
  const DirtyRows::Taken taken = dirty.take(rows, generation);
  generation = taken.generation;
  CHECK_FALSE(taken.all);
  CHECK(taken.rows == ascending(written));
  const DirtyRows::Taken again = dirty.take(rows, generation);
  generation = again.generation;
  CHECK(again.rows.empty());
}

// Two threads each scatter_add `calls` batches of random rows of the
// [rows, 2] variable `v` (thread t's batch k has batch_size(k) rows, drawn
// from seed first_seed + t) while this thread takes the dirty rows whenever
// take_now(calls done so far) says so, and once more at the end. Checks
// that the takes, together, return exactly the rows written and never
// "all".
template <typename BatchSize, typename TakeNow>
void check_concurrent_takes(Variable& v, int64_t rows, int calls, uint64_t first_seed,
                            const BatchSize& batch_size, const TakeNow& take_now) {
  DirtyRows& dirty = dirty_rows(v);
  uint64_t generation = dirty.take(rows, 0).generation;
  std::vector<std::vector<Rows>> ids(2);
  std::set<int64_t> written;
  for (size_t th = 0; th < 2; ++th) {
    std::mt19937_64 rng(first_seed + th);
    for (int call = 0; call < calls; ++call) {
      ids[th].push_back(random_rows(rng, rows, batch_size(call)));
      written.insert(ids[th].back().begin(), ids[th].back().end());
    }
  }
  std::atomic<int> calls_done{0};
  std::atomic<int> running{2};
  auto writer = [&](size_t th) {
    for (const Rows& batch : ids[th]) {
      scatter_add(v, Tensor::from_vector<int64_t>(batch),
                  Tensor::zeros(DType::kFloat, {static_cast<int64_t>(batch.size()), 2}));
      calls_done.fetch_add(1);
    }
    running.fetch_sub(1);
  };
  std::thread a(writer, 0), b(writer, 1);
  std::set<int64_t> taken_rows;
  int takes = 0;
  bool any_all = false;
  auto take_once = [&] {
    DirtyRows::Taken t = dirty.take(rows, generation);
    generation = t.generation;
    any_all = any_all || t.all;
    taken_rows.insert(t.rows.begin(), t.rows.end());
    ++takes;
  };
  while (running.load() > 0) {
    if (take_now(calls_done.load())) {
      take_once();
    } else {
      std::this_thread::yield();
    }
  }
  a.join();
  b.join();
  take_once();
  CAPTURE(takes);
  CHECK_FALSE(any_all);
  CHECK(ascending(taken_rows) == ascending(written));
}

// Background folds on or off (DirtyRows::background_fold) while alive.
class BackgroundFolds {
 public:
  explicit BackgroundFolds(bool on) { DirtyRows::set_background_folds_for_testing(on); }
  ~BackgroundFolds() { DirtyRows::set_background_folds_for_testing(std::nullopt); }
  BackgroundFolds(const BackgroundFolds&) = delete;
  BackgroundFolds& operator=(const BackgroundFolds&) = delete;
};

}  // namespace

TEST_CASE_METHOD(FreshGraph, "dirty rows log: many scatters between takes fold, losing no row",
                 "[dirty_rows][dirty_log]") {
  const bool background = GENERATE(false, true);
  CAPTURE(background);
  BackgroundFolds folds_mode(background);
  DeviceScope on_host("/cpu:0");    // the log is a host variable's (a GPU's marks are bytes)
  constexpr int64_t kRows = 20000;  // capacity: 5000 entries
  REQUIRE(DirtyRows::log_capacity(kRows) == 5000);
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {kRows, 1}), "v");
  DirtyRows& dirty = dirty_rows(v);
  uint64_t generation = dirty.take(kRows, 0).generation;
  const uint64_t seed = 27;
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  for (const int64_t per_call : {int64_t{300}, int64_t{4999}, int64_t{7000}}) {
    CAPTURE(per_call);  // 7000: one call larger than the whole log
    const uint64_t folds = dirty.folds();
    std::set<int64_t> written;
    for (int call = 0; call < 20; ++call) {
      const std::vector<int64_t> ids = random_rows(rng, kRows, per_call);
      written.insert(ids.begin(), ids.end());
      scatter_add(v, Tensor::from_vector<int64_t>(ids),
                  Tensor::zeros(DType::kFloat, {per_call, 1}));
    }
    if (per_call < 7000) CHECK(dirty.folds() > folds);  // the log overflowed
    check_take(dirty, kRows, generation, written);
  }
}

TEST_CASE("dirty rows log: tall buffers log int64 rows", "[dirty_rows][dirty_log]") {
  const bool background = GENERATE(false, true);
  CAPTURE(background);
  BackgroundFolds folds_mode(background);
  // Rows from 100 up log int64 ids here (2^32 in a variable's DirtyRows).
  DirtyRows dirty(/*narrow_rows=*/100);
  constexpr int64_t kRows = 300;
  // Nothing is logged before the first take.
  dirty.record(kRows, Tensor::from_vector<int64_t>({5}));
  DirtyRows::Taken first = dirty.take(kRows, 0);
  CHECK(first.all);
  dirty.record(kRows, Tensor::from_vector<int64_t>({299, 3, 150, 3}));
  dirty.record(kRows, Tensor::from_vector<int32_t>({7, 298}));
  DirtyRows::Taken second = dirty.take(kRows, first.generation);
  CHECK_FALSE(second.all);
  CHECK(second.rows == Rows{3, 7, 150, 298, 299});
  // Overflow folds (capacity 4096) with the int64 log too.
  std::set<int64_t> written;
  std::mt19937_64 rng(3);
  for (int call = 0; call < 10; ++call) {
    const std::vector<int64_t> ids = random_rows(rng, kRows, 1000);
    written.insert(ids.begin(), ids.end());
    dirty.record(kRows, Tensor::from_vector<int64_t>(ids));
  }
  CHECK(dirty.folds() >= 2);
  CHECK(dirty.take(kRows, second.generation).rows == ascending(written));
}

TEST_CASE("dirty rows log: a new row count is all dirty and drops the log",
          "[dirty_rows][dirty_log]") {
  DirtyRows dirty;
  uint64_t generation = dirty.take(8, 0).generation;
  dirty.record(8, Tensor::from_vector<int32_t>({1}));
  dirty.record(12, Tensor::from_vector<int32_t>({11}));
  CHECK(dirty.take(12, generation).all);
}

TEST_CASE_METHOD(FreshGraph, "dirty rows log: concurrent scatters and takes lose no row",
                 "[dirty_rows][dirty_log]") {
  DeviceScope on_host("/cpu:0");  // the log is a host variable's (a GPU's marks are bytes)
  constexpr int64_t kRows = 50000;
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {kRows, 2}), "v");
  // Takes as fast as they come.
  check_concurrent_takes(
      v, kRows, 200, 1, [](int call) { return 1 + call % 97 * 20; }, [](int) { return true; });
}

TEST_CASE("dirty rows log: appends of every length and index type keep every row",
          "[dirty_rows][dirty_log]") {
  // Lengths around the copy's 4-wide steps, starting at every alignment.
  DirtyRows dirty;
  constexpr int64_t kRows = 1000;
  uint64_t generation = dirty.take(kRows, 0).generation;
  std::mt19937_64 rng(11);
  for (const bool wide : {false, true}) {
    CAPTURE(wide);
    std::set<int64_t> written;
    for (int64_t n = 1; n <= 13; ++n) {
      const std::vector<int64_t> ids = random_rows(rng, kRows, n);
      written.insert(ids.begin(), ids.end());
      if (wide) {
        dirty.record(kRows, Tensor::from_vector<int64_t>(ids));
      } else {
        dirty.record(kRows,
                     Tensor::from_vector<int32_t>(std::vector<int32_t>(ids.begin(), ids.end())));
      }
    }
    const DirtyRows::Taken taken = dirty.take(kRows, generation);
    generation = taken.generation;
    CHECK_FALSE(taken.all);
    CHECK(taken.rows == ascending(written));
  }
}

TEST_CASE_METHOD(FreshGraph,
                 "dirty rows log: after an overflow the kernel marks until the take, then logs",
                 "[dirty_rows][dirty_log]") {
  DeviceScope on_host("/cpu:0");      // the log is a host variable's (a GPU's marks are bytes)
  BackgroundFolds folds_mode(false);  // as without a second pool thread
  constexpr int64_t kRows = 20000;    // capacity: 5000 entries
  const int64_t width = GENERATE(int64_t{1}, int64_t{64});
  CAPTURE(width);  // 64 floats: 256-byte rows, logged even while overflowing
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {kRows, width}), "v");
  DirtyRows& dirty = dirty_rows(v);
  uint64_t generation = dirty.take(kRows, 0).generation;
  std::mt19937_64 rng(41);
  auto scatter_some = [&](std::set<int64_t>& written) {
    const std::vector<int64_t> ids = random_rows(rng, kRows, 3000);
    written.insert(ids.begin(), ids.end());
    scatter_update(v, Tensor::from_vector<int64_t>(ids),
                   Tensor::zeros(DType::kFloat, {3000, width}));
  };
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    std::set<int64_t> written;
    const uint64_t folds = dirty.folds();
    scatter_some(written);
    CHECK(dirty.folds() == folds);  // logged
    scatter_some(written);
    CHECK(dirty.folds() == folds + 1);  // overflowed: folded
    for (int call = 0; call < 5; ++call) scatter_some(written);
    // Narrow rows were marked by the kernel since: no more folds; wide
    // ones fold at every call from the second.
    CHECK(dirty.folds() == (width == 1 ? folds + 1 : folds + 6));
    check_take(dirty, kRows, generation, written);
  }
}

TEST_CASE_METHOD(FreshGraph,
                 "dirty rows log: concurrent scatters across overflows and takes lose no row",
                 "[dirty_rows][dirty_log]") {
  const bool background = GENERATE(false, true);
  CAPTURE(background);
  BackgroundFolds folds_mode(background);
  DeviceScope on_host("/cpu:0");    // the log is a host variable's (a GPU's marks are bytes)
  constexpr int64_t kRows = 20000;  // capacity: 5000 entries
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {kRows, 2}), "v");
  // A take every 12 calls or so: the log overflows (about 11,000 entries)
  // between most of them, so scatters switch to kernel marks mid-flight, or
  // (background) hand full logs to a pool thread while others append.
  int next = 12;
  check_concurrent_takes(
      v, kRows, 300, 5, [](int call) { return 1 + call % 13 * 150; },
      [&next](int calls_done) {
        if (calls_done < next) return false;
        next += 12;
        return true;
      });
  CHECK(dirty_rows(v).folds() > 0);
}

TEST_CASE_METHOD(FreshGraph,
                 "dirty rows log: with background folds an overflow swaps logs and the kernel "
                 "never marks",
                 "[dirty_rows][dirty_log]") {
  DeviceScope on_host("/cpu:0");  // the log is a host variable's (a GPU's marks are bytes)
  BackgroundFolds folds_mode(true);
  constexpr int64_t kRows = 20000;  // capacity: 5000 entries
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {kRows, 1}), "v");
  DirtyRows& dirty = dirty_rows(v);
  uint64_t generation = dirty.take(kRows, 0).generation;
  std::mt19937_64 rng(43);
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    std::set<int64_t> written;
    const uint64_t folds = dirty.folds();
    for (int call = 0; call < 9; ++call) {  // 18,000 entries: over three logs' worth
      const std::vector<int64_t> ids = random_rows(rng, kRows, 2000);
      written.insert(ids.begin(), ids.end());
      scatter_update(v, Tensor::from_vector<int64_t>(ids), Tensor::zeros(DType::kFloat, {2000, 1}));
      // Logging goes on: no switch to the kernel's marks.
      CHECK(dirty.marks_if_overflowed(kRows, 4) == nullptr);
    }
    CHECK(dirty.folds() == folds + 4);  // at calls 3, 5, 7 and 9
    check_take(dirty, kRows, generation, written);
  }
}

TEST_CASE(
    "dirty rows: a writer that marks during a take and finishes before it ends is in the "
    "next take",
    "[dirty_rows]") {
  // A writer that marks before its write (a partitioned or GPU scatter)
  // sets a byte after the take has read the bytes, and leaves before the
  // take is over: the take must count it as in flight, keep the byte map
  // in use, and so find the row at the next take.
  DirtyRows dirty;
  constexpr int64_t kRows = 64;
  uint64_t generation = dirty.take(kRows, 0).generation;
  std::optional<DirtyRows::Writing> writing(std::in_place, dirty);
  DirtyRows::Marks marks = dirty.marks(kRows);
  REQUIRE(marks);
  marks[3].store(1);
  dirty.set_after_collect_for_testing([&] {
    marks[17].store(1);  // after the take read the bytes
    writing.reset();     // and the write is over before the take is
  });
  const DirtyRows::Taken first = dirty.take(kRows, generation);
  dirty.set_after_collect_for_testing(nullptr);
  CHECK_FALSE(first.all);
  CHECK(first.rows == Rows{3});
  const DirtyRows::Taken second = dirty.take(kRows, first.generation);
  CHECK_FALSE(second.all);
  CHECK(second.rows == Rows{3, 17});  // 3 again: it was in flight at the first take
  CHECK(dirty.take(kRows, second.generation).rows.empty());
}
