// Tests that need two GPUs: copies between devices. The binary reports
// "skipped" (exit 77) on a machine with fewer GPUs, never a silent pass.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "test_util.h"
#include "varstate/device_manager.h"

using namespace varstate;
using varstate::testing::byte_pattern;

TEST_CASE("GPU to GPU copies between devices", "[gpu][device][multi_gpu]") {
  auto& dm = DeviceManager::instance();
  Device& a = dm.gpu(0);
  Device& b = dm.gpu(1);
  const size_t bytes = size_t{9} << 20;
  auto src = byte_pattern(bytes, 11);
  std::vector<unsigned char> back(bytes);
  void* da = a.allocate(bytes);
  void* db = b.allocate(bytes);
  copy_bytes(a, da, dm.cpu(), src.data(), bytes);
  copy_bytes(b, db, a, da, bytes);
  copy_bytes(dm.cpu(), back.data(), b, db, bytes);
  CHECK(std::memcmp(src.data(), back.data(), bytes) == 0);
  a.deallocate(da);
  b.deallocate(db);
}
