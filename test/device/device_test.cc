#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "device/allocation_tail.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/placement.h"
#include "varstate/replica_device_setter.h"

using namespace varstate;

TEST_CASE("DeviceManager always has CPU:0 first", "[device]") {
  auto& dm = DeviceManager::instance();
  REQUIRE(dm.devices().size() == static_cast<size_t>(dm.num_gpus() + 1));
  CHECK(dm.cpu().name() == "/device:CPU:0");
  CHECK(dm.cpu().is_cpu());
  CHECK(dm.cpu().total_memory() > 0);
  CHECK(dm.find(DeviceSpec::parse("/cpu:0")) == &dm.cpu());
  CHECK(dm.find(DeviceSpec::parse("/device:CPU:1")) == nullptr);
  CHECK(dm.find(DeviceSpec::of("GPU", dm.num_gpus())) == nullptr);
  CHECK_THROWS_AS(dm.gpu(dm.num_gpus()), InvalidArgumentError);
  CHECK_THROWS_WITH(dm.gpu(7),
                    Catch::Contains("/device:GPU:7") && Catch::Contains("/device:CPU:0"));
}

TEST_CASE("CPU allocation is aligned and copies move bytes", "[device]") {
  auto& cpu = DeviceManager::instance().cpu();
  CHECK(cpu.allocate(0) == nullptr);
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{1} << 20, size_t{20} << 20}) {
    CAPTURE(bytes);
    auto* a = static_cast<unsigned char*>(cpu.allocate(bytes));
    auto* b = static_cast<unsigned char*>(cpu.allocate(bytes));
    CHECK(reinterpret_cast<uintptr_t>(a) % 64 == 0);
    for (size_t i = 0; i < bytes; ++i) a[i] = static_cast<unsigned char>(i * 31 + 7);
    copy_bytes(cpu, b, cpu, a, bytes);
    CHECK(std::memcmp(a, b, bytes) == 0);
    cpu.memset(b, 0, bytes);
    CHECK(b[bytes - 1] == 0);
    cpu.deallocate(a);
    cpu.deallocate(b);
  }
  auto ev = cpu.record_event();
  CHECK(ev->done());
}

TEST_CASE("CPU blocks of 2 MiB and more grow keeping their bytes", "[device]") {
  auto& cpu = DeviceManager::instance().cpu();
  auto fill = [](unsigned char* p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i += 61) p[i] = static_cast<unsigned char>(i * 31 + seed);
  };
  auto same = [](const unsigned char* p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i += 61) {
      if (p[i] != static_cast<unsigned char>(i * 31 + seed)) return false;
    }
    return true;
  };
  // Below 2 MiB a block is malloc's: the device declines, the block stays.
  auto* small = static_cast<unsigned char*>(cpu.allocate(size_t{1} << 20));
  fill(small, size_t{1} << 20, 3);
  CHECK(cpu.grow(small, size_t{4} << 20) == nullptr);
  CHECK(same(small, size_t{1} << 20, 3));
  cpu.deallocate(small);
  CHECK(cpu.grow(nullptr, 100) == nullptr);

  const size_t first = size_t{3} << 20;
  auto* p = static_cast<unsigned char*>(cpu.allocate(first));
  fill(p, first, 5);
#if defined(__SANITIZE_ADDRESS__)
  // Under AddressSanitizer blocks stay malloc's (its redzones), and the
  // caller copies instead.
  CHECK(cpu.grow(p, size_t{40} << 20) == nullptr);
  CHECK(same(p, first, 5));
  cpu.deallocate(p);
#else
  // Within its size class: the same block.
  CHECK(cpu.grow(p, first + 1000) == p);
  // Remapped past it (a size no cached block has): the bytes kept, the new
  // tail writable, the address huge-page aligned.
  const size_t second = (size_t{37} << 20) + 4096;
  auto* q = static_cast<unsigned char*>(cpu.grow(p, second));
  REQUIRE(q != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(q) % (size_t{2} << 20) == 0);
  CHECK(same(q, first, 5));
  std::memset(q + first, 0x5A, second - first);
  CHECK(q[second - 1] == 0x5A);
  // Into a cached block of the class it grows to (freed just before): the
  // bytes copied there.
  auto* cached = static_cast<unsigned char*>(cpu.allocate(size_t{70} << 20));
  cpu.deallocate(cached);
  fill(q, second, 9);
  auto* r = static_cast<unsigned char*>(cpu.grow(q, size_t{70} << 20));
  REQUIRE(r != nullptr);
  CHECK(r == cached);
  CHECK(same(r, second, 9));
  r[(size_t{70} << 20) - 1] = 1;
  // Into a cached block up to 8 times larger than it needs (it will likely
  // grow on), the smallest there is.
  auto* larger = static_cast<unsigned char*>(cpu.allocate(size_t{300} << 20));
  auto* largest = static_cast<unsigned char*>(cpu.allocate(size_t{600} << 20));
  cpu.deallocate(largest);
  cpu.deallocate(larger);
  auto* s = static_cast<unsigned char*>(cpu.allocate(size_t{3} << 20));
  fill(s, size_t{3} << 20, 11);
  auto* t = static_cast<unsigned char*>(cpu.grow(s, size_t{50} << 20));
  CHECK(t == larger);
  CHECK(same(t, size_t{3} << 20, 11));
  cpu.deallocate(t);
  cpu.deallocate(r);
