// Dirty-row tracking of GPU variables (runtime/dirty_rows_internal.h):
// indices on the device are marked by the index-check kernel in a byte map
// on the device, host indices by the host check; a take sees both.
#include <catch2/catch.hpp>

#include <algorithm>

#include "device_fixture.h"
#include "runtime/dirty_rows_internal.h"
#include "varstate/device_manager.h"
#include "varstate/placement.h"
#include "varstate/scatter.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;
using internal::dirty_rows;

namespace {
using Rows = std::vector<int64_t>;
}  // namespace

TEST_CASE_METHOD(FreshSession, "dirty rows: GPU scatters mark their rows, device or host indices",
                 "[gpu][dirty_rows]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  DeviceScope scope("/gpu:0");
  const int64_t rows = GENERATE(int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{70000});
  CAPTURE(rows);
  Variable v(Tensor::zeros(DType::kFloat, {rows, 3}), {.name = "v"});
  session.run(v.initializer());
  REQUIRE(&v.device() == &gpu);
  uint64_t generation = dirty_rows(v).take(rows, 0).generation;
  const Rows device_ids{rows - 1, 0, rows / 2, rows - 1};
  const Rows host_ids{rows / 3};
  const auto n = static_cast<int64_t>(device_ids.size());
  scatter_add(v, Tensor::from_vector<int64_t>(device_ids, {n}).to(gpu),
              Tensor::filled(DType::kFloat, {n, 3}, Tensor(1.f), gpu));
  scatter_update(v, Tensor::from_vector<int64_t>(host_ids, {1}),
                 Tensor::zeros(DType::kFloat, {1, 3}).to(gpu));
  auto taken = dirty_rows(v).take(rows, generation);
  CHECK_FALSE(taken.all);
  Rows want{0, rows / 2, rows / 3, rows - 1};
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  CHECK(taken.rows == want);
  // The device marks were cleared: nothing until the next scatter.
  CHECK(dirty_rows(v).take(rows, taken.generation).rows.empty());
}

TEST_CASE_METHOD(FreshSession, "dirty rows: a bad device index marks no row it did not check",
                 "[gpu][dirty_rows]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  DeviceScope scope("/gpu:0");
  Variable v(Tensor::zeros(DType::kFloat, {16, 2}), {.name = "v"});
  session.run(v.initializer());
  const uint64_t generation = dirty_rows(v).take(16, 0).generation;
  CHECK_THROWS_AS(
      scatter_update(v, Tensor::from_vector<int64_t>({3, 99}).to(gpu),
                     Tensor::zeros(DType::kFloat, {2, 2}).to(gpu), {.synchronous = true}),
      InvalidArgumentError);
  auto taken = dirty_rows(v).take(16, generation);
  CHECK_FALSE(taken.all);
  for (int64_t r : taken.rows) CHECK(r == 3);  // over-marking is allowed, nothing else
}
