// CUDA scatter kernels against the CPU ones (which scatter_test.cc checks
// against the reference loop): every op and dtype on random inputs with
// heavy duplicates, the deterministic path (bitwise reproducible, equal to
// the CPU), the device-side bounds check (a bad index leaves the table
// unchanged and is reported with its position and value), a table past 2^31
// elements ([large]), a complex128 hot row and a misaligned table.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <limits>
#include <map>
#include <random>
#include <string>

#include "cuda_test_util.h"
#include "kernels/cpu/scatter.h"
#include "kernels/cuda/scatter.h"
#include "scatter_test_util.h"
#include "test_util.h"

using namespace varstate;
using namespace varstate::testing;
namespace cpu = varstate::kernels::cpu;
namespace gpu = varstate::kernels::cuda;

namespace {

// Runs validate_indices + scatter on the GPU over `table` (guard rows
// included, the table proper starting at element `offset`); returns the
// table and fills *check_out.
// The table's allocation is padded to `table_granule` bytes.
template <typename T, typename Index>
std::vector<T> run_gpu(ScatterOp op, const std::vector<T>& table, int64_t offset, int64_t rows,
                       int64_t width, const std::vector<Index>& indices,
                       const std::vector<T>& updates, bool scalar, bool deterministic,
                       gpu::IndexCheck* check_out = nullptr, size_t table_granule = 16) {
  Stream stream;
  DeviceArray<T> d_table(table, table_granule);
  DeviceArray<Index> d_indices(indices);
  DeviceArray<T> d_updates(updates);
  DeviceArray<gpu::IndexCheck> d_check(std::vector<gpu::IndexCheck>(1));
  const int64_t n = static_cast<int64_t>(indices.size());
  gpu::reset_index_check(d_check.get(), stream.get());
  gpu::validate_indices(d_indices.get(), n, rows, d_check.get(), stream.get());
  gpu::scatter<T, Index>(op, d_table.get() + offset, rows, width, d_indices.get(), n,
                         d_updates.get(), scalar, deterministic, d_check.get(),
                         scratch_on(stream.get()), stream.get());
  stream.sync();
  if (check_out != nullptr) *check_out = d_check.to_host()[0];
  return d_table.to_host();
}

template <typename T, typename Index>
std::vector<T> run_cpu(ScatterOp op, std::vector<T> table, int64_t offset, int64_t rows,
                       int64_t width, const std::vector<Index>& indices,
                       const std::vector<T>& updates, bool scalar) {
  cpu::scatter<T, Index>(op, table.data() + offset, rows, width, indices.data(),
                         static_cast<int64_t>(indices.size()), updates.data(), scalar, false);
  return table;
}

// Random values that are not small integers (so that rounding depends on
// the order of operations); non-zero magnitudes in [0.5, 2] for real mul/div.
// Complex mul/div factors have moduli in [0.97, 1.03]: a hot row takes
// hundreds of them, and moduli up to 2.8 overflowed complex64 to inf/NaN,
// which compares unequal even when both sides overflow alike.
template <typename T>
std::vector<T> real_values(ScatterOp op, size_t n, uint64_t seed) {
  if constexpr (std::is_integral_v<T>) {
    return updates_for<T>(op, n, seed, /*general=*/true);
  } else {
    std::mt19937_64 gen(seed);
    const bool mul_div = op == ScatterOp::kMul || op == ScatterOp::kDiv;
    std::uniform_real_distribution<double> mag(mul_div ? 0.5 : -2.0, 2.0);
    std::bernoulli_distribution negative(0.5);
    auto draw = [&] { return (mul_div && negative(gen) ? -1.0 : 1.0) * mag(gen); };
    std::vector<T> out(n);
    for (auto& v : out) {
      if constexpr (is_complex<T>::value) {
        using R = typename T::value_type;
        if (mul_div) {
          std::uniform_real_distribution<double> modulus(0.97, 1.03), angle(0.0, 6.283185307179586);
          v = std::polar(static_cast<R>(modulus(gen)), static_cast<R>(angle(gen)));
        } else {
          v = T(static_cast<R>(draw()), static_cast<R>(draw()));
        }
      } else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
        v = T(static_cast<float>(draw()));
      } else {
        v = static_cast<T>(draw());
      }
    }
    return out;
  }
}