#endif
}

TEST_CASE("PinnedBuffer gives usable host memory", "[device]") {
  PinnedBuffer buf(4096);
  REQUIRE(buf.data() != nullptr);
  CHECK(buf.size() == 4096);
  std::memset(buf.data(), 0xab, 4096);
  PinnedBuffer moved = std::move(buf);
  CHECK(buf.data() == nullptr);
  CHECK(static_cast<unsigned char*>(moved.data())[4095] == 0xab);
}

TEST_CASE("device scopes stack and merge", "[placement]") {
  CHECK(current_device_spec().empty());
  {
    DeviceScope outer("/job:ps/task:0");
    CHECK(current_device_spec().to_string() == "/job:ps/task:0");
    {
      DeviceScope inner("/device:CPU:0");
      CHECK(current_device_spec().to_string() == "/job:ps/task:0/device:CPU:0");
      CHECK(&place({"v", "VariableV2"}) == &DeviceManager::instance().cpu());
    }
    CHECK(current_device_spec().to_string() == "/job:ps/task:0");
  }
  CHECK(current_device_spec().empty());
  CHECK_THROWS_AS(DeviceScope("/device:GPU:x"), InvalidArgumentError);
  CHECK(current_device_spec().empty());  // a failed scope pushed nothing
}

TEST_CASE("device functions pick a device from what is placed", "[placement]") {
  // Round-robin variables over ps tasks, as replica_device_setter does.
  int next = 0;
  DeviceScope scope([&](const PlacementRequest& req) -> std::string {
    if (req.type == "VariableV2") return "/job:ps/task:" + std::to_string(next++);
    return "/job:worker";
  });
  CHECK(current_device_spec({"w", "VariableV2"}).to_string() == "/job:ps/task:0");
  CHECK(current_device_spec({"b", "VariableV2"}).to_string() == "/job:ps/task:1");
  CHECK(current_device_spec({"add", "Add"}).to_string() == "/job:worker");
  {
    // The function runs after the scope inside it and its result replaces
    // that scope's device (as in TensorFlow): a function that means to keep
    // inner fields merges PlacementRequest::current, as replica_device_setter does.
    DeviceScope inner("/device:CPU:0");
    CHECK(current_device_spec({"v", "VariableV2"}).to_string() == "/job:ps/task:2");
  }
}

TEST_CASE("soft placement falls back to CPU; strict placement raises", "[placement]") {
  auto& dm = DeviceManager::instance();
  auto missing = DeviceSpec::of("GPU", dm.num_gpus() + 3);
  REQUIRE(soft_placement());
  CHECK(&resolve_device(missing, "emb") == &dm.cpu());
  set_soft_placement(false);
  CHECK_THROWS_AS(resolve_device(missing, "emb"), InvalidArgumentError);
  CHECK_THROWS_WITH(resolve_device(missing, "emb"),
                    Catch::Contains("\"emb\"") && Catch::Contains(missing.to_string()) &&
                        Catch::Contains("available devices: /device:CPU:0"));
  set_soft_placement(true);
  // No device type: the first GPU if any, else the CPU.
  Device& def = resolve_device(DeviceSpec{});
  CHECK(&def == (dm.num_gpus() > 0 ? &dm.gpu(0) : &dm.cpu()));
}

TEST_CASE("device scopes are per thread", "[placement]") {
  DeviceScope scope("/device:CPU:0");
  std::string other;
  std::thread([&] { other = current_device_spec().to_string(); }).join();
  CHECK(other.empty());
  CHECK(current_device_spec().to_string() == "/device:CPU:0");
}

