// Timing helpers of the plain timed benchmarks (the ones that interleave
// their sides by hand instead of running under Google Benchmark).
#pragma once

#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace varstate::bench {

// Wall seconds of one call of `fn`.
inline double seconds_of_call(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Times `a` and `b` `reps` times each, interleaved, the pairs taking turns
// at going first, so that a slow spell of the machine, or whatever `after`
// leaves behind (a take that evicts the caches, a dropped page cache),
// hits both alike; `after` runs untimed after each pair. One untimed pair
// first. Returns the seconds of each, pair by pair.
inline std::pair<std::vector<double>, std::vector<double>> alternating(
    int reps, const std::function<void()>& a, const std::function<void()>& b,
    const std::function<void()>& after = [] {}) {
  a();
  b();
  after();
  std::vector<double> ta, tb;
  for (int r = 0; r < reps; ++r) {
    if (r % 2 == 0) {
      ta.push_back(seconds_of_call(a));
      tb.push_back(seconds_of_call(b));
    } else {
      tb.push_back(seconds_of_call(b));
      ta.push_back(seconds_of_call(a));
    }
    after();
  }
  return {ta, tb};
}

// The median of `v` (the upper one of an even count); `v` not empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The flags of a plain timed benchmark: [--reps N] [--out F.json]
// [--machine NAME] (default: the host name).
struct PlainArgs {
  int reps;
  std::string out;
  std::string machine;
  std::string device;  // --device NAME, where the program takes one; else empty
};

// Parses argv (and --device NAME where `takes_device`); prints the usage and
// exits with 2 on anything else.
inline PlainArgs parse_plain_args(int argc, char** argv, const char* program, int default_reps,
                                  bool takes_device = false) {
  PlainArgs a{default_reps, "", "", ""};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--reps" && i + 1 < argc) {
      a.reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--out" && i + 1 < argc) {
      a.out = argv[++i];
    } else if (arg == "--machine" && i + 1 < argc) {
      a.machine = argv[++i];
    } else if (takes_device && arg == "--device" && i + 1 < argc) {
      a.device = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--out F.json] [--machine NAME]%s\n", program,
                   takes_device ? " [--device NAME]" : "");
      std::exit(2);
    }
  }
  if (a.machine.empty()) {
    utsname u{};
    uname(&u);
    a.machine = u.nodename;
  }
  return a;
}

// `count` positions in [0, n): uniform, or Zipf(`exponent`) over the
// positions, the k-th most frequent being the k-th of a shuffled order (so
// that hot positions are not neighbours) or, without `shuffled`, position k.
inline std::vector<int64_t> random_positions(int64_t n, int64_t count, bool zipf, uint64_t seed,
                                             bool shuffled = true, double exponent = 1.1) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> out(static_cast<size_t>(count));
  if (!zipf) {
    for (int64_t& p : out) p = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
    return out;
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  if (shuffled) std::shuffle(order.begin(), order.end(), rng);
  std::vector<double> cdf(static_cast<size_t>(n));
  double sum = 0;
  for (size_t r = 0; r < cdf.size(); ++r) {
    cdf[r] = sum += std::pow(static_cast<double>(r + 1), -exponent);
  }
  std::uniform_real_distribution<double> u(0, sum);
  for (int64_t& p : out) {
    const auto r = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
    p = order[static_cast<size_t>(std::min<ptrdiff_t>(r, n - 1))];
  }
  return out;
}

}  // namespace varstate::bench