template <typename T>
std::string to_string_of(const T& v) {
  std::ostringstream out;
  out.precision(17);
  if constexpr (is_complex<T>::value) {
    out << "(" << v.real() << ", " << v.imag() << ")";
  } else {
    out << to_double(v);
  }
  return out.str();
}

// Complex mul/div chains: the device's complex arithmetic (libcu++) and the
// host's (libstdc++) may each round a product or quotient differently by an
// ulp or so, and a hot element takes hundreds of them in a row (seen on
// emulated GPUs, which run libcu++'s arithmetic: complex64 division drifted
// 1.4e-5 apart over such a chain).
constexpr double kComplexChainSlack = 32;

template <typename T>
bool close_enough(const T& a, const T& b) {
  if constexpr (is_complex<T>::value) {
    const bool finite = std::isfinite(a.real()) && std::isfinite(a.imag()) &&
                        std::isfinite(b.real()) && std::isfinite(b.imag());
    if (finite) {
      return std::abs(a - b) <=
             kComplexChainSlack * tolerance<T>() * std::max(1.0, static_cast<double>(std::abs(b)));
    }
  }
  return close(a, b);
}

template <typename T>
bool all_close(const std::vector<T>& got, const std::vector<T>& want, int64_t* where) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (!close_enough(got[i], want[i])) {
      *where = static_cast<int64_t>(i);
      return false;
    }
  }
  return true;
}

// The GPU result against the CPU's: bit for bit when `exact`, else within
// close()'s per-dtype tolerance (complex: close_enough's). Reports the first
// element that differs.
template <typename T>
void check_matches_cpu(const std::vector<T>& got, const std::vector<T>& want, bool exact) {
  if (exact) {
    const int64_t diff = first_difference(got, want);
    INFO("first element differing from the CPU: " << diff);
    CHECK(diff == -1);
  } else {
    int64_t where = -1;
    const bool same = all_close(got, want, &where);
    INFO("first mismatch at element " << where);
    INFO("got " << (same ? "" : to_string_of(got[where])) << ", want "
                << (same ? "" : to_string_of(want[where])));
    CHECK(same);
  }
}

// Device and host complex multiplication and division may round
// differently; everything else is the same serial computation.
template <typename T>
bool serial_result_is_exact(ScatterOp op) {
  return !(is_complex<T>::value && (op == ScatterOp::kMul || op == ScatterOp::kDiv));
}

constexpr int64_t kGuardRows = 2;

template <typename T>
std::vector<T> guarded_table(int64_t rows, int64_t width, int64_t offset, uint64_t seed) {
  std::vector<T> t = random_ints<T>(offset + (rows + 2 * kGuardRows) * width, seed, -8, 8);
  for (int64_t i = 0; i < offset + kGuardRows * width; ++i) t[i] = from_int<T>(77);
  for (int64_t i = 0; i < kGuardRows * width; ++i) t[t.size() - 1 - i] = from_int<T>(77);
  return t;
}

// Atomic path with duplicates, scatter_update: which duplicate wins is
// unspecified, so each element must come from one of its row's updates.
template <typename T, typename Index>
bool update_is_some_occurrence(const std::vector<T>& got, const std::vector<T>& before,
                               int64_t base, int64_t width, const std::vector<Index>& indices,
                               const std::vector<T>& updates) {
  std::vector<std::vector<int64_t>> hits((got.size() - base) / width + 1);
  for (size_t i = 0; i < indices.size(); ++i) hits[indices[i]].push_back(static_cast<int64_t>(i));
  for (size_t e = 0; e < got.size(); ++e) {
    const int64_t rel = static_cast<int64_t>(e) - base;
    const int64_t row = rel >= 0 ? rel / width : -1;
    if (row < 0 || row >= static_cast<int64_t>(hits.size()) - 1 || hits[row].empty()) {
      if (std::memcmp(&got[e], &before[e], sizeof(T)) != 0) return false;
      continue;
    }
    bool found = false;
    for (int64_t i : hits[row]) {
      found |= std::memcmp(&got[e], &updates[i * width + rel % width], sizeof(T)) == 0;
    }
    if (!found) return false;
  }
  return true;
}

