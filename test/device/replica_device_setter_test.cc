// ClusterSpec, the ps strategies and replica_device_setter, on variables:
// the placement decision is kept on the variable whatever device holds it.
#include <catch2/catch.hpp>

#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/replica_device_setter.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

using namespace varstate;

namespace {
struct FreshGraph {
  FreshGraph() { reset_default_graph(); }
};

ClusterSpec guide_cluster() {
  // The guide's example.
  return ClusterSpec({{"ps", {"ps0:2222", "ps1:2222"}},
                      {"worker", {"worker0:2222", "worker1:2222", "worker2:2222"}}});
}

std::string job_task(const Variable& v) {
  auto t = task_of(v.placement());
  return t ? t->job + ":" + std::to_string(t->task) : "-";
}
}  // namespace

TEST_CASE("ClusterSpec", "[replica_device_setter]") {
  ClusterSpec c = guide_cluster();
  CHECK(c.jobs() == std::vector<std::string>{"ps", "worker"});
  CHECK(c.num_tasks("ps") == 2);
  CHECK(c.num_tasks("worker") == 3);
  CHECK(c.task_address("worker", 2) == "worker2:2222");
  CHECK(c.job_tasks("ps") == std::vector<std::string>{"ps0:2222", "ps1:2222"});
  CHECK_THROWS_MATCHES(c.num_tasks("chief"), ValueError,
                       Catch::Matchers::Message("No such job in cluster: chief"));
  CHECK_THROWS_MATCHES(c.task_address("ps", 5), ValueError,
                       Catch::Matchers::Message("No task with index 5 in job ps"));
  ClusterSpec sparse = ClusterSpec::sparse({{"ps", {{3, "ps3:1"}, {7, "ps7:1"}}}});
  CHECK(sparse.task_indices("ps") == std::vector<int>{3, 7});
  CHECK(sparse.num_tasks("ps") == 2);
  CHECK_THROWS_AS(ClusterSpec::sparse({{"ps", {{-1, "x"}}}}), ValueError);
  CHECK(task_of("/job:ps/task:1/device:CPU:0") == TaskRef{"ps", 1});
  CHECK_FALSE(task_of("/device:CPU:0"));
}

TEST_CASE("ps strategies", "[replica_device_setter]") {
  PsStrategy rr = round_robin_strategy(3);
  std::vector<int> picks;
  for (int i = 0; i < 7; ++i) picks.push_back(rr({}));
  CHECK(picks == std::vector<int>{0, 1, 2, 0, 1, 2, 0});
  // Greedy by bytes: 100 -> t0, 10 -> t1, 10 -> t2, 30 -> t1 (10), 5 -> t2 (10), 1 -> t2 (15 < 40).
  PsStrategy greedy = greedy_load_balancing_strategy(3);
  std::vector<int> g;
  for (int64_t bytes : {100, 10, 10, 30, 5, 1}) g.push_back(greedy({"v", "VariableV2", {}, bytes}));
  CHECK(g == std::vector<int>{0, 1, 2, 1, 2, 2});
  CHECK(byte_size_load_fn({"v", "VariableV2", {}, -1}) == 0);
  CHECK_THROWS_AS(round_robin_strategy(0), ValueError);
  CHECK_THROWS_AS(greedy_load_balancing_strategy(0), ValueError);
}

TEST_CASE_METHOD(FreshGraph, "the guide's cluster example places variables on the ps",
                 "[replica_device_setter]") {
  DeviceScope scope(replica_device_setter({.cluster = guide_cluster()}));
  Variable v = get_variable("v", {.shape = TensorShape{20, 20}});
  Variable w = get_variable("w", {.shape = TensorShape{20, 20}});
  Variable x = get_variable("x", {.shape = TensorShape{1}});
  CHECK(job_task(v) == "ps:0");
  CHECK(job_task(w) == "ps:1");
  CHECK(job_task(x) == "ps:0");
  // The bytes live on a local device of this process all the same.
  CHECK(v.placement().find(v.device().spec().to_string().substr(
            v.device().spec().to_string().rfind('/'))) != std::string::npos);
  // Non-variable ops go to the worker job.
  CHECK(current_device_spec({"add", "Add"}).job == std::optional<std::string>("worker"));
  CHECK_FALSE(current_device_spec({"add", "Add"}).task);
}

