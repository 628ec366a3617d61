// Shared benchmark helpers: same-run bandwidth limits and reporting.
//
// Each benchmark reports counters
//   GBps        its own effective bandwidth (bytes it must move / time)
//   limit_GBps  the limit measured in this run for the same byte count
//   ratio       GBps / limit_GBps
// Limits: host memcpy (CPU work), device-to-device cudaMemcpy (GPU work),
// pinned cudaMemcpy host<->device (transfers), and, for work that only
// writes (random fills), host memset and cudaMemset. Both sides count bytes
// read + bytes written.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "varstate/device.h"

namespace varstate::bench {

enum class Limit {
  kHostMemcpy,
  kDeviceCopy,
  kHostToDevice,
  kDeviceToHost,
  kHostMemset,    // bytes written, as many threads as host copies use
  kDeviceMemset,  // bytes written by cudaMemsetAsync
};

// Bandwidth of the limit operation for `bytes` (read+write counted for
// copies within one memory; bytes transferred for host<->device), best of
// several runs, memoized per (limit, bytes, device).
double limit_gbps(Limit limit, size_t bytes, Device* device = nullptr);

// Times `body` (which must leave the device idle when `device` is given:
// the helper synchronizes) and sets the counters above. `reps` calls run
// between timer reads to amortize launch and sync overhead.
void run_timed(benchmark::State& state, double bytes_moved, double limit, int reps, Device* device,
               const std::function<void()>& body);

// True when VARSTATE_BENCH_QUICK=1 (`varstate bench` sets it unless --full):
// each benchmark runs smaller sizes so the whole suite takes a few minutes on
// a 2-core machine.
bool quick_run();

// The sizes to register: `quick` on a quick run, `full` otherwise.
std::vector<int64_t> sizes_mib(std::vector<int64_t> full, std::vector<int64_t> quick);

// The first GPU, or nullptr (the benchmark then skips itself).
Device* gpu_or_skip(benchmark::State& state);

}  // namespace varstate::bench