// Row widths of the sweeps: scalar rows, odd rows, one vector, 32-element
// rows (also misaligned) and rows wider than a warp's lanes.
std::vector<int64_t> sweep_widths() {
  if (quick_mode()) return {3, 32};
  return {1, 3, 4, 32, 129};
}

template <typename T, typename Index>
void check_atomic_path(uint64_t seed) {
  constexpr int64_t kRows = 61;
  for (ScatterOp op : ops_for<T>()) {
    for (int64_t width : sweep_widths()) {
      for (bool duplicates : {false, true}) {
        for (bool scalar : {false, true}) {
          // Width 32 also runs on a table misaligned by one element.
          for (int64_t misalign : {0, width == 32 ? 1 : 0}) {
            CAPTURE(dtype_name(dtype_of<T>), sizeof(Index), op_name(op), width, duplicates, scalar,
                    misalign, seed);
            const auto indices = duplicates ? duplicate_indices<Index>(2000, kRows, seed)
                                            : unique_indices<Index>(40, kRows, seed);
            const int64_t base = misalign + kGuardRows * width;
            const auto table = guarded_table<T>(kRows, width, misalign, seed);
            // With duplicates, values whose effect does not depend on order.
            const auto updates =
                updates_for<T>(op, scalar ? 1 : indices.size() * width, seed + 1, !duplicates);
            const auto got =
                run_gpu<T, Index>(op, table, base, kRows, width, indices, updates, scalar, false);
            if (op == ScatterOp::kUpdate && duplicates && !scalar) {
              CHECK(update_is_some_occurrence(got, table, base, width, indices, updates));
            } else {
              const auto want =
                  run_cpu<T, Index>(op, table, base, kRows, width, indices, updates, scalar);
              check_matches_cpu(got, want, /*exact=*/false);
            }
            ++seed;
          }
        }
      }
    }
  }
}