TEST_CASE_METHOD(FreshGraph, "greedy load balancing by byte size", "[replica_device_setter]") {
  DeviceScope scope(
      replica_device_setter({.ps_tasks = 2, .ps_strategy = greedy_load_balancing_strategy(2)}));
  Variable big = get_variable("big", {.shape = TensorShape{1000}});  // 4000 bytes -> ps 0
  Variable a = get_variable("a", {.shape = TensorShape{100}});       // 400 -> ps 1
  Variable b = get_variable("b", {.shape = TensorShape{100}});       // 400 -> ps 1 (800 < 4000)
  Variable c(Tensor::zeros(DType::kDouble, {1000}), {.name = "c"});  // 8000 -> ps 1 (800 < 4000)
  Variable d = get_variable("d", {.shape = TensorShape{10}});        // ps 0 (4000 < 8800)
  CHECK(job_task(big) == "ps:0");
  CHECK(job_task(a) == "ps:1");
  CHECK(job_task(b) == "ps:1");
  CHECK(job_task(c) == "ps:1");
  CHECK(job_task(d) == "ps:0");
}

TEST_CASE_METHOD(FreshGraph, "merge_devices, ps_ops, and no ps tasks", "[replica_device_setter]") {
  // Expected devices: tf.compat.v1 (TensorFlow 2.21) for the same nesting.
  // The setter runs before the enclosing scopes (innermost first), which
  // then fill only the fields it left unset.
  SECTION("an enclosing ps task does not override the strategy's task") {
    DeviceScope outer("/job:ps/task:5");
    DeviceScope setter(replica_device_setter({.ps_tasks = 2}));
    Variable v = get_variable("v", {.shape = TensorShape{1}});
    CHECK(job_task(v) == "ps:0");
    CHECK(current_device_spec({"add", "Add"}).to_string() == "/job:worker/task:5");
  }
  SECTION("an enclosing scope naming another job does not keep variables off the ps") {
    DeviceScope outer("/job:other");
    DeviceScope setter(replica_device_setter({.ps_tasks = 2}));
    CHECK(current_device_spec({"v", "VariableV2"}).to_string() == "/job:ps/task:0");
    CHECK(current_device_spec({"add", "Add"}).to_string() == "/job:worker");
  }
  SECTION("merge_devices=false keeps a device set inside the setter as is") {
    DeviceScope setter(replica_device_setter({.ps_tasks = 2, .merge_devices = false}));
    DeviceScope inner("/job:worker/device:CPU:0");
    CHECK(current_device_spec({"v", "VariableV2"}).to_string() == "/job:worker/device:CPU:0");
    CHECK(current_device_spec({"add", "Add"}).to_string() == "/job:worker/device:CPU:0");
  }
  SECTION("merge_devices=false under an enclosing device: the setter decides, the scope fills in") {
    DeviceScope outer("/device:CPU:0");
    DeviceScope setter(replica_device_setter({.ps_tasks = 2, .merge_devices = false}));
    CHECK(current_device_spec({"v", "VariableV2"}).to_string() == "/job:ps/task:0/device:CPU:0");
    CHECK(current_device_spec({"add", "Add"}).to_string() == "/job:worker/device:CPU:0");
  }
  SECTION("custom ps_ops") {
    DeviceScope setter(
        replica_device_setter({.ps_tasks = 3, .ps_ops = std::vector<std::string>{"MyTable"}}));
    CHECK(current_device_spec({"t", "MyTable"}).to_string() == "/job:ps/task:0");
    CHECK(current_device_spec({"v", "VariableV2"}).to_string() == "/job:worker");
  }
  SECTION("no ps tasks, or no ps job in the cluster: placement unchanged") {
    CHECK_FALSE(replica_device_setter(ReplicaDeviceSetterOptions{}));
    CHECK_FALSE(replica_device_setter(
        {.cluster = ClusterSpec({{"worker", std::vector<std::string>{"w0:1"}}})}));
    CHECK_THROWS_AS(replica_device_setter({.ps_tasks = -1}), InvalidArgumentError);
    CHECK_THROWS_AS(replica_device_setter({.ps_tasks = 1, .ps_device = "/bogus:x"}),
                    InvalidArgumentError);
  }
}
