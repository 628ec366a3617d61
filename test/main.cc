// Entry point of the CPU and device-parameterized test binaries. The test
// bodies run on VARSTATE_TEST_DEVICE (default CPU:0, test/device_fixture.h);
// when that names a GPU and the machine has none, the binary exits with
// VARSTATE_TEST_SKIP_CODE (CTest: "skipped", not "passed").
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "device_fixture.h"
#include "varstate/device_manager.h"

int main(int argc, char* argv[]) {
  const std::string device = varstate::testing::test_device_name();
  if (device.find("GPU") != std::string::npos &&
      varstate::DeviceManager::instance().num_gpus() == 0) {
    std::printf("no GPU found: skipping the test bodies on %s\n", device.c_str());
    return VARSTATE_TEST_SKIP_CODE;
  }
  return Catch::Session().run(argc, argv);
}
