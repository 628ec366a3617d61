// Saver on GPU variables: staged (double-buffered, pinned) saves and
// restores, sharded across CPU and GPU, asynchronous snapshots on the
// device, and moving checkpoints between CPU and GPU variables.
#include <catch2/catch.hpp>

#include <atomic>
#include <optional>
#include <thread>

#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/saver_io_internal.h"
#include "checkpoint/tensor_bundle.h"
#include "runtime/variable_access.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/checkpoint_state.h"
#include "varstate/device_manager.h"
#include "varstate/placement.h"
#include "varstate/saver.h"
#include "varstate/scatter.h"
#include "varstate/variables.h"

namespace varstate {
namespace {

using testing::TempDir;

Tensor iota(int64_t n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = start + static_cast<float>(i % 100003);
  return Tensor::from_vector<float>(v, TensorShape{n});
}

std::vector<float> host_values(const Variable& v) { return v.value().to_vector<float>(); }

}  // namespace

TEST_CASE("GPU variables save through small staging buffers and restore", "[saver][gpu]") {
  Graph g;
  auto guard = g.as_default();
  TempDir dir;
  Session sess;
  Device& gpu = DeviceManager::instance().gpu(0);
  std::vector<Variable> vars;
  {
    DeviceScope on_gpu("/device:GPU:0");
    // Sizes straddling the 4 KiB chunk: below, equal, above, many chunks.
    for (int64_t n : {int64_t{1}, int64_t{1024}, int64_t{1025}, int64_t{1} << 20}) {
      vars.emplace_back(iota(n, static_cast<float>(n)),
                        VariableOptions{.name = "g" + std::to_string(n)});
    }
  }
  REQUIRE(&vars[0].device() == &gpu);
  Variable on_cpu(iota(10, 5), {.name = "c"});
  sess.run(global_variables_initializer());
  std::vector<std::vector<float>> before;
  for (const auto& v : vars) before.push_back(host_values(v));

  for (bool sharded : {false, true}) {
    CAPTURE(sharded);
    Saver saver({.sharded = sharded, .staging_buffer_bytes = 4096});
    const std::string path = *saver.save(sess, dir / (sharded ? "s" : "n")).path();
    auto reader = open_checkpoint(path);
    for (size_t i = 0; i < vars.size(); ++i)
      CHECK(reader->read(vars[i].op_name()).values<float>() == before[i]);
    for (auto& v : vars) internal::set_value(v, Tensor::zeros(DType::kFloat, v.shape(), gpu));
    saver.restore(sess, path);
    for (size_t i = 0; i < vars.size(); ++i) {
      CHECK(&vars[i].device() == &gpu);
      CHECK(host_values(vars[i]) == before[i]);
    }
  }
}

TEST_CASE("asynchronous save snapshots GPU variables on the device", "[saver][gpu][async]") {
  Graph g;
  auto guard = g.as_default();
  TempDir dir;
  Session sess;
  DeviceScope on_gpu("/device:GPU:0");
  Variable v(Tensor::zeros(DType::kFloat, TensorShape{int64_t{1} << 22}), {.name = "v"});
  sess.run(global_variables_initializer());
  Saver saver({.staging_buffer_bytes = size_t{1} << 20});
  SaveHandle h = saver.save(sess, dir / "a", {.async = true});
  for (int i = 0; i < 10; ++i) v.assign_add(Tensor(1.f), {.use_locking = true});
  h.wait();
  auto values = open_checkpoint(dir / "a")->read("v").values<float>();
  CHECK(std::all_of(values.begin(), values.end(), [](float x) { return x == 0.f; }));
  CHECK(v.value().to_vector<float>()[0] == 10.f);
}

TEST_CASE("checkpoints move between CPU and GPU variables", "[saver][gpu]") {
  TempDir dir;
  Session sess;
  Graph cpu_graph;
  Variable c(iota(1000, 1), {.name = "x", .graph = &cpu_graph});
  sess.run(c.initializer());
  const std::string path = *Saver({.graph = &cpu_graph}).save(sess, dir / "cpu").path();

  Graph gpu_graph;
  DeviceScope on_gpu("/device:GPU:0");
  Variable gv(Tensor::zeros(DType::kFloat, TensorShape{1000}), {.name = "x", .graph = &gpu_graph});
  Saver gpu_saver({.graph = &gpu_graph});
  gpu_saver.restore(sess, path);
  CHECK(gv.device().is_gpu());
  CHECK(host_values(gv) == iota(1000, 1).to_vector<float>());
}

TEST_CASE("saves of GPU variables during unlocked updates restore", "[saver][gpu][reliability]") {
  constexpr int64_t kElements = 1 << 20;
  for (bool async : {false, true}) {
    for (bool sharded : {false, true}) {
      CAPTURE(async, sharded);
      TempDir dir;
      Graph g;
      Session sess;
      std::vector<Variable> vars;
      {
        auto guard = g.as_default();
        DeviceScope on_gpu("/device:GPU:0");
        vars.emplace_back(Tensor::zeros(DType::kFloat, TensorShape{kElements}),
                          VariableOptions{.name = "big"});
        // A partition too: it is copied to the host whole, then written.
        vars.emplace_back(Tensor::zeros(DType::kFloat, TensorShape{kElements}),
                          VariableOptions{.name = "p/part_0",
                                          .save_slice_info = SaveSliceInfo{
                                              "p", {2 * kElements}, {0}, {kElements}}});
      }
      {
        auto guard = g.as_default();
        sess.run(global_variables_initializer());
      }
      Saver saver({.var_list = vars,
                   .sharded = sharded,
                   .max_to_keep = 3,
                   .graph = &g,
                   .staging_buffer_bytes = 64 << 10});
      std::atomic<bool> stop{false};
      std::thread updater([&] {
        std::vector<Variable> mine = vars;
        while (!stop.load()) {
          for (Variable& v : mine) v.assign_add(Tensor(1.f), {.use_locking = false});
          // Updates race the save's copies a round at a time: an updater
          // that only enqueues keeps the stream's queue full, and on an
          // emulated GPU every staging copy then waits behind it.
          mine[0].device().synchronize();
        }
      });
      std::vector<std::string> paths;
      for (int i = 0; i < 6; ++i)
        paths.push_back(*saver.save(sess, dir / "m", {.global_step = i, .async = async}).wait());
      stop = true;
      updater.join();
      int restored = 0;
      for (const std::string& p : paths) {
        if (!checkpoint_exists(p)) continue;
        CAPTURE(p);
        auto reader = open_checkpoint(p);
        REQUIRE_NOTHROW(reader->read("big"));
        REQUIRE_NOTHROW(reader->read_slice("p", TensorSlice({{0, kElements}})));
        REQUIRE_NOTHROW(saver.restore(sess, p));
        ++restored;
      }
      CHECK(restored == 3);
    }
  }
}

TEST_CASE("GPU tensors too large for the device raise ResourceExhaustedError",
          "[gpu][reliability]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  for (const TensorShape& shape : {TensorShape{int64_t{1} << 62}, TensorShape{int64_t{1} << 40}}) {
    CAPTURE(shape.to_string());
    try {
      Tensor t(DType::kFloat, shape, gpu);
      FAIL("no exception");
    } catch (const ResourceExhaustedError& e) {
      CHECK_THAT(std::string(e.what()),
                 Catch::Contains("OOM when allocating tensor with shape " + shape.to_string()) &&
                     Catch::Contains(gpu.name()));
    }
    CHECK_THROWS_AS(Tensor::zeros(DType::kFloat, shape, gpu), ResourceExhaustedError);
  }
}

}  // namespace varstate

