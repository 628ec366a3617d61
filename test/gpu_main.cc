// Entry point of the GPU test binaries: runs the tests when a GPU is
// present, and exits with VARSTATE_TEST_SKIP_CODE (CTest: "skipped", not
// "passed") when there is none.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "device/device_manager.h"

int main(int argc, char* argv[]) {
  if (varstate::DeviceManager::instance().num_gpus() == 0) {
    std::printf("no GPU found: skipping GPU tests\n");
    return VARSTATE_TEST_SKIP_CODE;
  }
  return Catch::Session().run(argc, argv);
}