TEST_CASE("replica_device_setter places variables round-robin on ps tasks", "[placement]") {
  // No ps tasks: TensorFlow returns None, whichever form is used.
  CHECK_FALSE(replica_device_setter(0, "/job:ps", "/job:worker/device:CPU:0"));
  CHECK_FALSE(replica_device_setter(ReplicaDeviceSetterOptions{.ps_tasks = 0}));
  DeviceScope scope(replica_device_setter(2));
  CHECK(current_device_spec({"v0", "VariableV2"}).to_string() == "/job:ps/task:0");
  CHECK(current_device_spec({"v1", "VariableV2"}).to_string() == "/job:ps/task:1");
  CHECK(current_device_spec({"v2", "VariableV2"}).to_string() == "/job:ps/task:0");
  CHECK(current_device_spec({"matmul", "MatMul"}).to_string() == "/job:worker");
  // Everything is local: the job/task fields do not hide the device.
  CHECK(&place({"v3", "VariableV2"}) == &resolve_device(DeviceSpec{}));
  CHECK_THROWS_AS(replica_device_setter(-1), InvalidArgumentError);
  CHECK_THROWS_AS(replica_device_setter(1, "/job:ps/bogus"), InvalidArgumentError);
}

// The expected devices below are what tf.compat.v1 graph mode gives for the
// same nesting (Graph._apply_device_functions: innermost scope first).
TEST_CASE("device scopes apply innermost first, as TensorFlow's device stack", "[placement]") {
  SECTION("an inner string wins field by field") {
    DeviceScope outer("/job:ps/task:1");
    DeviceScope inner("/device:CPU:0");
    CHECK(current_device_spec().to_string() == "/job:ps/task:1/device:CPU:0");
  }
  SECTION("tf.device(None) ignores every enclosing scope") {
    DeviceScope outer("/job:foo/task:2");
    {
      DeviceScope none{DeviceFunction{}};
      CHECK(current_device_spec({"v", "VariableV2"}).to_string().empty());
      DeviceScope inner("/device:CPU:0");  // scopes inside None still apply
      CHECK(current_device_spec().to_string() == "/device:CPU:0");
    }
    CHECK(current_device_spec().to_string() == "/job:foo/task:2");
  }
  SECTION("replica_device_setter(0) clears the enclosing scopes like None") {
    DeviceScope outer("/job:foo");
    DeviceScope none(replica_device_setter(0));
    CHECK(current_device_spec({"v", "VariableV2"}).to_string().empty());
  }
  SECTION("a setter inside an outer worker scope still sends variables to the ps") {
    DeviceScope outer("/job:worker/task:7");
    DeviceScope setter(replica_device_setter(1));
    CHECK(current_device_spec({"v", "VariableV2"}).to_string() == "/job:ps/task:0");
    CHECK(current_device_spec({"matmul", "MatMul"}).to_string() == "/job:worker/task:7");
  }
  SECTION("a device function sees what the scopes inside it chose") {
    std::string seen;
    DeviceScope fn([&](const PlacementRequest& r) {
      seen = r.current.to_string();
      return r.current.to_string() + "/task:3";
    });
    DeviceScope inner("/job:ps");
    CHECK(current_device_spec().to_string() == "/job:ps/task:3");
    CHECK(seen == "/job:ps");
  }
  SECTION("merge_devices=false keeps an inner device as is") {
    DeviceScope setter(
        replica_device_setter(ReplicaDeviceSetterOptions{.ps_tasks = 2, .merge_devices = false}));
    DeviceScope inner("/job:worker/device:CPU:0");
    CHECK(current_device_spec({"v", "VariableV2"}).to_string() == "/job:worker/device:CPU:0");
  }
}

TEST_CASE("GPU allocations are padded to whole granules, the padding named exactly", "[device]") {
  using detail::allocation_tail;
  using detail::padded_allocation_bytes;
  static_assert(detail::kAllocationGranularity == 16);
  CHECK(padded_allocation_bytes(0) == 0);
  CHECK(padded_allocation_bytes(1) == 16);
  CHECK(padded_allocation_bytes(15) == 16);
  CHECK(padded_allocation_bytes(16) == 16);
  CHECK(padded_allocation_bytes(17) == 32);
  CHECK(padded_allocation_bytes((size_t{1} << 31) + 3) == (size_t{1} << 31) + 16);
  // Past the largest granule boundary: no allocation can succeed.
  CHECK(padded_allocation_bytes(SIZE_MAX) == 0);
  CHECK(padded_allocation_bytes(SIZE_MAX - 15) == SIZE_MAX - 15);
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{15}, size_t{16},
                       size_t{33}, (size_t{1} << 31) + 3}) {
    CAPTURE(bytes);
    const auto tail = allocation_tail(bytes);
    CHECK(tail.offset == bytes);
    CHECK(tail.offset + tail.length == padded_allocation_bytes(bytes));
    CHECK(tail.length < detail::kAllocationGranularity);
  }
  CHECK(allocation_tail(7).length == 9);
  CHECK(allocation_tail(16).length == 0);
  CHECK(allocation_tail(SIZE_MAX).length == 0);
}
