// CPU scatter kernels against the naive reference loop: every op and dtype,
// int32 and int64 indices, unique and heavily duplicated indices, scalar
// updates, guard rows around the table, and the bounds check.
#include <catch2/catch.hpp>

#include <Eigen/Core>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/index_check.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/scatter.h"
#include "kernels/cpu/stream_store.h"
#include "kernels/cuda/compiled_arch.h"
#include "scatter_test_util.h"
#include "test_util.h"
#include "varstate/error.h"

using namespace varstate;
using namespace varstate::testing;
namespace cpu = varstate::kernels::cpu;

namespace {

// Five pool threads (unless the environment says otherwise): on a 2-core
// machine this still exercises uneven row and column splits. Runs before
// main, ahead of the first use of the pool.
const bool kThreadsSet = [] {
  setenv("VARSTATE_CPU_THREADS", "5", /*overwrite=*/0);
  return true;
}();

constexpr int64_t kGuardRows = 2;

// Forces the serial path (every threshold out of reach) or the pool's
// (every threshold 0) for the scope; both must give the same bytes.
enum class Path {
  kSerial,
  kPool
};
class ForcedPath {
 public:
  explicit ForcedPath(Path path) : saved_(cpu::parallel_thresholds()) {
    cpu::parallel_thresholds() = cpu::ParallelThresholds::all(
        path == Path::kSerial ? std::numeric_limits<int64_t>::max() : 0);
  }
  ~ForcedPath() { cpu::parallel_thresholds() = saved_; }
  ForcedPath(const ForcedPath&) = delete;
  ForcedPath& operator=(const ForcedPath&) = delete;

