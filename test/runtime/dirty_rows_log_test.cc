// The log of rows a CPU scatter appends after its write
// (runtime/dirty_rows.h): folds when it would overflow, the int64
// log of very tall buffers, and concurrent scatters and takes that lose no
// row.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "device_fixture.h"
#include "runtime/dirty_rows.h"
#include "scatter_test_util.h"
#include "varstate/partitioned_variable.h"
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

// --- A partitioned variable's group log -------------------------------------

namespace {

// A partitioned variable over `parts`, each part tracked from now on
// (`generations`), and a record of the rows written since each part's last
// take.
struct TrackedParts {
  PartitionedVariable var;
  std::vector<int64_t> begin;  // offsets, then the total
  std::vector<uint64_t> generations;
  std::vector<std::set<int64_t>> written;  // per part, its own rows

  // Takes each part first, as an incremental save's base does, unless
  // `generations` are given (parts some other TrackedParts took).
  TrackedParts(const std::string& name, const std::vector<Variable>& parts, int64_t width,
               std::vector<uint64_t> taken = {})
      : var(make(name, parts, width)), begin(var.offsets()), generations(std::move(taken)) {
    if (std::ssize(begin) == std::ssize(parts)) begin.push_back(var.shape().dim(0));
    if (generations.empty()) {
      for (const Variable& p : parts) {
        generations.push_back(dirty_rows(p).take(p.shape().dim(0), 0).generation);
      }
    }
    written.resize(parts.size());
  }
  static PartitionedVariable make(const std::string& name, const std::vector<Variable>& parts,
                                  int64_t width) {
    int64_t rows = 0;
    for (const Variable& p : parts) rows += p.shape().dim(0);
    return PartitionedVariable(name, TensorShape({rows, width}), DType::kFloat, parts,
                               {static_cast<int64_t>(parts.size()), 1});
  }
  // Notes rows `ids` (of the whole variable) as written.
  void note(const std::vector<int64_t>& ids) {
    for (int64_t id : ids) {
      const auto k =
          static_cast<size_t>(std::upper_bound(begin.begin(), begin.end(), id) - begin.begin() - 1);
      written[k].insert(id - begin[k]);
    }
  }
};

// Parts of `rows` rows each and `width` floats a row, initialized.
std::vector<Variable> host_parts(const std::string& name, const std::vector<int64_t>& rows,
                                 int64_t width) {
  std::vector<Variable> parts;
  for (size_t k = 0; k < rows.size(); ++k) {
    parts.push_back(initialized_variable(Tensor::zeros(DType::kFloat, {rows[k], width}),
                                         name + "/part_" + std::to_string(k)));
  }
  return parts;
}

// Each part of all[0] takes exactly the rows noted for it (and clears
// them): a part may be in several partitioned variables, so the rows noted
// for it in every one of `all` are its rows.
void check_part_takes(std::vector<TrackedParts*> all) {
  TrackedParts& first = *all[0];
  for (size_t k = 0; k < first.var.variables().size(); ++k) {
    const Variable& part = first.var.variables()[k];
    CAPTURE(part.op_name());
    std::set<int64_t> expected;
    for (TrackedParts* t : all) {
      for (size_t j = 0; j < t->var.variables().size(); ++j) {
        if (t->var.variables()[j].op_name() != part.op_name()) continue;
        expected.insert(t->written[j].begin(), t->written[j].end());
        t->written[j].clear();
      }
    }
    check_take(dirty_rows(part), part.shape().dim(0), first.generations[k], expected);
    for (TrackedParts* t : all) {  // every record of this part follows the take
      for (size_t j = 0; j < t->var.variables().size(); ++j) {
        if (t->var.variables()[j].op_name() == part.op_name()) {
          t->generations[j] = first.generations[k];
        }
      }
    }
  }
}

std::vector<DirtyRows*> part_rows(const PartitionedVariable& var) {
  std::vector<DirtyRows*> rows;
  for (const Variable& p : var.variables()) rows.push_back(&dirty_rows(p));
  return rows;
}

}  // namespace

TEST_CASE_METHOD(FreshGraph,
                 "dirty rows log: a partitioned scatter logs in the parts' group, each part "
                 "takes its own rows",
                 "[dirty_rows][dirty_log][partitioned]") {
  const bool background = GENERATE(false, true);
  const int64_t width = GENERATE(int64_t{1}, int64_t{64});
  CAPTURE(background, width);  // 64 floats: 256-byte rows, logged even while overflowing
  BackgroundFolds folds_mode(background);
  DeviceScope on_host("/cpu:0");
  // 20,000 rows in uneven parts: the group's log holds 5,000 entries.
  TrackedParts t("w", host_parts("w", {7001, 5999, 7000}, width), width);
  std::mt19937_64 rng(53);
  std::shared_ptr<DirtyRows> group;
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    for (int call = 0; call < 7; ++call) {  // 21,000 entries: the log overflows
      const std::vector<int64_t> ids = random_rows(rng, 20000, 3000);
      t.note(ids);
      t.var.scatter_add(Tensor::from_vector<int64_t>(ids),
                        Tensor::zeros(DType::kFloat, {3000, width}));
      if (!group) {
        group = DirtyRows::shared_group(part_rows(t.var), t.begin);
        REQUIRE(group);  // linked by the first write
      }
    }
    CHECK(group->folds() > 0);
    if (!background && width == 1) {
      // Overflowed: the kernel marks in the group's bytes until a take.
      CHECK(group->marks_if_overflowed(20000, 4) != nullptr);
    }
    check_part_takes({&t});
    // The same group stays linked.
    CHECK(DirtyRows::shared_group(part_rows(t.var), t.begin) == group);
  }
}

