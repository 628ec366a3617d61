// GPU device tests: allocation, copies in every direction (small, staged
// and large), events ordering work across devices.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "device/allocation_tail.h"
#include "test_util.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

using namespace varstate;
using varstate::testing::byte_pattern;

TEST_CASE("GPU devices describe themselves", "[gpu][device]") {
  auto& dm = DeviceManager::instance();
  REQUIRE(dm.num_gpus() > 0);
  for (int i = 0; i < dm.num_gpus(); ++i) {
    Device& g = dm.gpu(i);
    CHECK(g.name() == "/device:GPU:" + std::to_string(i));
    CHECK(g.total_memory() > (size_t{1} << 30));
    CHECK(g.compute_capability() >= 50);
    CHECK(g.stream() != nullptr);
    CHECK_FALSE(g.model().empty());
  }
}

TEST_CASE("host <-> GPU copies round-trip bytes exactly", "[gpu][device]") {
  auto& dm = DeviceManager::instance();
  Device& cpu = dm.cpu();
  Device& gpu = dm.gpu(0);
  // Sizes below, at and above the direct-copy limit and the staging chunk.
  for (size_t bytes : {size_t{1}, size_t{4097}, size_t{1} << 20, (size_t{1} << 20) + 3,
                       (size_t{8} << 20) + 5, size_t{40} << 20}) {
    CAPTURE(bytes);
    auto src = byte_pattern(bytes, 7);
    std::vector<unsigned char> back(bytes, 0);
    void* d = gpu.allocate(bytes);
    void* d2 = gpu.allocate(bytes);
    copy_bytes(gpu, d, cpu, src.data(), bytes);
    copy_bytes(gpu, d2, gpu, d, bytes);
    copy_bytes(cpu, back.data(), gpu, d2, bytes);
    CHECK(std::memcmp(src.data(), back.data(), bytes) == 0);
    gpu.memset(d2, 0, bytes);
    copy_bytes(cpu, back.data(), gpu, d2, bytes);
    CHECK(back[bytes - 1] == 0);
    CHECK(back[0] == 0);
    gpu.deallocate(d);
    gpu.deallocate(d2);
  }
}

TEST_CASE(
    "small host-to-GPU copies: the source is free once the call returns, across wrap-arounds "
    "of the staging ring and threads",
    "[gpu][device]") {
  // Small copies are staged through a pinned ring of the device (8 MiB)
  // and return before the GPU has the bytes; each thread reuses one host
  // buffer, overwriting it right after every copy, and pushes ~15 MiB
  // through the ring, so that regions come round again while earlier
  // copies may still be in flight.
  auto& dm = DeviceManager::instance();
  Device& cpu = dm.cpu();
  Device& gpu = dm.gpu(0);
  constexpr int kThreads = 3;
  constexpr int kCopies = 300;
  std::vector<std::vector<void*>> dst(kThreads);
  std::vector<std::vector<size_t>> sizes(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(varstate::testing::kSeed + static_cast<uint64_t>(t));
      std::vector<unsigned char> host(size_t{100} << 10);
      for (int i = 0; i < kCopies; ++i) {
        const size_t bytes = 1 + rng() % host.size();
        const auto pattern = byte_pattern(bytes, static_cast<unsigned>(t * kCopies + i));
        std::memcpy(host.data(), pattern.data(), bytes);
        void* d = gpu.allocate(bytes);
        copy_bytes(gpu, d, cpu, host.data(), bytes);
        std::memset(host.data(), 0xab, bytes);  // the source is ours again
        dst[t].push_back(d);
        sizes[t].push_back(bytes);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  int wrong = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kCopies; ++i) {
      const size_t bytes = sizes[t][i];
      std::vector<unsigned char> back(bytes);
      copy_bytes(cpu, back.data(), gpu, dst[t][i], bytes);
      const auto pattern = byte_pattern(bytes, static_cast<unsigned>(t * kCopies + i));
      if (std::memcmp(back.data(), pattern.data(), bytes) != 0) ++wrong;
      gpu.deallocate(dst[t][i]);
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("pinned staging and async transfers", "[gpu][device]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  const size_t bytes = size_t{3} << 20;
  PinnedBuffer in(bytes), out(bytes);
  CHECK(in.pinned());
  auto src = byte_pattern(bytes, 3);
  std::memcpy(in.data(), src.data(), bytes);
  void* d = gpu.allocate(bytes);
  gpu.copy_from_host_async(d, in.data(), bytes);
  gpu.copy_to_host_async(out.data(), d, bytes);
  auto ev = gpu.record_event();
  ev->wait_host();
  CHECK(ev->done());
  CHECK(std::memcmp(out.data(), src.data(), bytes) == 0);
  gpu.deallocate(d);
}

TEST_CASE("allocation failure raises ResourceExhaustedError naming the device", "[gpu][device]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  size_t too_much = gpu.total_memory() * 4;
  CHECK_THROWS_AS(gpu.allocate(too_much), ResourceExhaustedError);
  CHECK_THROWS_WITH(gpu.allocate(too_much), Catch::Contains("/device:GPU:0"));
  // The device still works afterwards.
  void* p = gpu.allocate(1024);
  CHECK(p != nullptr);
  gpu.deallocate(p);
}

// The padding past an odd-sized allocation is allocated and zeroed
// (device/allocation_tail.h): a 1-byte scatter's 16-bit compare-and-swap
// reads it, and compute-sanitizer's initcheck must see defined bytes.
TEST_CASE("GPU allocations zero the padding past the requested size", "[gpu][device]") {
  auto& dm = DeviceManager::instance();
  Device& gpu = dm.gpu(0);
  for (size_t bytes : {size_t{1}, size_t{3}, size_t{15}, size_t{17}, size_t{4097}}) {
    CAPTURE(bytes);
    const size_t padded = detail::padded_allocation_bytes(bytes);
    // Dirty the pool's memory first, so a fresh block is not zero by chance.
    void* dirty = gpu.allocate(padded);
    gpu.memset(dirty, 0xAB, padded);
    gpu.deallocate(dirty);
    void* d = gpu.allocate(bytes);
    // The requested bytes are written first: the copy below reads them too,
    // and compute-sanitizer's initcheck reports reads of unwritten memory.
    gpu.memset(d, 0x11, bytes);
    std::vector<unsigned char> back(padded, 0xEE);
    copy_bytes(dm.cpu(), back.data(), gpu, d, padded);
    for (size_t i = 0; i < padded; ++i) {
      CAPTURE(i);
      CHECK(back[i] == (i < bytes ? 0x11 : 0));
    }
    gpu.deallocate(d);
  }
}
