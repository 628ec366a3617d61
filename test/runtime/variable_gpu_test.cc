// Variables on the GPU: placement, initializer on the device, caching on
// the host, locked concurrent updates, count_up_to.
#include <catch2/catch.hpp>

#include <thread>

#include "tensor_util.h"
#include "varstate/device_manager.h"
#include "varstate/placement.h"
#include "varstate/variables.h"

using namespace varstate;

TEST_CASE("variables placed on the GPU initialize and update there", "[gpu][variable]") {
  reset_default_graph();
  Device& gpu = DeviceManager::instance().gpu(0);
  DeviceScope scope("/device:GPU:0");
  Variable v(Tensor({{1.f, 2.f}, {3.f, 4.f}}), {.name = "w"});
  CHECK(&v.device() == &gpu);
  Session sess;
  sess.run(global_variables_initializer());
  CHECK(&v.value().device() == &gpu);
  v.assign_add(Tensor({{1.f, 1.f}, {1.f, 1.f}}));
  v.assign_sub(0.5f);
  CHECK(v.eval(sess).to_vector<float>() == std::vector<float>{1.5f, 2.5f, 3.5f, 4.5f});
}

TEST_CASE("a GPU variable cached on the CPU copies only after updates", "[gpu][variable][cache]") {
  reset_default_graph();
  DeviceScope scope("/gpu:0");
  Variable v(Tensor({1.f, 2.f}), {.caching_device = "/cpu:0"});
  Session().run(v.initializer());
  CHECK(v.value().on_cpu());
  v.value();
  CHECK(v.cache_copies() == 1);
  v.assign_add(1.f);
  CHECK(v.value().to_vector<float>() == std::vector<float>{2.f, 3.f});
  CHECK(v.cache_copies() == 2);
}

TEST_CASE("locked concurrent assign_add on a GPU variable loses nothing",
          "[gpu][variable][concurrency]") {
  reset_default_graph();
  DeviceScope scope("/gpu:0");
  Variable c(Tensor(int64_t{0}));
  Session().run(c.initializer());
  std::vector<std::thread> pool;
  for (int t = 0; t < 8; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < 200; ++i) c.assign_add(int64_t{1}, {.use_locking = true});
    });
  }
  for (auto& th : pool) th.join();
  CHECK(c.value().scalar<int64_t>() == 1600);
  Variable step(Tensor(int32_t{0}));
  Session().run(step.initializer());
  CHECK(step.count_up_to(2).scalar<int32_t>() == 0);
  CHECK(step.count_up_to(2).scalar<int32_t>() == 1);
  CHECK_THROWS_AS(step.count_up_to(2), OutOfRangeError);
}
