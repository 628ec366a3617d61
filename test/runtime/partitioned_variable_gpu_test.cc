// PartitionedVariable with parts on the GPU and the CPU: one tensor on the
// caller's chosen device, scatters routed across devices, compared with the
// same updates on a CPU variable.
#include <catch2/catch.hpp>

#include <random>

#include "test_util.h"
#include "varstate/device_manager.h"
#include "varstate/placement.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

using namespace varstate;

TEST_CASE("parts on GPU and CPU read as one tensor on the chosen device", "[gpu][partitioned]") {
  reset_default_graph();
  auto& dm = DeviceManager::instance();
  Device& gpu = dm.gpu(0);
  int k = 0;
  // Alternate the parts between GPU:0 and CPU:0.
  DeviceScope alternate([&k](const PlacementRequest&) -> std::string {
    return (k++ % 2 == 0) ? "/device:GPU:0" : "/device:CPU:0";
  });
  const int64_t rows = 11, cols = 3;
  std::vector<float> init(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < init.size(); ++i) init[i] = static_cast<float>(i);
  Tensor init_t = Tensor::from_vector<float>(init, {rows, cols});
  PartitionedVariable p =
      get_variable("p", {.initializer = init_t, .partitioner = fixed_size_partitioner(3)});
  Variable reference(init_t, {.name = "reference"});
  CHECK(&p[0].device() == &gpu);
  CHECK(p[1].device().is_cpu());
  CHECK(&p[2].device() == &gpu);
  Session sess;
  sess.run(global_variables_initializer());
  Tensor on_gpu = p.as_tensor(gpu);
  CHECK(&on_gpu.device() == &gpu);
  CHECK(on_gpu.to_vector<float>() == init);
  Tensor on_cpu = p.as_tensor(dm.cpu());
  CHECK(on_cpu.device().is_cpu());

  std::mt19937 rng(testing::kSeed);
  INFO("seed " << testing::kSeed);
  std::vector<int64_t> idx(64);
  for (auto& i : idx) i = static_cast<int64_t>(rng() % rows);
  Tensor indices = Tensor::from_vector<int64_t>(idx).to(gpu);
  Tensor updates = Tensor::filled(DType::kFloat, {64, cols}, Tensor(2.f), gpu);
  p.scatter_add(indices, updates);
  reference.scatter_add(IndexedSlices(updates.to(dm.cpu()), indices.to(dm.cpu())));
  CHECK(p.eval(sess).to_vector<float>() == reference.eval(sess).to_vector<float>());
  // An out-of-range index on the GPU is found before any part changes.
  const std::vector<float> before = p.eval(sess).to_vector<float>();
  CHECK_THROWS_AS(
      p.scatter_add(Tensor({0, 11}).to(gpu), Tensor::zeros(DType::kFloat, {2, cols}, gpu)),
      InvalidArgumentError);
  CHECK(p.eval(sess).to_vector<float>() == before);
}
