#include <catch2/catch.hpp>

#include "varstate/device_spec.h"
#include "varstate/error.h"

using namespace varstate;

TEST_CASE("DeviceSpec parses TensorFlow device strings", "[device_spec]") {
  auto full = DeviceSpec::parse("/job:ps/replica:0/task:1/device:GPU:0");
  CHECK(full.job == "ps");
  CHECK(full.replica == 0);
  CHECK(full.task == 1);
  CHECK(full.device_type == "GPU");
  CHECK(full.device_index == 0);
  CHECK(full.to_string() == "/job:ps/replica:0/task:1/device:GPU:0");

  CHECK(DeviceSpec::parse("/device:CPU:0").to_string() == "/device:CPU:0");
  CHECK(DeviceSpec::parse("/gpu:1") == DeviceSpec::of("GPU", 1));
  CHECK(DeviceSpec::parse("/cpu:0") == DeviceSpec::of("CPU", 0));
  CHECK(DeviceSpec::parse("GPU:0") == DeviceSpec::of("GPU", 0));
  CHECK(DeviceSpec::parse("gpu:2") == DeviceSpec::of("GPU", 2));
  CHECK(DeviceSpec::parse("").empty());

  auto partial = DeviceSpec::parse("/job:worker/task:3");
  CHECK(partial.job == "worker");
  CHECK(partial.task == 3);
  CHECK_FALSE(partial.replica);
  CHECK_FALSE(partial.device_type);
  CHECK(partial.to_string() == "/job:worker/task:3");

  auto any_gpu = DeviceSpec::parse("/device:GPU:*");
  CHECK(any_gpu.device_type == "GPU");
  CHECK_FALSE(any_gpu.device_index);
  CHECK(any_gpu.to_string() == "/device:GPU:*");
}

TEST_CASE("malformed device strings raise InvalidArgumentError quoting the string",
          "[device_spec]") {
  for (const char* bad : {"/job:", "/replica:x", "/task:-1", "/device:GPU:0:1", "/foo:1",
                          "/job:a/job:b", "//device:CPU:0", "GPU:0:1", "/device:G-PU:0"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(DeviceSpec::parse(bad), InvalidArgumentError);
    CHECK_THROWS_WITH(DeviceSpec::parse(bad), Catch::Contains(std::string("\"") + bad + "\""));
  }
}

TEST_CASE("merging: inner fields override, unset fields inherit", "[device_spec]") {
  auto outer = DeviceSpec::parse("/job:ps/task:0/device:CPU:0");
  auto merged = outer.merged_with(DeviceSpec::parse("/device:GPU:1"));
  CHECK(merged.to_string() == "/job:ps/task:0/device:GPU:1");
  CHECK(outer.merged_with(DeviceSpec::parse("/task:2")).to_string() ==
        "/job:ps/task:2/device:CPU:0");
  // A new device type without an index does not keep the old type's index.
  CHECK(outer.merged_with(DeviceSpec::parse("/device:GPU")).to_string() ==
        "/job:ps/task:0/device:GPU:*");
  CHECK(outer.merged_with(DeviceSpec{}) == outer);
}
