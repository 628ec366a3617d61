// Timing helpers of the plain timed benchmarks (the ones that interleave
// their sides by hand instead of running under Google Benchmark).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace varstate::bench {

// Wall seconds of one call of `fn`.
inline double seconds_of_call(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The median of `v` (the upper one of an even count); `v` not empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace varstate::bench
