// Dirty-row tracking of GPU variables (runtime/dirty_rows.h):
// indices on the device are marked by the index-check kernel in a byte map
// on the device, host indices by the host check; a take sees both.
#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>

#include "device_fixture.h"
#include "kernels/cuda/scatter.h"
#include "runtime/dirty_rows.h"
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

#ifdef VARSTATE_HAVE_CUDA  // drives the marking kernel directly
// A scatter takes the device marks (under its Writing guard) and enqueues
// its marking kernel afterwards. A take running in between reads the marks
// and clears them: the kernel's marks must survive for the next take, in
// whichever order the take's read, the kernel and the take's clear land on
// the stream. The hook enqueues the kernel right after the take has read
// the marks, where a separate clear used to erase them.
TEST_CASE_METHOD(FreshSession, "dirty rows: a marking kernel enqueued during a take is not lost",
                 "[gpu][dirty_rows]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  DeviceScope scope("/gpu:0");
  const int64_t rows = 64;
  Variable v(Tensor::zeros(DType::kFloat, {rows, 2}), {.name = "v"});
  session.run(v.initializer());
  internal::DirtyRows& dirty = dirty_rows(v);
  const uint64_t generation = dirty.take(rows, 0).generation;

  // The scatter in flight: its marks and its indices, not yet enqueued.
  std::optional<internal::DirtyRows::Writing> writing(std::in_place, dirty);
  uint8_t* marks = dirty.device_marks(gpu, rows);
  REQUIRE(marks != nullptr);
  const Tensor ids = Tensor::from_vector<int64_t>({5, 41}).to(gpu);
  auto* check =
      static_cast<kernels::cuda::IndexCheck*>(gpu.allocate(sizeof(kernels::cuda::IndexCheck)));
  bool enqueued = false;
  dirty.set_after_device_read_for_testing([&] {
    if (enqueued) return;
    enqueued = true;
    DeviceGuard guard(gpu);
    kernels::cuda::reset_index_check(check, gpu.stream());
    kernels::cuda::validate_indices(static_cast<const int64_t*>(ids.raw_data()), 2, rows, check,
                                    gpu.stream(), marks);
  });
  const auto first = dirty.take(rows, generation);
  dirty.set_after_device_read_for_testing(nullptr);
  writing.reset();
  const auto second = dirty.take(rows, first.generation);
  gpu.deallocate(check);
  REQUIRE(enqueued);
  CHECK_FALSE(first.all);
  CHECK_FALSE(second.all);
  Rows seen = first.rows;
  seen.insert(seen.end(), second.rows.begin(), second.rows.end());
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  CHECK(seen == Rows{5, 41});
}
#endif  // VARSTATE_HAVE_CUDA

TEST_CASE_METHOD(FreshSession, "dirty rows: no device marks before the first take",
                 "[gpu][dirty_rows]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  DeviceScope scope("/gpu:0");
  Variable v(Tensor::zeros(DType::kFloat, {8, 2}), {.name = "v"});
  session.run(v.initializer());
  scatter_add(v, Tensor::from_vector<int64_t>({1}).to(gpu),
              Tensor::filled(DType::kFloat, {1, 2}, Tensor(1.f), gpu));
  // A variable never saved incrementally pays for no device marks.
  CHECK(dirty_rows(v).device_marks(gpu, 8) == nullptr);
  CHECK(dirty_rows(v).take(8, 0).all);
}