 private:
  cpu::ParallelThresholds saved_;
};

// A rows x width table between guard rows; table() points past the guard.
template <typename T>
struct GuardedTable {
  int64_t rows, width;
  std::vector<T> data;
  GuardedTable(int64_t rows, int64_t width, uint64_t seed, bool general_values)
      : rows(rows),
        width(width),
        data(random_ints<T>((rows + 2 * kGuardRows) * width, seed, general_values ? -100 : -8,
                            general_values ? 100 : 8)) {
    for (int64_t i = 0; i < kGuardRows * width; ++i) {
      data[i] = from_int<T>(77);
      data[data.size() - 1 - i] = from_int<T>(77);
    }
  }
  T* table() { return data.data() + kGuardRows * width; }
  bool guards_intact() const {
    for (int64_t i = 0; i < kGuardRows * width; ++i) {
      if (!(data[i] == from_int<T>(77)) || !(data[data.size() - 1 - i] == from_int<T>(77))) {
        return false;
      }
    }
    return true;
  }
};

// Runs the kernel and the reference on the same input; checks the results
// (guard rows included) are byte-identical.
template <typename T, typename Index>
void check_against_reference(ScatterOp op, int64_t rows, int64_t width,
                             const std::vector<Index>& indices, bool scalar, uint64_t seed) {
  const bool general = true;
  GuardedTable<T> got(rows, width, seed, op == ScatterOp::kDiv);
  GuardedTable<T> want = got;
  const std::vector<T> updates =
      updates_for<T>(op, scalar ? 1 : indices.size() * width, seed + 1, general);
  const int64_t bad = cpu::scatter<T, Index>(op, got.table(), rows, width, indices.data(),
                                             static_cast<int64_t>(indices.size()), updates.data(),
                                             scalar, /*deterministic=*/false);
  CHECK(bad == -1);
  reference_scatter<T, Index>(op, want.table(), width, indices, updates, scalar);
  const int64_t diff = first_difference(got.data, want.data);
  INFO("first differing element (guards included): " << diff);
  CHECK(diff == -1);
  CHECK(got.guards_intact());
}

template <typename T, typename Index>
void check_all_ops(uint64_t seed) {
  constexpr int64_t kRows = 37;
  for (ScatterOp op : ops_for<T>()) {
    for (int64_t width : {1, 3, 4, 32, 129}) {
      for (bool duplicates : {false, true}) {
        for (bool scalar : {false, true}) {
          CAPTURE(dtype_name(dtype_of<T>), sizeof(Index), op_name(op), width, duplicates, scalar,
                  seed);
          const std::vector<Index> indices = duplicates ? duplicate_indices<Index>(300, kRows, seed)
                                                        : unique_indices<Index>(29, kRows, seed);
          check_against_reference<T, Index>(op, kRows, width, indices, scalar, seed);
          ++seed;
        }
      }
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("cpu scatter matches the reference loop for every op", "[scatter]", float,
                   double, half, bfloat16, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                   uint32_t, uint64_t, complex64, complex128) {
  const Path path = GENERATE(Path::kSerial, Path::kPool);
  CAPTURE(path == Path::kPool);
  ForcedPath forced(path);
  check_all_ops<TestType, int32_t>(kSeed);
  check_all_ops<TestType, int64_t>(kSeed + 1000);
}

// The 16-bit float types, with the Eigen type the kernels compute with and
// the bits of a NaN's exponent.
template <typename T>
struct Float16Type;
template <>
struct Float16Type<bfloat16> {
  using Eigen = ::Eigen::bfloat16;
  static constexpr uint16_t kInf = 0x7f80;
  static constexpr uint16_t kQuietNan = 0x7fc0;
};
template <>
struct Float16Type<half> {
  using Eigen = ::Eigen::half;
  static constexpr uint16_t kInf = 0x7c00;
  static constexpr uint16_t kQuietNan = 0x7e00;
};

// What the Eigen type's operators (TensorFlow's CPU scatters) make of the
// bits t and u under op.
template <typename T>
uint16_t eigen_op(ScatterOp op, uint16_t t, uint16_t u) {
  using E = typename Float16Type<T>::Eigen;
  const auto a = Eigen::numext::bit_cast<E>(t);
  const auto b = Eigen::numext::bit_cast<E>(u);
  E r = b;
  switch (op) {
    case ScatterOp::kUpdate:
      break;
    case ScatterOp::kAdd:
      r = a + b;
      break;
    case ScatterOp::kSub:
      r = a - b;
      break;
    case ScatterOp::kMul:
      r = a * b;
      break;
    case ScatterOp::kDiv:
      r = a / b;
      break;
    case ScatterOp::kMin:
      r = b < a ? b : a;
      break;
    case ScatterOp::kMax:
      r = a < b ? b : a;
      break;
  }
  return Eigen::numext::bit_cast<uint16_t>(r);
}

TEMPLATE_TEST_CASE("cpu scatter of 16-bit floats rounds as Eigen does, NaNs and ties included",
                   "[scatter]", bfloat16, half) {
  using F = Float16Type<TestType>;
  const auto is_nan = [](uint16_t bits) { return (bits & 0x7fffu) > F::kInf; };
  // Zeros, subnormals, the smallest and largest normals, values one unit
  // apart (their sums and products fall on ties), infinities, quiet and
  // signalling NaNs of both signs with payloads (for each type's layout);
  // then random bits.
  const std::vector<uint16_t> special =
      std::is_same_v<TestType, bfloat16>
          ? std::vector<uint16_t>{0x0000, 0x8000, 0x0001, 0x807f, 0x0080, 0x8080, 0x3f80, 0xbf80,
                                  0x3f81, 0xbf81, 0x4001, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0,
                                  0xffc0, 0x7f81, 0xff81, 0x7fff, 0xffff, 0x7fa5, 0x3c00, 0x4049}
          : std::vector<uint16_t>{0x0000, 0x8000, 0x0001, 0x83ff, 0x0400, 0x8400, 0x3c00, 0xbc00,
                                  0x3c01, 0xbc01, 0x4001, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00,
                                  0xfe00, 0x7c01, 0xfc01, 0x7fff, 0xffff, 0x7d55, 0x1400, 0x4248};
  constexpr int64_t kRows = 48, kWidth = 67;  // vector lanes and a tail
  std::mt19937_64 rng(kSeed);
  auto values = [&](size_t n, size_t offset) {
    std::vector<TestType> v(n);
    for (size_t i = 0; i < n; ++i) {
      v[i] = TestType::from_bits((i + offset) % 3 == 0 ? special[(i / 3 + offset) % special.size()]
                                                       : static_cast<uint16_t>(rng()));
    }
    return v;
  };
  std::vector<int64_t> rows(kRows);  // each row once, shuffled
  for (int64_t r = 0; r < kRows; ++r) rows[r] = r;
  std::shuffle(rows.begin(), rows.end(), rng);
  const Path path = GENERATE(Path::kSerial, Path::kPool);
  const bool scalar = GENERATE(false, true);
  ForcedPath forced(path);
  for (const ScatterOp op : {ScatterOp::kAdd, ScatterOp::kSub, ScatterOp::kMul, ScatterOp::kDiv,
                             ScatterOp::kMin, ScatterOp::kMax}) {
    CAPTURE(op_name(op), path == Path::kPool, scalar);
    const std::vector<TestType> before = values(kRows * kWidth, 0);
    const std::vector<TestType> updates = values(scalar ? 1 : kRows * kWidth, 1);
    std::vector<TestType> got = before;
    REQUIRE(cpu::scatter<TestType, int64_t>(op, got.data(), kRows, kWidth, rows.data(), kRows,
                                            updates.data(), scalar, false) == -1);
    int64_t mismatches = 0, first = -1;
    for (int64_t i = 0; i < kRows; ++i) {
      for (int64_t c = 0; c < kWidth; ++c) {
        const int64_t at = rows[i] * kWidth + c;
        const uint16_t t = before[at].bits, u = updates[scalar ? 0 : i * kWidth + c].bits;
        // Of two NaN operands, which one an operation passes on (its sign)
        // is up to the instruction's operand order, which the compiler
        // picks (IEEE 754 leaves it open): either quiet NaN then.
        const bool both_nan =
            is_nan(t) && is_nan(u) && op != ScatterOp::kMin && op != ScatterOp::kMax;
        const bool ok = both_nan ? (got[at].bits & 0x7fffu) == F::kQuietNan
                                 : got[at].bits == eigen_op<TestType>(op, t, u);
        if (!ok) {
          if (first < 0) first = at;
          ++mismatches;
        }
      }
    }
    INFO("first differing element " << first << " of " << mismatches);
    CHECK(mismatches == 0);
  }
}

TEMPLATE_TEST_CASE("cpu scatter splits large inputs over threads without losing duplicates",
                   "[scatter]", float, bfloat16, int8_t, int64_t, complex128) {
  // Split over the pool: row shards, column shards for the widest rows,
  // skewed indices.
  ForcedPath forced(Path::kPool);
  uint64_t seed = kSeed + 7;
  for (int64_t width : {int64_t{1}, int64_t{3}, int64_t{32}, int64_t{129}, int64_t{512},
                        4096 / int64_t{sizeof(TestType)} * 2 + 3}) {
    for (ScatterOp op : {ScatterOp::kUpdate, ScatterOp::kAdd, ScatterOp::kMul}) {
      for (bool duplicates : {false, true}) {
        const int64_t rows = 3001;
        const int64_t n = std::max<int64_t>(2000, (1 << 19) / (width * sizeof(TestType)));
        CAPTURE(dtype_name(dtype_of<TestType>), op_name(op), width, duplicates, n, seed);
        const std::vector<int64_t> indices =
            duplicates ? duplicate_indices<int64_t>(n, rows, seed)
                       : unique_indices<int64_t>(std::min(n, rows), rows, seed);
        check_against_reference<TestType, int64_t>(op, rows, width, indices, false, seed);
        ++seed;
      }
    }
  }
}

// A table split by rows into uneven parts (with guard rows around each)
// and updated by scatter_parts must end up equal to the whole table updated
// by scatter, with nothing written outside the parts.
TEMPLATE_TEST_CASE("cpu scatter_parts on row parts equals scatter on the whole", "[scatter]", float,
                   half, int8_t, uint64_t, complex64) {
  using T = TestType;
  // (rows, width, parts, indices, layout): serial (one shard per part), and
  // multithreaded with few and with many parts (indices bucketed by part).
  // The kernel finds a row's part in a table of blocks when every part has
  // rows and there are at most 4,096 blocks of the shortest part's length;
  // else it counts the bounds (up to 32 parts) or searches them.
  enum Layout {
    kEven,
    kEmptyPart,
    kOneRowFirst
  };
  const auto [rows, width, num_parts, num_indices, layout] = GENERATE(
      std::tuple<int64_t, int64_t, int, int64_t, Layout>{101, 5, 3, 3000, kEven},
      std::tuple<int64_t, int64_t, int, int64_t, Layout>{1000, 64, 4, 20000, kEven},
      std::tuple<int64_t, int64_t, int, int64_t, Layout>{1001, 16, 20, 20000, kEven},
      std::tuple<int64_t, int64_t, int, int64_t, Layout>{101, 5, 3, 3000, kEmptyPart},
      std::tuple<int64_t, int64_t, int, int64_t, Layout>{5000, 3, 4, 20000, kOneRowFirst},
      std::tuple<int64_t, int64_t, int, int64_t, Layout>{5000, 3, 40, 20000, kOneRowFirst});
  // TensorFlow's uneven split: the first rows % parts parts get one more row.
  std::vector<int64_t> begin = {0};
  for (int k = 0; k < num_parts; ++k) {
    begin.push_back(begin.back() + rows / num_parts + (k < rows % num_parts ? 1 : 0));
  }
  if (layout == kEmptyPart) begin[2] = begin[1];  // part 1 empty, part 2 longer
  if (layout == kOneRowFirst) begin[1] = 1;       // part 0 one row, part 1 longer
  const Path path = GENERATE(Path::kSerial, Path::kPool);
  ForcedPath forced(path);
  uint64_t seed = kSeed + 31;
  for (ScatterOp op : ops_for<T>()) {
    for (bool scalar : {false, true}) {
      CAPTURE(dtype_name(dtype_of<T>), op_name(op), scalar, seed, rows, width, num_parts,
              static_cast<int>(layout), path == Path::kPool);
      const auto indices = duplicate_indices<int64_t>(num_indices, rows, seed);
      const auto table = random_ints<T>(rows * width, seed, 1, 8);
      const auto updates =
          updates_for<T>(op, scalar ? 1 : indices.size() * width, seed + 1, /*general=*/true);
      std::vector<T> whole = table;
      cpu::scatter<T, int64_t>(op, whole.data(), rows, width, indices.data(),
                               static_cast<int64_t>(indices.size()), updates.data(), scalar, false);
      const T guard = from_int<T>(77);
      std::vector<std::vector<T>> parts;
      std::vector<T*> bases;
      for (size_t k = 0; k + 1 < begin.size(); ++k) {
        std::vector<T> part(width, guard);
        part.insert(part.end(), table.begin() + begin[k] * width,
                    table.begin() + begin[k + 1] * width);
        part.insert(part.end(), width, guard);
        parts.push_back(std::move(part));
      }
      for (auto& part : parts) bases.push_back(part.data() + width);
      cpu::scatter_parts<T, int64_t>(op, bases.data(), begin.data(), num_parts, width,
                                     indices.data(), static_cast<int64_t>(indices.size()),
                                     updates.data(), scalar);
      std::vector<T> joined;
      for (const auto& part : parts) {
        for (int64_t c = 0; c < width; ++c) {
          CHECK(std::memcmp(&part[c], &guard, sizeof(T)) == 0);
          CHECK(std::memcmp(&part[part.size() - 1 - c], &guard, sizeof(T)) == 0);
        }
        joined.insert(joined.end(), part.begin() + width, part.end() - width);
      }
      CHECK(first_difference(joined, whole) == -1);
      ++seed;
    }
  }
}

// The bounds check runs in the kernel's first pass over the indices: a bad
// index anywhere (the last of a long batch included) is reported by its
// position and nothing is written, on either path, for scatter and
// scatter_parts.
TEMPLATE_TEST_CASE("cpu scatter with a bad index writes nothing and names its position",
                   "[scatter]", int32_t, int64_t) {
  using Index = TestType;
  const Path path = GENERATE(Path::kSerial, Path::kPool);
  ForcedPath forced(path);
  const int64_t rows = 5000, width = 16, n = 200000;
  const std::vector<int64_t> begin = {0, 1200, 3000, rows};
  for (ScatterOp op : {ScatterOp::kUpdate, ScatterOp::kAdd, ScatterOp::kMax}) {
    for (int64_t pos : {n - 1, n / 2, int64_t{0}}) {
      for (Index bad : {Index(-1), Index(rows), std::numeric_limits<Index>::max()}) {
        CAPTURE(path == Path::kPool, op_name(op), pos, static_cast<int64_t>(bad));
        std::vector<Index> indices = duplicate_indices<Index>(n, rows, kSeed + pos);
        indices[pos] = bad;
        const std::vector<float> updates(n * width, 3.0f);
        const std::vector<float> before = random_ints<float>(rows * width, kSeed, -8, 8);
        std::vector<float> table = before;
        CHECK(cpu::scatter<float, Index>(op, table.data(), rows, width, indices.data(), n,
                                         updates.data(), false, false) == pos);
        CHECK(first_difference(table, before) == -1);
        if constexpr (sizeof(Index) == 8) {
          std::vector<float*> parts;
          for (size_t k = 0; k + 1 < begin.size(); ++k) {
            parts.push_back(table.data() + begin[k] * width);
          }
          CHECK(cpu::scatter_parts<float, int64_t>(op, parts.data(), begin.data(), 3, width,
                                                   indices.data(), n, updates.data(),
                                                   false) == pos);
          CHECK(first_difference(table, before) == -1);
        }
      }
    }
  }
}

// A scatter_update into a table larger than the last-level cache stores
// its rows around the caches (scatter_streams_updates): made to happen on
// small tables here by calling the cache empty. Each call must leave the
// table bitwise as the cached path does (the last duplicate wins, serial
// and pool paths, the whole table and parts), and only whole-line rows at
// line-aligned bases stream.
TEST_CASE("cpu scatter_update streamed around the caches equals the cached path", "[scatter]") {
  struct CacheSize {
    explicit CacheSize(int64_t bytes) { cpu::set_last_level_cache_bytes_for_testing(bytes); }
    ~CacheSize() { cpu::set_last_level_cache_bytes_for_testing(std::nullopt); }
  };
  const Path path = GENERATE(Path::kSerial, Path::kPool);
  ForcedPath forced(path);
  // 16 and 64 floats: whole lines; 12: not (never streamed).
  for (const int64_t width : {int64_t{16}, int64_t{64}, int64_t{12}}) {
    const int64_t rows = 40000, n = 20000;  // n rows of updates: 0.9-5 MiB
    const int64_t row_bytes = width * int64_t{sizeof(float)};
    CAPTURE(path == Path::kPool, width);
    // Uniform ids (a sample repeats few rows: ids_repeat is false, or
    // nothing would stream), and some rows written twice in a row, of
    // which the second must win.
    std::vector<int64_t> indices(static_cast<size_t>(n));
    std::mt19937_64 rng(kSeed + static_cast<uint64_t>(width));
    for (int64_t i = 0; i < n; ++i) {
      indices[static_cast<size_t>(i)] =
          i % 97 == 1 ? indices[static_cast<size_t>(i - 1)] : static_cast<int64_t>(rng() % rows);
    }
    REQUIRE_FALSE(cpu::ids_repeat(indices.data(), n));
    const auto updates = random_ints<float>(n * width, kSeed + 1, -50, 50);
    const auto before = random_ints<float>(rows * width, kSeed + 2, -50, 50);
    // 64-byte aligned tables (a std::vector's need not be).
    using Aligned = std::unique_ptr<float[], decltype(&std::free)>;
    auto aligned_floats = [](int64_t count) {
      const size_t bytes = (static_cast<size_t>(count) * sizeof(float) + 63) / 64 * 64;
      return Aligned(static_cast<float*>(std::aligned_alloc(64, bytes)), &std::free);
    };
    auto aligned = [&] {
      Aligned t = aligned_floats(rows * width);
      std::memcpy(t.get(), before.data(), before.size() * sizeof(float));
      return t;
    };
    std::vector<float> want = before;
    {
      CacheSize huge(int64_t{1} << 50);  // nothing streams
      REQUIRE_FALSE(cpu::scatter_streams_updates(kernels::ScatterOp::kUpdate, false, rows,
                                                 row_bytes, n, true));
      REQUIRE(cpu::scatter<float, int64_t>(kernels::ScatterOp::kUpdate, want.data(), rows, width,
                                           indices.data(), n, updates.data(), false, false) == -1);
    }
    const bool streams = width != 12 && n * row_bytes >= cpu::kStreamMinBytes;
    {
      // The table is 2/3 of the cache: rows of 256 bytes and more stream.
      CacheSize larger(rows * row_bytes * 3 / 2);
      CHECK(cpu::scatter_streams_updates(kernels::ScatterOp::kUpdate, false, rows, row_bytes, n,
                                         true) == (streams && row_bytes >= 256));
    }
    CacheSize none(0);
    CHECK(cpu::scatter_streams_updates(kernels::ScatterOp::kUpdate, false, rows, row_bytes, n,
                                       true) == streams);
    CHECK_FALSE(cpu::scatter_streams_updates(kernels::ScatterOp::kUpdate, false, rows, row_bytes, n,
                                             /*bases_aligned=*/false));
    CHECK_FALSE(
        cpu::scatter_streams_updates(kernels::ScatterOp::kAdd, false, rows, row_bytes, n, true));
    CHECK_FALSE(cpu::scatter_streams_updates(kernels::ScatterOp::kUpdate, /*updates_scalar=*/true,
                                             rows, row_bytes, n, true));
    auto whole = aligned();
    REQUIRE(cpu::scatter<float, int64_t>(kernels::ScatterOp::kUpdate, whole.get(), rows, width,
                                         indices.data(), n, updates.data(), false, false) == -1);
    CHECK(first_difference(std::vector<float>(whole.get(), whole.get() + rows * width), want) ==
          -1);
    // Parts: each at its own line-aligned base.
    const std::vector<int64_t> begin = {0, 1000, 1700, rows};
    std::vector<Aligned> parts;
    std::vector<float*> bases;
    for (size_t k = 0; k + 1 < begin.size(); ++k) {
      const int64_t part_rows = begin[k + 1] - begin[k];
      parts.push_back(aligned_floats(part_rows * width));
      std::memcpy(parts.back().get(), before.data() + begin[k] * width,
                  static_cast<size_t>(part_rows * width) * sizeof(float));
      bases.push_back(parts.back().get());
    }
    REQUIRE(cpu::scatter_parts<float, int64_t>(kernels::ScatterOp::kUpdate, bases.data(),
                                               begin.data(), 3, width, indices.data(), n,
                                               updates.data(), false) == -1);
    std::vector<float> joined;
    for (size_t k = 0; k + 1 < begin.size(); ++k) {
      joined.insert(joined.end(), parts[k].get(),
                    parts[k].get() + (begin[k + 1] - begin[k]) * width);
    }
    CHECK(first_difference(joined, want) == -1);
  }
}

// ids_repeat samples the ids at even strides: uniform ids over many rows
// and distinct ids (sorted or not) do not repeat; skewed ids, runs of one
// id and ids over few rows do.
TEMPLATE_TEST_CASE("cpu ids_repeat tells skewed ids from spread ones", "[scatter]", int32_t,
                   int64_t) {
  using Index = TestType;
  std::mt19937_64 rng(kSeed);
  auto uniform = [&](int64_t n, int64_t rows) {
    std::vector<Index> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = static_cast<Index>(rng() % static_cast<uint64_t>(rows));
    return ids;
  };
  for (const int64_t n : {int64_t{1}, int64_t{100}, int64_t{1000}, int64_t{65536}}) {
    CAPTURE(n);
    const auto spread = uniform(n, 1 << 20);
    CHECK_FALSE(cpu::ids_repeat(spread.data(), n));
    std::vector<Index> distinct(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) distinct[static_cast<size_t>(i)] = static_cast<Index>(3 * i);
    CHECK_FALSE(cpu::ids_repeat(distinct.data(), n));
    if (n < 100) continue;
    const auto few_rows = uniform(n, 50);
    CHECK(cpu::ids_repeat(few_rows.data(), n));
    const std::vector<Index> one(static_cast<size_t>(n), Index{7});
    CHECK(cpu::ids_repeat(one.data(), n));
    // A tenth of the ids on one hot row, the rest spread.
    std::vector<Index> skewed = spread;
    for (size_t i = 0; i < skewed.size(); i += 10) skewed[i] = Index{12345};
    CHECK(cpu::ids_repeat(skewed.data(), n));
    // Zipf-like ids from the tests' generator.
    const auto zipf = duplicate_indices<Index>(n, 1 << 20, kSeed + 3);
    CHECK(cpu::ids_repeat(zipf.data(), n));
  }
}

// Which threshold a scatter splits from: combining ops on spread ids into
// a table of more than kSplitTableCaches last-level caches from
// scatter_combining_bytes, the rest from scatter_bytes; the lower one never
// raises a forced split's.
TEST_CASE("cpu scatter_split_threshold: combining ops on spread ids into large tables",
          "[scatter]") {
  const cpu::ParallelThresholds saved = cpu::parallel_thresholds();
  cpu::ParallelThresholds& t = cpu::parallel_thresholds();
  t.scatter_bytes = int64_t{1} << 30;
  t.scatter_combining_bytes = int64_t{128} << 20;
  const int64_t cache = int64_t{32} << 20;
  cpu::set_last_level_cache_bytes_for_testing(cache);
  const int64_t n = 65536, big = int64_t{200} << 20, small = int64_t{64} << 20;
  const int64_t large_table = cpu::kSplitTableCaches * cache + 1;
  const int64_t cached_table = cpu::kSplitTableCaches * cache;
  std::mt19937_64 rng(kSeed);
  std::vector<int64_t> spread(static_cast<size_t>(n));
  for (auto& id : spread) id = static_cast<int64_t>(rng() % (uint64_t{1} << 20));
  const auto zipf = duplicate_indices<int64_t>(n, 1 << 20, kSeed + 3);
  const std::vector<int32_t> spread32(spread.begin(), spread.end());
  for (const ScatterOp op : {ScatterOp::kAdd, ScatterOp::kSub, ScatterOp::kMul, ScatterOp::kDiv,
                             ScatterOp::kMin, ScatterOp::kMax}) {
    CAPTURE(static_cast<int>(op));
    CHECK(cpu::scatter_split_threshold(op, big, large_table,
                                       cpu::RepeatsRows<int64_t>(spread.data(), n)) ==
          t.scatter_combining_bytes);
    CHECK(cpu::scatter_split_threshold(op, big, large_table,
                                       cpu::RepeatsRows<int32_t>(spread32.data(), n)) ==
          t.scatter_combining_bytes);
    CHECK(cpu::scatter_split_threshold(
              op, big, large_table, cpu::RepeatsRows<int64_t>(zipf.data(), n)) == t.scatter_bytes);
    CHECK(cpu::scatter_split_threshold(op, small, large_table,
                                       cpu::RepeatsRows<int64_t>(spread.data(), n)) ==
          t.scatter_bytes);
    CHECK(cpu::scatter_split_threshold(op, big, cached_table,
                                       cpu::RepeatsRows<int64_t>(spread.data(), n)) ==
          t.scatter_bytes);
  }
  CHECK(cpu::scatter_split_threshold(ScatterOp::kUpdate, big, large_table,
                                     cpu::RepeatsRows<int64_t>(spread.data(), n)) ==
        t.scatter_bytes);
  t.scatter_bytes = 0;  // a forced split stays forced
  CHECK(cpu::scatter_split_threshold(ScatterOp::kAdd, big, large_table,
                                     cpu::RepeatsRows<int64_t>(spread.data(), n)) == 0);
  t.scatter_bytes = t.scatter_combining_bytes = std::numeric_limits<int64_t>::max();
  CHECK(cpu::scatter_split_threshold(ScatterOp::kAdd, big, large_table,
                                     cpu::RepeatsRows<int64_t>(spread.data(), n)) ==
        std::numeric_limits<int64_t>::max());
  cpu::set_last_level_cache_bytes_for_testing(std::nullopt);
  cpu::parallel_thresholds() = saved;
}

TEST_CASE("cpu scatter calls in a split trial write the reference bytes either way", "[scatter]") {
  // Between the trial size and the split threshold, a class of calls
  // alternates one thread and the pool, then keeps one (SplitTrials): every
  // call must equal the reference loop, whichever way it ran.
  const cpu::ParallelThresholds saved = cpu::parallel_thresholds();
  cpu::ParallelThresholds& t = cpu::parallel_thresholds();
  t.scatter_bytes = t.scatter_combining_bytes = std::numeric_limits<int64_t>::max();
  t.scatter_trial_bytes = 0;
  cpu::scatter_split_trials().reset();
  constexpr int kCalls = 2 * cpu::SplitTrials::kSamples + 3;
  uint64_t seed = kSeed + 91;
  for (ScatterOp op : {ScatterOp::kUpdate, ScatterOp::kAdd}) {
    for (bool duplicates : {false, true}) {
      const int64_t rows = 5000, width = 16, n = 4000;
      const std::vector<int64_t> indices = duplicates ? duplicate_indices<int64_t>(n, rows, seed)
                                                      : unique_indices<int64_t>(n, rows, seed);
      for (int call = 0; call < kCalls; ++call) {
        CAPTURE(op_name(op), duplicates, call);
        check_against_reference<float, int64_t>(op, rows, width, indices, false, seed + call);
      }
      ++seed;
    }
  }
  // Each of the 4 classes timed 2 * kSamples calls and then decided; a
  // split that a loaded pool refused counts as serial, and a class short
  // of split calls times every call but the first.
  const cpu::SplitTrials::Counts counts = cpu::scatter_split_trials().counts();
  CHECK(counts.serial + counts.split >= 4 * 2 * cpu::SplitTrials::kSamples);
  CHECK(counts.serial + counts.split <= 4 * (kCalls - 1));
  CHECK(counts.serial >= 4 * cpu::SplitTrials::kSamples);
  cpu::scatter_split_trials().reset();
  cpu::parallel_thresholds() = saved;
}

TEST_CASE("cpu scatter_update with duplicates: the last occurrence wins", "[scatter]") {
  std::vector<float> table(6 * 2, 0.0f);
  const std::vector<int32_t> indices = {2, 5, 2, 0, 2};
  const std::vector<float> updates = {1, 1, 2, 2, 3, 3, 4, 4, 5, 5};
  cpu::scatter<float, int32_t>(ScatterOp::kUpdate, table.data(), 6, 2, indices.data(), 5,
                               updates.data(), false, false);
  CHECK(table == std::vector<float>{4, 4, 0, 0, 5, 5, 0, 0, 0, 0, 2, 2});
  // The same on the pool's path, every row hit many times.
  ForcedPath forced(Path::kPool);
  const int64_t rows = 300, width = 8, n = 50000;
  const auto many = duplicate_indices<int32_t>(n, rows, kSeed);
  std::vector<float> values(n * width);
  for (int64_t i = 0; i < n * width; ++i) values[i] = static_cast<float>(i / width);
  std::vector<float> got(rows * width, -1.0f), want = got;
  CHECK(cpu::scatter<float, int32_t>(ScatterOp::kUpdate, got.data(), rows, width, many.data(), n,
                                     values.data(), false, false) == -1);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < width; ++c) want[many[i] * width + c] = static_cast<float>(i);
  }
  CHECK(first_difference(got, want) == -1);
}

TEST_CASE("cpu scatter results do not depend on the deterministic flag", "[scatter]") {
  const int64_t rows = 500, width = 64, n = 20000;
  const auto indices = duplicate_indices<int32_t>(n, rows, kSeed);
  std::vector<float> updates(n * width);
  std::mt19937_64 gen(kSeed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& u : updates) u = dist(gen);
  std::vector<float> a(rows * width, 0.5f), b = a;
  cpu::scatter<float, int32_t>(ScatterOp::kAdd, a.data(), rows, width, indices.data(), n,
                               updates.data(), false, false);
  cpu::scatter<float, int32_t>(ScatterOp::kAdd, b.data(), rows, width, indices.data(), n,
                               updates.data(), false, true);
  CHECK(first_difference(a, b) == -1);
}

TEST_CASE("cpu scatter_min/max reject complex types", "[scatter]") {
  std::vector<complex64> table(4), updates(2);
  const std::vector<int32_t> indices = {0, 1};
  CHECK_THROWS_AS(
      (cpu::scatter<complex64, int32_t>(ScatterOp::kMin, table.data(), 2, 2, indices.data(), 1,
                                        updates.data(), false, false)),
      InvalidArgumentError);
}

TEST_CASE("cpu scatter with no indices or empty rows changes nothing", "[scatter]") {
  std::vector<int32_t> table = {1, 2, 3};
  const std::vector<int32_t> updates = {9};
  cpu::scatter<int32_t, int32_t>(ScatterOp::kAdd, table.data(), 3, 1, nullptr, 0, updates.data(),
                                 true, false);
  CHECK(table == std::vector<int32_t>{1, 2, 3});
}

TEMPLATE_TEST_CASE("cpu validate_indices finds the first bad position", "[scatter]", int32_t,
                   int64_t) {
  using Index = TestType;
  for (int64_t n : {int64_t{1}, int64_t{255}, int64_t{257}, int64_t{100000}, int64_t{1} << 20}) {
    const int64_t rows = 1000;
    std::vector<Index> indices = unique_indices<Index>(std::min(n, rows), rows, kSeed);
    indices.resize(n);
    for (int64_t i = rows; i < n; ++i) indices[i] = static_cast<Index>(i % rows);
    CAPTURE(sizeof(Index), n);
    CHECK(cpu::validate_indices(indices.data(), n, rows) == -1);
    CHECK(cpu::validate_indices(indices.data(), n, int64_t{0}) == 0);
    for (int64_t pos : {int64_t{0}, n / 2, n - 1}) {
      for (Index bad : {Index(-1), Index(rows), std::numeric_limits<Index>::max(),
                        std::numeric_limits<Index>::min()}) {
        CAPTURE(pos, static_cast<int64_t>(bad));
        std::vector<Index> copy = indices;
        copy[pos] = bad;
        if (pos + 1 < n) copy[n - 1] = Index(-5);  // a later bad index is not reported
        CHECK(cpu::validate_indices(copy.data(), n, rows) == pos);
      }
    }
  }
  if constexpr (sizeof(Index) == 8) {
    const std::vector<int64_t> big = {3, int64_t{1} << 40};
    CHECK(cpu::validate_indices(big.data(), 2, int64_t{1} << 40) == 1);
    CHECK(cpu::validate_indices(big.data(), 2, (int64_t{1} << 40) + 1) == -1);
  }
}

// The launcher's choice of the 16-byte compare-and-swap follows the virtual
// architecture of the code that runs (cudaFuncAttributes::ptxVersion), as the
// kernel's `#if __CUDA_ARCH__ >= 900` does: sm_80 PTX JIT-compiled for an
// H100 reports ptxVersion 80 and must take the deterministic path.
TEST_CASE("the 16-byte CAS is chosen by the compiled architecture", "[scatter]") {
  using varstate::kernels::cuda::ptx_has_cas128;
  CHECK_FALSE(ptx_has_cas128(0));  // unknown
  for (int ptx : {52, 70, 75, 80, 86, 89}) {
    CAPTURE(ptx);
    CHECK_FALSE(ptx_has_cas128(ptx));
  }
  for (int ptx : {90, 100, 120}) {
    CAPTURE(ptx);
    CHECK(ptx_has_cas128(ptx));
  }
}

namespace {

// n values of T: random normals around +-4 with, every fifth, a special one
// (signed zeros, subnormals, the largest finite, infinities, NaNs).
template <typename T>
std::vector<T> scaled_test_values(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0.0, 4.0);
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> special = {0.0,
                                       -0.0,
                                       inf,
                                       -inf,
                                       std::numeric_limits<double>::quiet_NaN(),
                                       1e-42,
                                       -3e-8,
                                       6.0e4,
                                       3.0e38,
                                       -1.7e308,
                                       1.0 + 1.0 / 1024,
                                       -0.1};
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) {
    const double x = i % 5 == 4 ? special[gen() % special.size()] : normal(gen);
    v[i] = static_cast<T>(x);
  }
  return v;
}

template <typename T>
uint64_t bits_of(T x) {
  uint64_t b = 0;
  std::memcpy(&b, &x, sizeof(T));
  return b;
}

template <typename T>
bool is_nan_value(T x) {
  const float f = static_cast<float>(x);
  return f != f;
}

}  // namespace

