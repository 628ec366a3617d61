// Tensor on a GPU: data<T>() hands out host pointers only, so it refuses a
// GPU tensor and names the device; raw_data() is the device pointer. on()
// copies only across devices.
#include <catch2/catch.hpp>

#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/tensor.h"

using namespace varstate;

TEST_CASE("data<T>() on a GPU tensor throws FailedPreconditionError", "[gpu][tensor]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  Tensor t = Tensor::from_vector<float>({1.f, 2.f, 3.f}).to(gpu);
  CHECK(t.raw_data() != nullptr);
  CHECK_THROWS_AS(t.data<float>(), FailedPreconditionError);
  CHECK_THROWS_WITH(t.data<float>(),
                    Catch::Contains("Tensor::data") && Catch::Contains(gpu.name()));
  CHECK_THROWS_AS(t.data<int32_t>(), TypeError);
  const Tensor host = t.to_host();
  CHECK(host.data<float>()[2] == 3.f);
}

TEST_CASE("on(gpu) copies a host tensor there and shares one already there", "[gpu][tensor]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  const Tensor host = Tensor::from_vector<float>({1.f, 2.f, 3.f});
  const Tensor there = host.on(gpu);
  CHECK(&there.device() == &gpu);
  CHECK_FALSE(there.shares_buffer_with(host));
  CHECK(there.to_vector<float>() == host.to_vector<float>());
  CHECK(there.on(gpu).shares_buffer_with(there));
  const Tensor back = there.on(DeviceManager::instance().cpu());
  CHECK(back.on_cpu());
  CHECK(back.to_vector<float>() == host.to_vector<float>());
}