TEST_CASE_METHOD(FreshGraph,
                 "dirty rows log: parts shared by partitioned variables of other layouts lose "
                 "no row",
                 "[dirty_rows][dirty_log][partitioned]") {
  DeviceScope on_host("/cpu:0");
  // a, b, c; a + b (the front of the first: not its group); b + c (b at
  // another offset).
  const std::vector<Variable> parts = host_parts("w", {300, 200, 500}, 2);
  TrackedParts abc("abc", parts, 2);
  TrackedParts ab("ab", {parts[0], parts[1]}, 2, {abc.generations[0], abc.generations[1]});
  TrackedParts bc("bc", {parts[1], parts[2]}, 2, {abc.generations[1], abc.generations[2]});
  std::mt19937_64 rng(59);
  auto scatter = [&](TrackedParts& t, int64_t n) {
    const std::vector<int64_t> ids = random_rows(rng, t.begin.back(), n);
    t.note(ids);
    t.var.scatter_update(Tensor::from_vector<int64_t>(ids), Tensor::zeros(DType::kFloat, {n, 2}));
  };
  for (int round = 0; round < 4; ++round) {
    CAPTURE(round);
    scatter(abc, 40);
    scatter(ab, 30);  // relinks a and b, taking their rows from abc's group
    scatter(abc, 20);
    scatter(bc, 25);
    if (round % 2 == 1) scatter(abc, 10);
    check_part_takes({&abc, &ab, &bc});
  }
}

TEST_CASE_METHOD(FreshGraph,
                 "dirty rows log: concurrent partitioned scatters and part takes lose no row",
                 "[dirty_rows][dirty_log][partitioned]") {
  const bool background = GENERATE(false, true);
  CAPTURE(background);
  BackgroundFolds folds_mode(background);
  DeviceScope on_host("/cpu:0");
  constexpr int64_t kRows = 20000;  // the group's log: 5,000 entries
  TrackedParts t("w", host_parts("w", {6000, 8000, 6000}, 2), 2);
  std::vector<std::vector<std::vector<int64_t>>> ids(2);
  for (size_t th = 0; th < 2; ++th) {
    std::mt19937_64 rng(61 + th);
    for (int call = 0; call < 200; ++call) {
      ids[th].push_back(random_rows(rng, kRows, 1 + call % 13 * 150));
      t.note(ids[th].back());
    }
  }
  std::atomic<int> running{2};
  auto writer = [&](size_t th) {
    for (const std::vector<int64_t>& batch : ids[th]) {
      t.var.scatter_add(Tensor::from_vector<int64_t>(batch),
                        Tensor::zeros(DType::kFloat, {static_cast<int64_t>(batch.size()), 2}));
    }
    running.fetch_sub(1);
  };
  std::vector<std::set<int64_t>> taken(3);
  bool any_all = false;
  auto take_all = [&] {
    for (size_t k = 0; k < 3; ++k) {
      const Variable& part = t.var.variables()[k];
      const DirtyRows::Taken got = dirty_rows(part).take(part.shape().dim(0), t.generations[k]);
      t.generations[k] = got.generation;
      any_all = any_all || got.all;
      taken[k].insert(got.rows.begin(), got.rows.end());
    }
  };
  std::thread a(writer, 0), b(writer, 1);
  int takes = 0;
  while (running.load() > 0) {
    take_all();
    ++takes;
  }
  a.join();
  b.join();
  take_all();
  CAPTURE(takes);
  CHECK_FALSE(any_all);
  for (size_t k = 0; k < 3; ++k) {
    CAPTURE(k);
    CHECK(ascending(taken[k]) == ascending(t.written[k]));
  }
}

TEST_CASE(
    "dirty rows log: a part's take while a writer marks its group keeps the rows for the "
    "next take",
    "[dirty_rows][dirty_log][partitioned]") {
  BackgroundFolds folds_mode(false);
  DirtyRows p0, p1;
  constexpr int64_t kRows = 64;  // per part
  uint64_t g0 = p0.take(kRows, 0).generation;
  uint64_t g1 = p1.take(kRows, 0).generation;
  const std::vector<DirtyRows*> parts = {&p0, &p1};
  const std::vector<int64_t> begin = {0, kRows, 2 * kRows};
  std::shared_ptr<DirtyRows> group = DirtyRows::link_group(parts, begin);
  REQUIRE(DirtyRows::shared_group(parts, begin) == group);
  // One call longer than the whole log (4,096 entries): the group overflows,
  // and narrow rows are marked by the kernel from then on.
  std::vector<int64_t> many(4097, 70);  // row 6 of part 1
  group->record(2 * kRows, many);
  std::optional<DirtyRows::Writing> writing(std::in_place, *group);
  DirtyRows::Marks marks = group->marks_if_overflowed(2 * kRows, 4);
  REQUIRE(marks);
  marks[3].store(1);          // part 0, row 3
  marks[kRows + 9].store(1);  // part 1, row 9
  // Taken while the writer is in flight: the rows, left marked in the group.
  DirtyRows::Taken t0 = p0.take(kRows, g0);
  CHECK_FALSE(t0.all);
  CHECK(t0.rows == Rows{3});
  DirtyRows::Taken t1 = p1.take(kRows, g1);
  CHECK(t1.rows == (Rows{6, 9}));
  writing.reset();
  // Taken again after it: the same rows (the writer may have written them
  // after the first takes read the marks), then none.
  t0 = p0.take(kRows, t0.generation);
  CHECK(t0.rows == Rows{3});
  t1 = p1.take(kRows, t1.generation);
  CHECK(t1.rows == (Rows{6, 9}));
  CHECK(p0.take(kRows, t0.generation).rows.empty());
  CHECK(p1.take(kRows, t1.generation).rows.empty());
}