// The fused kernel against its definition: the element-wise multiply
// kernel, then scatter_sub, bit for bit (a NaN result may carry either
// operand's payload, which IEEE 754 leaves open: any NaN then), over both
// index types, duplicates, widths with vector tails, and the pool's split.
TEMPLATE_TEST_CASE("cpu scatter_sub_scaled equals a multiply then scatter_sub, bit for bit",
                   "[scatter]", float, double) {
  using T = TestType;
  const Path path = GENERATE(Path::kSerial, Path::kPool);
  ForcedPath forced(path);
  uint64_t seed = kSeed + 31;
  for (const T scale : {static_cast<T>(0.1), static_cast<T>(-3.0), static_cast<T>(1e-30)}) {
    for (const int64_t width : {int64_t{1}, int64_t{3}, int64_t{16}, int64_t{67}}) {
      for (const bool duplicates : {false, true}) {
        for (const bool wide_index : {false, true}) {
          CAPTURE(dtype_name(dtype_of<T>), path == Path::kPool, static_cast<float>(scale), width,
                  duplicates, wide_index, seed);
          constexpr int64_t kRows = 203;
          const int64_t n = duplicates ? 900 : 150;
          const std::vector<int64_t> ids = duplicates ? duplicate_indices<int64_t>(n, kRows, seed)
                                                      : unique_indices<int64_t>(n, kRows, seed);
          const std::vector<int32_t> ids32(ids.begin(), ids.end());
          const std::vector<T> updates = scaled_test_values<T>(n * width, seed + 1);
          const std::vector<T> before = scaled_test_values<T>(kRows * width, seed + 2);
          kernels::BinaryGeometry g;
          g.layout = kernels::BinaryGeometry::kScalarB;
          g.n = n * width;
          std::vector<T> scaled(updates.size());
          REQUIRE(cpu::arithmetic<T>(kernels::BinaryOp::kMul, updates.data(), &scale, scaled.data(),
                                     g) == kernels::kKernelOk);
          std::vector<T> want = before, got = before;
          std::vector<std::atomic<uint8_t>> marks(kRows);
          REQUIRE(cpu::scatter<T, int64_t>(ScatterOp::kSub, want.data(), kRows, width, ids.data(),
                                           n, scaled.data(), false, false) == -1);
          const int64_t bad =
              wide_index
                  ? cpu::scatter_sub_scaled<T, int64_t>(got.data(), kRows, width, ids.data(), n,
                                                        updates.data(), scale, marks.data())
                  : cpu::scatter_sub_scaled<T, int32_t>(got.data(), kRows, width, ids32.data(), n,
                                                        updates.data(), scale, marks.data());
          REQUIRE(bad == -1);
          int64_t mismatches = 0, first = -1;
          for (size_t i = 0; i < want.size(); ++i) {
            const bool ok =
                is_nan_value(want[i]) ? is_nan_value(got[i]) : bits_of(got[i]) == bits_of(want[i]);
            if (!ok && mismatches++ == 0) first = static_cast<int64_t>(i);
          }
          INFO("first differing element " << first << " of " << mismatches);
          CHECK(mismatches == 0);
          std::vector<uint8_t> touched(kRows);
          for (int64_t id : ids) touched[static_cast<size_t>(id)] = 1;
          for (int64_t r = 0; r < kRows; ++r) {
            INFO("row " << r);
            CHECK(marks[static_cast<size_t>(r)].load() == touched[static_cast<size_t>(r)]);
          }
          ++seed;
        }
      }
    }
  }
}

