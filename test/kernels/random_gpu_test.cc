// CUDA random kernels against the CPU kernels, bit for bit, for every dtype
// and distribution, across sizes, element offsets and output alignments.
// Guard bytes around each output catch out-of-bounds writes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cuda/random.h"
#include "random_test_util.h"
#include "test_util.h"
#include "varstate/device.h"
#include "varstate/device_manager.h"
#include "varstate/dtype.h"

using namespace varstate;
namespace cuda = varstate::kernels::cuda;
using namespace varstate::testing;

namespace {

constexpr unsigned char kGuard = 0x5a;
constexpr int64_t kGuardElements = 16;

Device& gpu() { return DeviceManager::instance().gpu(0); }

template <typename T>
std::pair<T, T> params(Dist dist) {
  if constexpr (std::is_integral_v<T>) {
    return {T(-1000), T(123457)};
  } else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return dist == Dist::kUniform ? std::pair{T(-2.5f), T(1.0f)} : std::pair{T(0.25f), T(1.5f)};
  } else {
    return dist == Dist::kUniform ? std::pair{T(-2.5), T(1.0)} : std::pair{T(0.25), T(1.5)};
  }
}

// The CPU kernel's values for the parameters of the GPU runs.
template <typename T>
std::vector<T> cpu_values(Dist dist, int64_t n, int64_t first, uint64_t seed, uint64_t seed2) {
  const auto [a, b] = params<T>(dist);
  return run_cpu<T>(dist, n, first, seed, seed2, a, b);
}

// Runs the CUDA kernel into a guarded buffer, `shift` elements past a
// 256-byte boundary, and returns elements [keep_from, n) of its output.
template <typename T>
std::vector<T> run_gpu(Dist dist, int64_t n, int64_t first, uint64_t seed, uint64_t seed2,
                       int64_t shift, int64_t keep_from = 0) {
  const auto [a, b] = params<T>(dist);
  Device& dev = gpu();
  const int64_t total = kGuardElements + shift + n + kGuardElements;
  auto* base = static_cast<T*>(dev.allocate(total * sizeof(T)));
  dev.memset(base, kGuard, total * sizeof(T));
  T* out = base + kGuardElements + shift;
  if (dist == Dist::kUniform) {
    cuda::random_uniform<T>(out, n, first, seed, seed2, a, b, dev.stream());
  } else if constexpr (!std::is_integral_v<T>) {
    if (dist == Dist::kNormal) {
      cuda::random_normal<T>(out, n, first, seed, seed2, a, b, dev.stream());
    } else {
      cuda::truncated_normal<T>(out, n, first, seed, seed2, a, b, dev.stream());
    }
  }
  std::vector<unsigned char> guard(kGuardElements * sizeof(T));
  Device& host = DeviceManager::instance().cpu();
  copy_bytes(host, guard.data(), dev, base, guard.size());
  for (unsigned char c : guard) REQUIRE(c == kGuard);
  copy_bytes(host, guard.data(), dev, out + n, guard.size());
  for (unsigned char c : guard) REQUIRE(c == kGuard);
  std::vector<T> result(n - keep_from);
  copy_bytes(host, result.data(), dev, out + keep_from, result.size() * sizeof(T));
  dev.deallocate(base);
  dev.synchronize();
  return result;
}

template <typename T>
bool not_all_zero(const std::vector<T>& v) {
  const T zero{};
  for (const T& x : v) {
    if (std::memcmp(&x, &zero, sizeof(T)) != 0) return true;
  }
  return v.empty();
}

}  // namespace

TEMPLATE_TEST_CASE("GPU random kernels match the CPU kernels bit for bit", "[random][gpu]", half,
                   bfloat16, float, double, int32_t, int64_t) {
  using T = TestType;
  const uint64_t seed = testing::kSeed, seed2 = 31;
  // 4096 = one block tile of 4-value groups; 8192 for 16-bit types.
  const int64_t small_sizes[] = {1, 2, 3, 5, 8, 17, 255, 4095, 4096, 4097, 8193, 40000};
  const int64_t firsts[] = {0, 1, 2, 3, 5, 4093, (int64_t{1} << 33) + 1};
  for (Dist dist : dists<T>()) {
    for (int64_t n : small_sizes) {
      for (int64_t first : firsts) {
        for (int64_t shift : {0, 1, 2, 3, 5}) {
          CAPTURE(static_cast<int>(dist), n, first, shift, seed, seed2);
          const auto want = cpu_values<T>(dist, n, first, seed, seed2);
          const auto got = run_gpu<T>(dist, n, first, seed, seed2, shift);
          CAPTURE(first_difference(got, want));
          REQUIRE(same_bits(got, want));
          REQUIRE(not_all_zero(got));
        }
      }
    }
    for (int64_t n : {int64_t{1} << 22, (int64_t{1} << 22) + 3}) {
      for (auto [first, shift] : {std::pair<int64_t, int64_t>{0, 0}, {3, 1}, {6, 2}}) {
        CAPTURE(static_cast<int>(dist), n, first, shift, seed, seed2);
        const auto want = cpu_values<T>(dist, n, first, seed, seed2);
        const auto got = run_gpu<T>(dist, n, first, seed, seed2, shift);
        CAPTURE(first_difference(got, want));
        REQUIRE(same_bits(got, want));
      }
    }
  }
}

