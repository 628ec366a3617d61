// Placement across a cluster: tf.train.ClusterSpec, the ps strategies and
// tf.train.replica_device_setter with all its arguments.
//
//   ClusterSpec cluster({{"ps", {"ps0:2222", "ps1:2222"}},
//                        {"worker", {"worker0:2222", "worker1:2222", "worker2:2222"}}});
//   DeviceScope scope(replica_device_setter({.cluster = cluster}));
//   Variable v = get_variable("v", {.shape = {20, 20}});
//   v.placement();  // "/job:ps/task:0/device:CPU:0": the decision, kept on v
//
// The placement record. A variable's placement() string is the decision
// the device functions made (job, replica, task) merged with the device
// that holds its bytes in this process. In a single process /job:ps/task:k
// is only a name: the bytes live on a local device (soft placement). A
// multi-process layer maps (job, task) to a process with
// ClusterSpec::task_address() / task_of() and serves the variable there;
// nothing else about the variable has to change.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "varstate/device_spec.h"
#include "varstate/placement.h"

namespace varstate {

// tf.train.ClusterSpec: job name -> tasks (task index -> "host:port").
class ClusterSpec {
 public:
  ClusterSpec() = default;
  // Dense form: task i of a job is the job's i-th address.
  explicit ClusterSpec(const std::map<std::string, std::vector<std::string>>& jobs);
  // Sparse form: explicit task indices (>= 0; ValueError otherwise).
  static ClusterSpec sparse(std::map<std::string, std::map<int, std::string>> jobs);

  // Job names, sorted.
  std::vector<std::string> jobs() const;
  bool has_job(std::string_view job) const;
  // The number of tasks of `job`; ValueError("No such job in cluster: ps").
  int num_tasks(std::string_view job) const;
  // The task indices of `job`, sorted.
  std::vector<int> task_indices(std::string_view job) const;
  // The address of a task; ValueError naming the job and task when absent.
  const std::string& task_address(std::string_view job, int task) const;
  // The addresses of a job's tasks in index order (the dense form).
  std::vector<std::string> job_tasks(std::string_view job) const;
  const std::map<std::string, std::map<int, std::string>>& as_dict() const { return jobs_; }
  bool operator==(const ClusterSpec& other) const = default;

 private:
  const std::map<int, std::string>& tasks(std::string_view job) const;
  std::map<std::string, std::map<int, std::string>> jobs_;
};

// The task a placement names, if it names a job and a task: the key a
// multi-process layer uses to find the process that serves a variable.
struct TaskRef {
  std::string job;
  int task = 0;
  bool operator==(const TaskRef&) const = default;
};
std::optional<TaskRef> task_of(const DeviceSpec& placement);
std::optional<TaskRef> task_of(std::string_view placement);

// A ps strategy picks the ps task for a variable being placed.
using PsStrategy = std::function<int(const PlacementRequest&)>;

// Tasks 0, 1, ..., num_tasks - 1, 0, ... in turn (the default). Copies
// share the counter. ValueError for num_tasks < 1.
PsStrategy round_robin_strategy(int num_tasks);

// The size in bytes of the variable being placed (0 when unknown), TF's
// byte_size_load_fn.
int64_t byte_size_load_fn(const PlacementRequest& request);

// tf.contrib.training.GreedyLoadBalancingStrategy: the task with the least
// load so far (the lowest index among equals), which then carries
// load_fn(request) more. Copies share the loads. ValueError for num_tasks
// < 1.
PsStrategy greedy_load_balancing_strategy(
    int num_tasks, std::function<int64_t(const PlacementRequest&)> load_fn = byte_size_load_fn);

struct ReplicaDeviceSetterOptions {
  // Number of ps tasks; ignored when `cluster` is given (its ps job's size).
  int ps_tasks = 0;
  std::string ps_device = "/job:ps";
  std::string worker_device = "/job:worker";
  // Merge with the enclosing device scopes (their fields win) rather than
  // replace them when they set a device.
  bool merge_devices = true;
  std::optional<ClusterSpec> cluster = std::nullopt;
  // The request types placed on the ps; default: TensorFlow's variable and
  // table ops ("Variable", "VariableV2", "VarHandleOp", "AutoReloadVariable",
  // "MutableHashTable", ...).
  std::optional<std::vector<std::string>> ps_ops = std::nullopt;
  // Default: round_robin_strategy(ps_tasks).
  PsStrategy ps_strategy = nullptr;
};

// tf.train.replica_device_setter: ps_ops go to ps_device with the task the
// strategy picks (when the enclosing scopes name no other job), merged with
// the enclosing scopes' spec; everything else to worker_device merged the
// same way. Returns an empty DeviceFunction (TensorFlow's None: placement
// unchanged) when there are no ps tasks, or when `cluster` has no job named
// by ps_device. Throws InvalidArgumentError for a malformed device string.
DeviceFunction replica_device_setter(const ReplicaDeviceSetterOptions& options);

// The positional form, tf.train.replica_device_setter(ps_tasks, ps_device,
// worker_device): the options form with those three fields, so with
// ps_tasks == 0 it returns an empty DeviceFunction (TensorFlow's None).
// InvalidArgumentError for ps_tasks < 0 or a malformed device string.
DeviceFunction replica_device_setter(int ps_tasks, std::string ps_device = "/job:ps",
                                     std::string worker_device = "/job:worker");

}  // namespace varstate