TEST_CASE("cpu scatter_sub_scaled with a bad index writes and marks nothing", "[scatter]") {
  const Path path = GENERATE(Path::kSerial, Path::kPool);
  CAPTURE(path == Path::kPool);
  ForcedPath forced(path);
  std::vector<float> table(8 * 2, 1.f);
  const std::vector<float> updates(4 * 2, 1.f);
  std::vector<std::atomic<uint8_t>> marks(8);
  for (const std::vector<int64_t>& ids :
       {std::vector<int64_t>{1, 8, 3, 3}, std::vector<int64_t>{1, 2, 3, -1}}) {
    const int64_t bad = cpu::scatter_sub_scaled<float, int64_t>(table.data(), 8, 2, ids.data(), 4,
                                                                updates.data(), 0.5f, marks.data());
    CHECK(bad == (ids[1] == 8 ? 1 : 3));
    CHECK(table == std::vector<float>(8 * 2, 1.f));
    for (const auto& m : marks) CHECK(m.load() == 0);
  }
}

TEST_CASE("cpu scatter marks exactly its indices' rows, on one thread and split", "[scatter]") {
  const Path path = GENERATE(Path::kSerial, Path::kPool);
  CAPTURE(path == Path::kPool);
  ForcedPath forced(path);
  // Narrow rows, many rows, and rows wide enough to be split by columns
  // too (only the shard of the first columns marks).
  for (const auto& [rows, width, n] :
       {std::array<int64_t, 3>{64, 4, 40}, std::array<int64_t, 3>{int64_t{1} << 16, 64, 4 << 16},
        std::array<int64_t, 3>{256, 4096, 1024}}) {
    std::vector<float> table(static_cast<size_t>(rows * width)),
        updates(static_cast<size_t>(n * width), 1.f);
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = (i * 7919) % (rows / 2) * 2;
    std::vector<std::atomic<uint8_t>> marks(static_cast<size_t>(rows));
    REQUIRE(cpu::scatter<float, int64_t>(kernels::ScatterOp::kAdd, table.data(), rows, width,
                                         ids.data(), n, updates.data(), false, true,
                                         marks.data()) == -1);
    std::vector<uint8_t> expected(static_cast<size_t>(rows));
    for (int64_t id : ids) expected[static_cast<size_t>(id)] = 1;
    for (int64_t r = 0; r < rows; ++r) {
      INFO("rows " << rows << ", row " << r);
      CHECK(marks[static_cast<size_t>(r)].load() == expected[static_cast<size_t>(r)]);
    }
  }
}