namespace varstate {

TEST_CASE("incremental saves of GPU variables restore what a full save holds",
          "[saver][gpu][incremental]") {
  Graph g;
  auto guard = g.as_default();
  TempDir dir;
  Session sess;
  Device& gpu = DeviceManager::instance().gpu(0);
  const bool async = GENERATE(false, true);
  const bool device_indices = GENERATE(false, true);
  CAPTURE(async, device_indices);
  std::optional<DeviceScope> scope(std::in_place, "/gpu:0");
  Variable v(Tensor::zeros(DType::kFloat, {65536, 8}), {.name = "v"});
  scope.reset();
  sess.run(global_variables_initializer());
  Saver saver({.max_to_keep = 0, .staging_buffer_bytes = 8192});
  Saver full({.max_to_keep = 0});
  saver.save(sess, dir / "inc", {.global_step = 0, .async = async, .incremental = true}).wait();
  for (int step = 1; step <= 3; ++step) {
    Tensor ids = Tensor::from_vector<int64_t>({step, 1000 + step, 65535}, {3});
    if (device_indices) ids = ids.to(gpu);
    scatter_add(v, ids, Tensor::filled(DType::kFloat, {3, 8}, Tensor(1.f), gpu));
    const std::string delta =
        *saver.save(sess, dir / "inc", {.global_step = step, .async = async, .incremental = true})
             .wait();
    const std::string same = *full.save(sess, dir / "full", {.global_step = step}).path();
    CHECK(BundleReader(delta).read("v/.delta_ids").values<int64_t>() ==
          std::vector<int64_t>{step, 1000 + step, 65535});
    CHECK(open_checkpoint(delta)->read("v").bytes == open_checkpoint(same)->read("v").bytes);
  }
  const std::vector<float> latest = host_values(v);
  v.assign(Tensor::zeros(DType::kFloat, {65536, 8}));
  saver.restore(sess, dir / "inc-3");
  CHECK(host_values(v) == latest);
}

}  // namespace varstate
