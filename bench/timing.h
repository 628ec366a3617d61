// Timing helpers of the plain timed benchmarks (the ones that interleave
// their sides by hand instead of running under Google Benchmark).
#pragma once

#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
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

// The flags of a plain timed benchmark: [--reps N] [--out F.json]
// [--machine NAME] (default: the host name).
struct PlainArgs {
  int reps;
  std::string out;
  std::string machine;
};

// Parses argv; prints the usage and exits with 2 on anything else.
inline PlainArgs parse_plain_args(int argc, char** argv, const char* program, int default_reps) {
  PlainArgs a{default_reps, "", ""};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--reps" && i + 1 < argc) {
      a.reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--out" && i + 1 < argc) {
      a.out = argv[++i];
    } else if (arg == "--machine" && i + 1 < argc) {
      a.machine = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--out F.json] [--machine NAME]\n", program);
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

}  // namespace varstate::bench