// scatter_parts marks each row in its own part's marks (uneven parts, more
// than the branch-free lookup's 32 too), and a row of no elements is marked.
TEST_CASE("cpu scatter_parts marks exactly its indices' rows, in their parts", "[scatter]") {
  const Path path = GENERATE(Path::kSerial, Path::kPool);
  for (const int num_parts : {3, 40}) {
    for (const int64_t width : {int64_t{0}, int64_t{4}, int64_t{64}}) {
      CAPTURE(path == Path::kPool, num_parts, width);
      ForcedPath forced(path);
      const int64_t rows = 4099, n = 3 * rows;
      std::vector<int64_t> begin = {0};
      for (int k = 0; k < num_parts; ++k) {
        begin.push_back(begin.back() + rows / num_parts + (k < rows % num_parts ? 1 : 0));
      }
      std::vector<float> table(static_cast<size_t>(rows * width));
      const std::vector<float> updates(static_cast<size_t>(n * width), 1.f);
      std::vector<int64_t> ids(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = (i * 7919) % (rows / 3) * 3;
      std::vector<float*> bases;
      std::vector<std::vector<std::atomic<uint8_t>>> marks;
      std::vector<std::atomic<uint8_t>*> mark_bases;
      for (int k = 0; k < num_parts; ++k) {
        bases.push_back(table.data() + begin[static_cast<size_t>(k)] * width);
        marks.emplace_back(static_cast<size_t>(begin[k + 1] - begin[k]));
      }
      for (auto& m : marks) mark_bases.push_back(m.data());
      REQUIRE(cpu::scatter_parts<float, int64_t>(kernels::ScatterOp::kUpdate, bases.data(),
                                                 begin.data(), num_parts, width, ids.data(), n,
                                                 updates.data(), false, mark_bases.data()) == -1);
      std::vector<uint8_t> expected(static_cast<size_t>(rows));
      for (int64_t id : ids) expected[static_cast<size_t>(id)] = 1;
      for (int k = 0; k < num_parts; ++k) {
        for (int64_t r = begin[k]; r < begin[k + 1]; ++r) {
          INFO("part " << k << ", row " << r);
          CHECK(marks[static_cast<size_t>(k)][static_cast<size_t>(r - begin[k])].load() ==
                expected[static_cast<size_t>(r)]);
        }
      }
    }
  }
}

TEST_CASE("cpu scatter with marks and a bad index writes nothing", "[scatter]") {
  const Path path = GENERATE(Path::kSerial, Path::kPool);
  CAPTURE(path == Path::kPool);
  ForcedPath forced(path);
  std::vector<float> table(8 * 2, 0.f), updates(3 * 2, 1.f);
  const std::vector<int64_t> ids = {1, 8, 3};
  std::vector<std::atomic<uint8_t>> marks(8);
  CHECK(cpu::scatter<float, int64_t>(kernels::ScatterOp::kUpdate, table.data(), 8, 2, ids.data(), 3,
                                     updates.data(), false, true, marks.data()) == 1);
  CHECK(table == std::vector<float>(8 * 2, 0.f));
  // The rows are marked as they are written: none, here.
  for (int64_t r = 0; r < 8; ++r) CHECK(marks[static_cast<size_t>(r)].load() == 0);
  const std::vector<int64_t> begin = {0, 3, 8};
  std::vector<std::atomic<uint8_t>> low(3), high(5);
  std::atomic<uint8_t>* part_marks[] = {low.data(), high.data()};
  float* parts[] = {table.data(), table.data() + 3 * 2};
  CHECK(cpu::scatter_parts<float, int64_t>(kernels::ScatterOp::kUpdate, parts, begin.data(), 2, 2,
                                           ids.data(), 3, updates.data(), false, part_marks) == 1);
  CHECK(table == std::vector<float>(8 * 2, 0.f));
  for (const auto& m : low) CHECK(m.load() == 0);
  for (const auto& m : high) CHECK(m.load() == 0);
}

TEMPLATE_TEST_CASE("first_bad_index finds the first index out of range, wherever it sits",
                   "[scatter][index_check]", int32_t, int64_t) {
  using Index = TestType;
  using kernels::cpu::first_bad_index;
  using kernels::cpu::first_bad_index_portable;
  auto reference = [](const std::vector<Index>& v, int64_t rows) -> int64_t {
    for (size_t i = 0; i < v.size(); ++i) {
      const auto x = static_cast<int64_t>(v[i]);
      if (x < 0 || x >= rows) return static_cast<int64_t>(i);
    }
    return -1;
  };
  auto both = [&](const std::vector<Index>& v, int64_t rows) {
    const auto n = static_cast<int64_t>(v.size());
    const int64_t want = reference(v, rows);
    CHECK(first_bad_index(v.data(), n, rows) == want);
    CHECK(first_bad_index_portable(v.data(), n, rows) == want);
  };
  const int64_t rows = 1000;
  // Lengths around the 256-index blocks and the vector widths, a bad index
  // (negative, == rows, the type's extremes) at every position of the first
  // blocks and in the tail, a second one after it.
  for (int64_t n : {1, 3, 8, 255, 256, 257, 600}) {
    std::vector<Index> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<Index>(i % rows);
    CAPTURE(n);
    both(v, rows);
    for (Index badv : {Index{-1}, static_cast<Index>(rows), std::numeric_limits<Index>::min(),
                       std::numeric_limits<Index>::max()}) {
      for (int64_t at = 0; at < n; at += (n > 300 ? 7 : 1)) {
        CAPTURE(badv, at);
        std::vector<Index> w = v;
        w[static_cast<size_t>(at)] = badv;
        if (at + 3 < n) w[static_cast<size_t>(at + 3)] = Index{-2};
        both(w, rows);
      }
    }
  }
  // rows - 1 is in range; no rows: every index is bad; no indices.
  both({Index{999}, Index{0}}, rows);
  both({Index{0}}, 0);
  CHECK(first_bad_index(static_cast<const Index*>(nullptr), 0, rows) == -1);
  // int32 indices into 2^31 rows or more: only the negatives are bad.
  const int64_t huge = int64_t{1} << 33;
  std::vector<Index> big(300, std::numeric_limits<Index>::max());
  both(big, huge);
  big[290] = Index{-5};
  both(big, huge);
}