template <typename T, typename Index>
void check_deterministic_path(uint64_t seed) {
  constexpr int64_t kRows = 53;
  for (ScatterOp op : ops_for<T>()) {
    for (int64_t width : sweep_widths()) {
      for (bool scalar : {false, true}) {
        CAPTURE(dtype_name(dtype_of<T>), sizeof(Index), op_name(op), width, scalar, seed);
        const auto indices = duplicate_indices<Index>(1500, kRows, seed);
        const int64_t base = kGuardRows * width;
        const auto table = guarded_table<T>(kRows, width, 0, seed);
        const auto updates = real_values<T>(op, scalar ? 1 : indices.size() * width, seed + 1);
        const auto first =
            run_gpu<T, Index>(op, table, base, kRows, width, indices, updates, scalar, true);
        const auto second =
            run_gpu<T, Index>(op, table, base, kRows, width, indices, updates, scalar, true);
        CHECK(first_difference(first, second) == -1);
        const auto want =
            run_cpu<T, Index>(op, table, base, kRows, width, indices, updates, scalar);
        check_matches_cpu(first, want, serial_result_is_exact<T>(op));
        ++seed;
      }
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("gpu atomic scatter matches the cpu kernel", "[scatter][gpu]", float, double,
                   half, bfloat16, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t,
                   uint64_t, complex64, complex128) {
  check_atomic_path<TestType, int32_t>(kSeed);
  check_atomic_path<TestType, int64_t>(kSeed + 5000);
}

TEMPLATE_TEST_CASE("gpu deterministic scatter is reproducible and equals the cpu kernel",
                   "[scatter][gpu]", float, double, half, bfloat16, int8_t, int16_t, int32_t,
                   int64_t, uint8_t, uint16_t, uint32_t, uint64_t, complex64, complex128) {
  check_deterministic_path<TestType, int32_t>(kSeed + 11);
  check_deterministic_path<TestType, int64_t>(kSeed + 7000);
}

// Sub-word types are updated with compare-and-swap on a wider unit; on a
// table whose allocation ends right after an odd-positioned last element,
// with the last row hot, that unit must stay inside the allocation (the
// scatter contract asks 1-byte tables for a 2-byte granule, 2-byte tables
// for none). Run under compute-sanitizer memcheck to see a stray access.
TEMPLATE_TEST_CASE("gpu scatter on a table ending at an odd element boundary",
                   "[scatter][gpu][quick]", half, bfloat16, int8_t, int16_t, uint8_t, uint16_t) {
  using T = TestType;
  const size_t granule = sizeof(T) == 1 ? 2 : 1;
  for (int64_t width : {1, 3}) {
    const int64_t rows = 37;
    for (bool deterministic : {false, true}) {
      for (ScatterOp op : ops_for<T>()) {
        CAPTURE(dtype_name(dtype_of<T>), width, deterministic, op_name(op));
        std::vector<int32_t> indices(300, static_cast<int32_t>(rows - 1));
        for (size_t i = 0; i < indices.size(); i += 3) indices[i] = static_cast<int32_t>(i % rows);
        const auto table = random_ints<T>(rows * width, kSeed);
        const auto updates = updates_for<T>(op, indices.size() * width, kSeed + 1, false);
        const auto got = run_gpu<T, int32_t>(op, table, 0, rows, width, indices, updates, false,
                                             deterministic, nullptr, granule);
        if (op == ScatterOp::kUpdate && !deterministic) {
          CHECK(update_is_some_occurrence(got, table, 0, width, indices, updates));
        } else {
          const auto want = run_cpu<T, int32_t>(op, table, 0, rows, width, indices, updates, false);
          CHECK(first_difference(got, want) == -1);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("gpu scatter with a bad index leaves the table unchanged", "[scatter][gpu]",
                   float, int8_t, half, complex128) {
  using T = TestType;
  const int64_t rows = 100, width = 32, n = 3000;
  for (bool deterministic : {false, true}) {
    for (ScatterOp op : {ScatterOp::kUpdate, ScatterOp::kAdd, ScatterOp::kMul}) {
      for (int64_t bad : {int64_t{-1}, rows, int64_t{1} << 40}) {
        for (int64_t pos : {int64_t{0}, int64_t{1777}, n - 1}) {
          CAPTURE(dtype_name(dtype_of<T>), deterministic, op_name(op), bad, pos);
          auto indices = duplicate_indices<int64_t>(n, rows, kSeed + pos);
          indices[pos] = bad;
          if (pos + 1 < n) indices[n - 1] = -7;  // a later bad index is not the one reported
          const auto table = random_ints<T>(rows * width, kSeed);
          const auto updates = updates_for<T>(op, n * width, kSeed + 1, true);
          gpu::IndexCheck check{};
          const auto got = run_gpu<T, int64_t>(op, table, 0, rows, width, indices, updates, false,
                                               deterministic, &check);
          CHECK(first_difference(got, table) == -1);
          CHECK(check.first_bad_position == static_cast<uint64_t>(pos));
          CHECK(check.bad_index == bad);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("gpu validate_indices reports the first bad position across blocks",
                   "[scatter][gpu]", int32_t, int64_t) {
  using Index = TestType;
  const int64_t rows = 1000, n = int64_t{1} << (quick_mode() ? 17 : 21);
  std::vector<Index> indices(n);
  for (int64_t i = 0; i < n; ++i) indices[i] = static_cast<Index>((i * 7919) % rows);
  Stream stream;
  auto validate = [&](const std::vector<Index>& idx) {
    DeviceArray<Index> d_indices(idx);
    DeviceArray<gpu::IndexCheck> d_check(std::vector<gpu::IndexCheck>(1));
    gpu::reset_index_check(d_check.get(), stream.get());
    gpu::validate_indices(d_indices.get(), n, rows, d_check.get(), stream.get());
    stream.sync();
    return d_check.to_host()[0];
  };
  const gpu::IndexCheck clean = validate(indices);
  CHECK(clean.first_bad_position == gpu::IndexCheck::kNone);
  CHECK(clean.blocks_done == ~0u);
  for (int64_t pos : {int64_t{3}, n / 2 + 1, n - 1}) {
    CAPTURE(sizeof(Index), pos);
    std::vector<Index> copy = indices;
    copy[pos] = std::numeric_limits<Index>::min();
    for (int64_t later = pos + 1; later < n; later += n / 7) copy[later] = Index(rows);
    const gpu::IndexCheck check = validate(copy);
    CHECK(check.first_bad_position == static_cast<uint64_t>(pos));
    CHECK(check.bad_index == static_cast<int64_t>(std::numeric_limits<Index>::min()));
    CHECK(check.blocks_done == ~0u);
  }
}

TEST_CASE("gpu deterministic scatter_update: the last occurrence wins", "[scatter][gpu]") {
  const std::vector<float> table(6 * 4, 0.0f);
  const std::vector<int32_t> indices = {2, 5, 2, 0, 2};
  std::vector<float> updates;
  for (int i = 1; i <= 5; ++i) updates.insert(updates.end(), 4, float(i));
  const auto got =
      run_gpu<float, int32_t>(ScatterOp::kUpdate, table, 0, 6, 4, indices, updates, false, true);
  std::vector<float> want(6 * 4, 0.0f);
  for (int c = 0; c < 4; ++c) {
    want[0 * 4 + c] = 4;
    want[2 * 4 + c] = 5;
    want[5 * 4 + c] = 2;
  }
  CHECK(got == want);
}

// A table past 2^31 elements: an int8 scatter_add (1-byte CAS on halfwords,
// 64-bit element offsets) with int64 indices near both ends and around
// 2^31. The table starts at zero, so each touched element is the wrapped
// sum of its updates and every other element stays 0 (closed form).
TEST_CASE("gpu int8 scatter_add into a table of 2^31 + 3 elements", "[scatter][gpu][large]") {
  const int64_t rows = (int64_t{1} << 31) + 3;
  std::vector<int64_t> indices;
  std::vector<int8_t> updates;
  for (int k = 0; k < 1000; ++k) {
    const int64_t near_end[] = {
        rows - 1, rows - 2, rows - 3, int64_t{1} << 31, (int64_t{1} << 31) - 1, 0};
    indices.push_back(near_end[k % 6]);
    updates.push_back(static_cast<int8_t>(k % 7 + 1));
  }
  std::map<int64_t, int8_t> want;
  for (size_t i = 0; i < indices.size(); ++i) {
    want[indices[i]] = static_cast<int8_t>(static_cast<uint8_t>(want[indices[i]]) +
                                           static_cast<uint8_t>(updates[i]));
  }
  const size_t bytes = static_cast<size_t>(rows);
  int8_t* table = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&table), bytes + 1));  // the last halfword's pad
  for (bool deterministic : {false, true}) {
    CAPTURE(deterministic);
    Stream stream;
    CUDA_OK(cudaMemsetAsync(table, 0, bytes + 1, stream.get()));
    DeviceArray<int64_t> d_indices(indices);
    DeviceArray<int8_t> d_updates(updates);
    DeviceArray<gpu::IndexCheck> d_check(std::vector<gpu::IndexCheck>(1));
    const int64_t n = static_cast<int64_t>(indices.size());
    gpu::reset_index_check(d_check.get(), stream.get());
    gpu::validate_indices(d_indices.get(), n, rows, d_check.get(), stream.get());
    gpu::scatter<int8_t, int64_t>(ScatterOp::kAdd, table, rows, 1, d_indices.get(), n,
                                  d_updates.get(), false, deterministic, d_check.get(),
                                  scratch_on(stream.get()), stream.get());
    stream.sync();
    CHECK(d_check.to_host()[0].first_bad_position == gpu::IndexCheck::kNone);
    const std::vector<int8_t> got = download(table, bytes);
    for (const auto& [index, value] : want) {
      CAPTURE(index);
      CHECK(static_cast<int>(got[static_cast<size_t>(index)]) == static_cast<int>(value));
    }
    int64_t nonzero = 0;
    for (int8_t v : got) nonzero += v != 0;
    int64_t want_nonzero = 0;
    for (const auto& [index, value] : want) want_nonzero += value != 0;
    CHECK(nonzero == want_nonzero);
  }
  cudaFree(table);
}

// Every update hits one row: the contended case of the 16-byte
// compare-and-swap (complex128 mul/div where the kernel was compiled for
// sm_90; the deterministic path elsewhere). Unit factors are exact in any
// order; general factors are compared with the CPU within tolerance.
TEST_CASE("gpu complex128 scatter on one hot row equals the cpu", "[scatter][gpu]") {
  using T = complex128;
  const int64_t rows = 8, hot = 5;
  for (int64_t width : {1, 3}) {
    for (bool deterministic : {false, true}) {
      for (bool general : {false, true}) {
        for (ScatterOp op : ops_for<T>()) {
          CAPTURE(width, deterministic, general, op_name(op));
          const std::vector<int32_t> indices(quick_mode() ? 300 : 3000, hot);
          const auto table = guarded_table<T>(rows, width, 0, kSeed);
          const int64_t base = kGuardRows * width;
          const size_t count = indices.size() * static_cast<size_t>(width);
          const auto updates = general ? real_values<T>(op, count, kSeed + 3)
                                       : updates_for<T>(op, count, kSeed + 3, false);
          const auto got = run_gpu<T, int32_t>(op, table, base, rows, width, indices, updates,
                                               false, deterministic);
          if (op == ScatterOp::kUpdate && !deterministic) {
            CHECK(update_is_some_occurrence(got, table, base, width, indices, updates));
            continue;
          }
          const auto want =
              run_cpu<T, int32_t>(op, table, base, rows, width, indices, updates, false);
          // Exact where no rounding depends on order or on device vs host
          // complex arithmetic (kernels/cuda/scatter.h).
          const bool exact =
              op == ScatterOp::kUpdate ||
              ((op == ScatterOp::kAdd || op == ScatterOp::kSub) && (!general || deterministic));
          check_matches_cpu(got, want, exact);
        }
      }
    }
  }
}

// A table whose first element sits one element past an aligned address,
// with an odd row width: no row is vector-aligned, every path falls back to
// single elements, sub-word CAS straddles halfwords and words.
TEMPLATE_TEST_CASE("gpu scatter on a table misaligned by one element, odd row width",
                   "[scatter][gpu]", float, double, half, int8_t, uint16_t, complex64, complex128) {
  using T = TestType;
  const int64_t rows = 29;
  for (int64_t width : {5, 33}) {
    for (bool deterministic : {false, true}) {
      for (ScatterOp op : ops_for<T>()) {
        CAPTURE(dtype_name(dtype_of<T>), width, deterministic, op_name(op));
        const int64_t misalign = 1;
        const auto indices = deterministic ? duplicate_indices<int32_t>(700, rows, kSeed + width)
                                           : unique_indices<int32_t>(20, rows, kSeed + width);
        const auto table = guarded_table<T>(rows, width, misalign, kSeed);
        const int64_t base = misalign + kGuardRows * width;
        const auto updates =
            updates_for<T>(op, indices.size() * static_cast<size_t>(width), kSeed + 9, false);
        const auto got = run_gpu<T, int32_t>(op, table, base, rows, width, indices, updates, false,
                                             deterministic);
        const auto want =
            run_cpu<T, int32_t>(op, table, base, rows, width, indices, updates, false);
        check_matches_cpu(got, want, serial_result_is_exact<T>(op));
      }
    }
  }
}
