// The device a test binary runs its test bodies on, and the fixture that
// gives each test case a clean start there.
//
// The device is VARSTATE_TEST_DEVICE from the environment: "/device:CPU:0"
// when unset in CPU test binaries, "/device:GPU:0" in GPU test binaries
// (test/gpu_main.cc). Device-parameterized binaries (varstate_add_test(...
// DEVICES ...) in test/CMakeLists.txt) are run by CTest once per device. A
// test body states where it works by opening FreshGraph's device scope (or
// placing on test_device()), never by relying on where default placement
// lands on the machine that runs it.
#pragma once

#include <cstdlib>
#include <string>

#include "varstate/device.h"
#include "varstate/graph.h"
#include "varstate/placement.h"
#include "varstate/session.h"

namespace varstate::testing {

// "/device:CPU:0" or "/device:GPU:0".
inline const char* test_device_name() {
  const char* env = std::getenv("VARSTATE_TEST_DEVICE");
  return env != nullptr && *env != '\0' ? env : "/device:CPU:0";
}

// The device test bodies place their tensors and variables on.
inline Device& test_device() { return resolve_device(DeviceSpec::parse(test_device_name())); }

inline bool testing_on_gpu() { return !test_device().is_cpu(); }

// A fresh default graph and the test device as the thread's device scope,
// for one test case.
struct FreshGraph {
  FreshGraph() { reset_default_graph(); }
  DeviceScope device_scope{test_device_name()};
};

// FreshGraph plus a default session (for eval()).
struct FreshSession : FreshGraph {
  Session session;
  Session::DefaultGuard default_session = session.as_default();
};

}  // namespace varstate::testing