TEST_CASE("GPU random kernels index past 2^31 elements", "[random][gpu][large]") {
  const int64_t n = (int64_t{1} << 31) + 67;
  if (gpu().total_memory() < static_cast<size_t>(3 * n * sizeof(half))) {
    SUCCEED("not enough GPU memory");
    return;
  }
  const int64_t keep = 4099;
  for (Dist dist : {Dist::kUniform, Dist::kNormal}) {
    CAPTURE(static_cast<int>(dist), n);
    const auto got = run_gpu<half>(dist, n, 0, 1, 2, 0, n - keep);
    const auto want = cpu_values<half>(dist, keep, n - keep, 1, 2);
    CAPTURE(first_difference(got, want));
    REQUIRE(same_bits(got, want));
  }
}

// A hash-keyed table's initial rows (runtime/keyed_table.h): row slots[i]
// holds the op's tensor of `width` elements for (seed, seed2 + keys[i]),
// the CPU kernel's bits; rows not named keep their bytes. With
// RowsAt::kAbsent (a lookup's output) row i gets keys[i]'s row where
// slots[i] is negative, and the others keep their bytes.
TEMPLATE_TEST_CASE("GPU keyed initial rows match the CPU kernel row by row", "[random][gpu]", half,
                   bfloat16, float, double) {
  using T = TestType;
  using cuda::RowsAt;
  const uint64_t seed = testing::kSeed, seed2 = 77;
  Device& dev = gpu();
  Device& host = DeviceManager::instance().cpu();
  const std::vector<int64_t> keys = {0, 1, -1, 123456789, INT64_MIN, INT64_MAX, 42, -98765};
  const std::vector<int64_t> slots = {3, 0, 9, 5, 1, 7, 10, 2};      // rows 4, 6 and 8 untouched
  const std::vector<int64_t> found = {-1, 4, -1, -1, 0, -1, 7, -1};  // rows 1, 4 and 6 kept
  const auto n = static_cast<int64_t>(keys.size());
  auto* d_index = static_cast<int64_t*>(dev.allocate(3 * n * sizeof(int64_t)));
  copy_bytes(dev, d_index, host, keys.data(), n * sizeof(int64_t));
  copy_bytes(dev, d_index + n, host, slots.data(), n * sizeof(int64_t));
  copy_bytes(dev, d_index + 2 * n, host, found.data(), n * sizeof(int64_t));
  for (const RowsAt at : {RowsAt::kSlots, RowsAt::kAbsent}) {
    const bool absent = at == RowsAt::kAbsent;
    const int64_t rows = absent ? n : 11;
    const int64_t* d_rows = absent ? d_index + 2 * n : d_index + n;
    // The position whose key fills row r, or -1 for a row left alone.
    auto filler = [&](int64_t r) -> int64_t {
      if (absent) return found[static_cast<size_t>(r)] < 0 ? r : -1;
      const auto it = std::find(slots.begin(), slots.end(), r);
      return it == slots.end() ? -1 : it - slots.begin();
    };
    for (const int64_t width : {1, 2, 3, 4, 5, 7, 64, 130}) {
      // Each distribution, then a constant (the first of the uniform's parameters).
      for (int kind = 0; kind < 4; ++kind) {
        const bool constant = kind == 3;
        const Dist dist = constant ? Dist::kUniform : dists<T>()[static_cast<size_t>(kind)];
        CAPTURE(absent, width, kind);
        const auto [a, b] = params<T>(dist);
        const size_t bytes = static_cast<size_t>(rows * width) * sizeof(T);
        auto* out = static_cast<T*>(dev.allocate(bytes));
        dev.memset(out, kGuard, bytes);
        if (constant) {
          cuda::constant_rows<T>(out, width, d_rows, n, a, dev.stream(), at);
        } else if (dist == Dist::kUniform) {
          cuda::random_uniform_rows<T>(out, width, d_index, d_rows, n, seed, seed2, a, b,
                                       dev.stream(), at);
        } else if (dist == Dist::kNormal) {
          cuda::random_normal_rows<T>(out, width, d_index, d_rows, n, seed, seed2, a, b,
                                      dev.stream(), at);
        } else {
          cuda::truncated_normal_rows<T>(out, width, d_index, d_rows, n, seed, seed2, a, b,
                                         dev.stream(), at);
        }
        std::vector<T> got(static_cast<size_t>(rows * width));
        copy_bytes(host, got.data(), dev, out, bytes);
        dev.deallocate(out);
        std::vector<T> guard_row(static_cast<size_t>(width));
        std::memset(guard_row.data(), kGuard, guard_row.size() * sizeof(T));
        for (int64_t r = 0; r < rows; ++r) {
          CAPTURE(r);
          const std::vector<T> row(got.begin() + r * width, got.begin() + (r + 1) * width);
          const int64_t i = filler(r);
          if (i < 0) {
            REQUIRE(same_bits(row, guard_row));
            continue;
          }
          const uint64_t key_seed2 = seed2 + static_cast<uint64_t>(keys[static_cast<size_t>(i)]);
          const std::vector<T> want = constant ? std::vector<T>(static_cast<size_t>(width), a)
                                               : cpu_values<T>(dist, width, 0, seed, key_seed2);
          CAPTURE(first_difference(row, want));
          REQUIRE(same_bits(row, want));
        }
      }
    }
  }
  dev.deallocate(d_index);
}
