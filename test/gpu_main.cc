// Entry point of the GPU test binaries: runs the tests when the machine has
// VARSTATE_TEST_MIN_GPUS GPUs or more, and otherwise exits with
// VARSTATE_TEST_SKIP_CODE (CTest: "skipped", not "passed"). Test bodies
// run on GPU:0 (test/device_fixture.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>

#include "varstate/device_manager.h"

int main(int argc, char* argv[]) {
  const int gpus = varstate::DeviceManager::instance().num_gpus();
  if (gpus < VARSTATE_TEST_MIN_GPUS) {
    std::printf("%d GPU(s) found, %d needed: skipping these GPU tests\n", gpus,
                VARSTATE_TEST_MIN_GPUS);
    return VARSTATE_TEST_SKIP_CODE;
  }
  // The test bodies' device (test/device_fixture.h), unless the caller chose.
  setenv("VARSTATE_TEST_DEVICE", "/device:GPU:0", /*overwrite=*/0);
  return Catch::Session().run(argc, argv);
}
