// Tensor on a GPU: data<T>() hands out host pointers only, so it refuses a
// GPU tensor and names the device; raw_data() is the device pointer.
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
