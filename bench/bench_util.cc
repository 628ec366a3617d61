#include "bench_util.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "varstate/device_manager.h"

namespace varstate::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_of(const std::function<void()>& fn, Device* device, int reps) {
  if (device) device->synchronize();
  auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) fn();
  if (device) device->synchronize();
  return std::chrono::duration<double>(Clock::now() - t0).count() / reps;
}

double best_of(const std::function<void()>& fn, Device* device, int reps, int rounds) {
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) best = std::min(best, seconds_of(fn, device, reps));
  return best;
}

// memset split over the threads a large host copy uses (copy_bytes), so a
// multithreaded fill is compared with a multithreaded write.
void parallel_memset(char* p, int value, size_t bytes) {
  const unsigned threads = std::max(1u, std::min(std::thread::hardware_concurrency(), 8u));
  const size_t chunk = (bytes / threads + 63) / 64 * 64;
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) {
    const size_t begin = std::min(bytes, t * chunk);
    const size_t end = std::min(bytes, begin + chunk);
    pool.emplace_back([=] { std::memset(p + begin, value, end - begin); });
  }
  std::memset(p, value, std::min(bytes, chunk));
  for (auto& th : pool) th.join();
}

int reps_for(size_t bytes) {
  return bytes >= (size_t{256} << 20) ? 2 : bytes >= (size_t{32} << 20) ? 5 : 50;
}

}  // namespace

double limit_gbps(Limit limit, size_t bytes, Device* device) {
  static std::mutex mu;
  static std::map<std::tuple<int, size_t, Device*>, double> cache;
  std::lock_guard lock(mu);
  auto key = std::make_tuple(static_cast<int>(limit), bytes, device);
  if (auto it = cache.find(key); it != cache.end()) return it->second;

  Device& cpu = DeviceManager::instance().cpu();
  double gbps = 0;
  int reps = reps_for(bytes);
  switch (limit) {
    case Limit::kHostMemcpy: {
      // The same thread count the CPU kernels use (copy_bytes splits large
      // host copies across threads), so the ratio compares like with like.
      std::vector<char> a(bytes, 1), b(bytes, 2);
      double s =
          best_of([&] { copy_bytes(cpu, b.data(), cpu, a.data(), bytes); }, nullptr, reps, 5);
      gbps = 2.0 * bytes / s / 1e9;
      break;
    }
    case Limit::kDeviceCopy: {
      void* a = device->allocate(bytes);
      void* b = device->allocate(bytes);
      device->memset(a, 1, bytes);
      double s = best_of([&] { copy_bytes(*device, b, *device, a, bytes); }, device, reps, 5);
      gbps = 2.0 * bytes / s / 1e9;
      device->deallocate(a);
      device->deallocate(b);
      break;
    }
    case Limit::kHostMemset: {
      std::vector<char> a(bytes, 1);
      int value = 0;
      double s =
          best_of([&] { parallel_memset(a.data(), ++value & 0xff, bytes); }, nullptr, reps, 5);
      gbps = static_cast<double>(bytes) / s / 1e9;
      break;
    }
    case Limit::kDeviceMemset: {
      void* a = device->allocate(bytes);
      int value = 0;
      double s = best_of([&] { device->memset(a, ++value & 0xff, bytes); }, device, reps, 5);
      gbps = static_cast<double>(bytes) / s / 1e9;
      device->deallocate(a);
      break;
    }
    case Limit::kHostToDevice:
    case Limit::kDeviceToHost: {
      PinnedBuffer host(bytes);
      std::memset(host.data(), 1, bytes);
      void* d = device->allocate(bytes);
      bool h2d = limit == Limit::kHostToDevice;
      double s = best_of(
          [&] {
            if (h2d) {
              device->copy_from_host_async(d, host.data(), bytes);
            } else {
              device->copy_to_host_async(host.data(), d, bytes);
            }
          },
          device, reps, 5);
      gbps = static_cast<double>(bytes) / s / 1e9;
      device->deallocate(d);
      break;
    }
  }
  cache[key] = gbps;
  return gbps;
}

void run_timed(benchmark::State& state, double bytes_moved, double limit, int reps, Device* device,
               const std::function<void()>& body) {
  double total = 0;
  int64_t calls = 0;
  for (auto _ : state) {
    double s = seconds_of(body, device, reps);
    state.SetIterationTime(s);
    total += s;
    ++calls;
  }
  double per_call = total / std::max<int64_t>(calls, 1);
  double gbps = bytes_moved / per_call / 1e9;
  state.counters["GBps"] = gbps;
  state.counters["limit_GBps"] = limit;
  state.counters["ratio"] = gbps / limit;
}

Device* gpu_or_skip(benchmark::State& state) {
  auto& dm = DeviceManager::instance();
  if (dm.num_gpus() == 0) {
    state.SkipWithError("no GPU");
    return nullptr;
  }
  if (dm.gpu(0).emulated()) {
    state.SkipWithError("emulated GPU: its timings are the CPU's, not a GPU's");
    return nullptr;
  }
  return &dm.gpu(0);
}

bool quick_run() {
  const char* v = std::getenv("VARSTATE_BENCH_QUICK");
  return v != nullptr && std::string(v) == "1";
}

std::vector<int64_t> sizes_mib(std::vector<int64_t> full, std::vector<int64_t> quick) {
  return quick_run() ? quick : full;
}

}  // namespace varstate::bench
