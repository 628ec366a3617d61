// How fast the rows of a gradient can be read in the orders a sparse
// update's summing pass reads them: the rows of a [1M, 64] float array
// (256 MiB, as a 1M-id batch's gradient), each row's 64 floats added into
// 64 accumulators, on one thread or two.
//
//   in order            every row, first to last (one thread; two threads
//                       each a contiguous half)
//   every k-th          a random 1/k of the rows, in order, one thread (the
//                       positions of one part of k, when a sparse update's
//                       rows are split by owner)
//   parts of two        two threads, each its own random half, in order
//                       (two parts summing their own rows)
//   parts of two,       the same, each thread prefetching every row ahead,
//   streaming           the other's too
//
// Medians of interleaved rounds; the prefetches are 16 rows (of the
// subset) ahead.
//   bench_read_patterns [--reps N] [--out F.json] [--machine NAME]
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "timing.h"

using varstate::bench::median;
using varstate::bench::seconds_of_call;

namespace {

constexpr int64_t kRows = int64_t{1} << 20;
constexpr int64_t kWidth = 64;
constexpr int64_t kAhead = 16;

struct Gradient {
  float* data = nullptr;
  Gradient() {
    const size_t bytes = static_cast<size_t>(kRows * kWidth) * sizeof(float);
    data = static_cast<float*>(std::aligned_alloc(size_t{2} << 20, bytes));
    if (data == nullptr) std::abort();
    madvise(data, bytes, MADV_HUGEPAGE);
    for (int64_t i = 0; i < kRows * kWidth; ++i) data[i] = 0.001f;
  }
  ~Gradient() { std::free(data); }
  Gradient(const Gradient&) = delete;
  Gradient& operator=(const Gradient&) = delete;
};

// Adds the rows rows[0, n) of g into 64 accumulators; `stream`: prefetch
// every row of g (not only the listed ones) kAhead rows ahead of the row
// being read.
float sum_rows(const float* g, const int64_t* rows, int64_t n, bool stream) {
  float acc[kWidth] = {};
  int64_t streamed = 0;
  for (int64_t k = 0; k < n; ++k) {
    if (stream) {
      for (const int64_t to = std::min(kRows, rows[k] + kAhead); streamed < to; ++streamed) {
        const char* line = reinterpret_cast<const char*>(g + streamed * kWidth);
        for (int b = 0; b < 256; b += 64) __builtin_prefetch(line + b, 0);
      }
    } else if (k + kAhead < n) {
      const char* line = reinterpret_cast<const char*>(g + rows[k + kAhead] * kWidth);
      for (int b = 0; b < 256; b += 64) __builtin_prefetch(line + b, 0);
    }
    const float* row = g + rows[k] * kWidth;
    for (int64_t c = 0; c < kWidth; ++c) acc[c] += row[c];
  }
  float total = 0;
  for (const float a : acc) total += a;
  return total;
}

// A random 1/k of [0, kRows), in order.
std::vector<int64_t> subset(int64_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < kRows; ++r) {
    if (rng() % static_cast<uint64_t>(k) == 0) rows.push_back(r);
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  const varstate::bench::PlainArgs args =
      varstate::bench::parse_plain_args(argc, argv, "bench_read_patterns", 7);
  const int reps = args.reps;
  const std::string& out = args.out;
  const std::string& machine = args.machine;
  const Gradient grad;
  const float* g = grad.data;
  std::vector<int64_t> all(static_cast<size_t>(kRows));
  for (int64_t r = 0; r < kRows; ++r) all[static_cast<size_t>(r)] = r;
  const std::vector<int64_t> half = subset(2, 1), quarter = subset(4, 2), sixteenth = subset(16, 3);
  // The two parts of two: the rows of `half` and the others.
  std::vector<int64_t> other;
  other.reserve(all.size() - half.size());
  for (size_t i = 0, h = 0; i < all.size(); ++i) {
    if (h < half.size() && half[h] == all[i]) {
      ++h;
    } else {
      other.push_back(all[i]);
    }
  }
  volatile float sink = 0;
  const auto both = [&](const std::vector<int64_t>& a, const std::vector<int64_t>& b, bool stream) {
    float other_sum = 0;
    std::thread t([&] { other_sum = sum_rows(g, b.data(), std::ssize(b), stream); });
    sink = sink + sum_rows(g, a.data(), std::ssize(a), stream);
    t.join();
    sink = sink + other_sum;
  };
  const auto first_half = std::vector<int64_t>(all.begin(), all.begin() + kRows / 2);
  const auto second_half = std::vector<int64_t>(all.begin() + kRows / 2, all.end());
  struct Case {
    const char* name;
    int threads;
    int64_t rows_read;
    std::function<void()> run;
    std::vector<double> seconds;
  };
  std::vector<Case> cases = {
      {"in order", 1, kRows, [&] { sink = sink + sum_rows(g, all.data(), kRows, false); }, {}},
      {"in order, halves", 2, kRows, [&] { both(first_half, second_half, false); }, {}},
      {"every 2nd",
       1,
       std::ssize(half),
       [&] { sink = sink + sum_rows(g, half.data(), std::ssize(half), false); },
       {}},
      {"every 4th",
       1,
       std::ssize(quarter),
       [&] { sink = sink + sum_rows(g, quarter.data(), std::ssize(quarter), false); },
       {}},
      {"every 16th",
       1,
       std::ssize(sixteenth),
       [&] { sink = sink + sum_rows(g, sixteenth.data(), std::ssize(sixteenth), false); },
       {}},
      {"parts of two", 2, kRows, [&] { both(half, other, false); }, {}},
      {"parts of two, streaming", 2, kRows, [&] { both(half, other, true); }, {}},
  };
  for (int r = 0; r < reps; ++r) {
    for (Case& c : cases) c.seconds.push_back(seconds_of_call(c.run));
  }
  std::ofstream f;
  if (!out.empty()) {
    f.open(out);
    f << "{\n  \"context\": {\"machine\": \"" << machine << "\", \"rows\": " << kRows
      << ", \"width\": " << kWidth << ", \"reps\": " << reps << "},\n  \"results\": [\n";
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const double s = median(c.seconds);
    const double gbs = static_cast<double>(c.rows_read * kWidth * 4) / s / 1e9;
    std::printf("%-26s %d thread%s  %8lld rows  %7.2f ms  %6.1f GB/s\n", c.name, c.threads,
                c.threads > 1 ? "s" : " ", static_cast<long long>(c.rows_read), s * 1e3, gbs);
    if (f.is_open()) {
      f << "    {\"pattern\": \"" << c.name << "\", \"threads\": " << c.threads
        << ", \"rows_read\": " << c.rows_read << ", \"ms\": " << s * 1e3
        << ", \"gb_per_s\": " << gbs << "}" << (i + 1 < cases.size() ? "," : "") << "\n";
    }
  }
  if (f.is_open()) f << "  ]\n}\n";
  return 0;
}
