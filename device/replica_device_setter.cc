#include "varstate/replica_device_setter.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>

#include "base/logging.h"
#include "varstate/error.h"

namespace varstate {

ClusterSpec::ClusterSpec(const std::map<std::string, std::vector<std::string>>& jobs) {
  for (const auto& [job, addresses] : jobs) {
    auto& tasks = jobs_[job];
    for (size_t i = 0; i < addresses.size(); ++i) tasks.emplace(static_cast<int>(i), addresses[i]);
  }
}

ClusterSpec ClusterSpec::sparse(std::map<std::string, std::map<int, std::string>> jobs) {
  ClusterSpec out;
  out.jobs_ = std::move(jobs);
  for (const auto& [job, tasks] : out.jobs_) {
    for (const auto& [index, address] : tasks) {
      if (index < 0) {
        throw ValueError("ClusterSpec: task index " + std::to_string(index) + " of job " +
                         quoted(job) + " must be >= 0");
      }
    }
  }
  return out;
}

const std::map<int, std::string>& ClusterSpec::tasks(std::string_view job) const {
  auto it = jobs_.find(std::string(job));
  if (it == jobs_.end()) throw ValueError("No such job in cluster: " + std::string(job));
  return it->second;
}

std::vector<std::string> ClusterSpec::jobs() const {
  std::vector<std::string> out;
  for (const auto& [job, tasks] : jobs_) out.push_back(job);
  return out;
}

bool ClusterSpec::has_job(std::string_view job) const { return jobs_.count(std::string(job)) > 0; }

int ClusterSpec::num_tasks(std::string_view job) const {
  return static_cast<int>(tasks(job).size());
}

std::vector<int> ClusterSpec::task_indices(std::string_view job) const {
  std::vector<int> out;
  for (const auto& [index, address] : tasks(job)) out.push_back(index);
  return out;
}

const std::string& ClusterSpec::task_address(std::string_view job, int task) const {
  const auto& t = tasks(job);
  auto it = t.find(task);
  if (it == t.end()) {
    throw ValueError("No task with index " + std::to_string(task) + " in job " + std::string(job));
  }
  return it->second;
}

std::vector<std::string> ClusterSpec::job_tasks(std::string_view job) const {
  std::vector<std::string> out;
  for (const auto& [index, address] : tasks(job)) out.push_back(address);
  return out;
}

std::optional<TaskRef> task_of(const DeviceSpec& placement) {
  if (!placement.job || !placement.task) return std::nullopt;
  return TaskRef{*placement.job, *placement.task};
}

std::optional<TaskRef> task_of(std::string_view placement) {
  return task_of(DeviceSpec::parse(placement));
}

PsStrategy round_robin_strategy(int num_tasks) {
  if (num_tasks < 1)
    throw ValueError("round_robin_strategy: num_tasks must be >= 1, got " +
                     std::to_string(num_tasks));
  auto next = std::make_shared<std::atomic<int64_t>>(0);
  return [next, num_tasks](const PlacementRequest&) {
    return static_cast<int>(next->fetch_add(1) % num_tasks);
  };
}

int64_t byte_size_load_fn(const PlacementRequest& request) {
  return std::max<int64_t>(0, request.bytes);
}

PsStrategy greedy_load_balancing_strategy(int num_tasks,
                                          std::function<int64_t(const PlacementRequest&)> load_fn) {
  if (num_tasks < 1) {
    throw ValueError("greedy_load_balancing_strategy: num_tasks must be >= 1, got " +
                     std::to_string(num_tasks));
  }
  if (!load_fn) throw ValueError("greedy_load_balancing_strategy: load_fn is required");
  struct Loads {
    std::mutex mu;
    std::vector<int64_t> loads;
  };
  auto state = std::make_shared<Loads>();
  state->loads.assign(static_cast<size_t>(num_tasks), 0);
  return [state, load_fn = std::move(load_fn)](const PlacementRequest& request) {
    const int64_t load = load_fn(request);
    std::lock_guard lock(state->mu);
    auto it = std::min_element(state->loads.begin(), state->loads.end());
    *it += load;
    return static_cast<int>(it - state->loads.begin());
  };
}

DeviceFunction replica_device_setter(const ReplicaDeviceSetterOptions& options) {
  const DeviceSpec ps_spec = DeviceSpec::parse(options.ps_device);
  const DeviceSpec worker_spec = DeviceSpec::parse(options.worker_device);
  int ps_tasks = options.ps_tasks;
  if (options.cluster) {
    if (!ps_spec.job || !options.cluster->has_job(*ps_spec.job)) return nullptr;
    ps_tasks = options.cluster->num_tasks(*ps_spec.job);
  }
  if (ps_tasks < 0) {
    throw InvalidArgumentError("replica_device_setter: ps_tasks must be >= 0, got " +
                               std::to_string(ps_tasks));
  }
  if (ps_tasks == 0) return nullptr;
  if (!options.merge_devices) {
    logger().warn(
        "replica_device_setter: merge_devices=false is deprecated in TensorFlow; "
        "a device set by an enclosing scope is kept as is");
  }
  std::vector<std::string> ps_ops = options.ps_ops.value_or(std::vector<std::string>{
      "Variable", "VariableV2", "AutoReloadVariable", "MutableHashTable", "MutableHashTableV2",
      "MutableHashTableOfTensors", "MutableHashTableOfTensorsV2", "MutableDenseHashTable",
      "MutableDenseHashTableV2", "VarHandleOp"});
  PsStrategy strategy = options.ps_strategy ? options.ps_strategy : round_robin_strategy(ps_tasks);
  const bool merge = options.merge_devices;
  const bool has_ps_device = !options.ps_device.empty();
  return [=](const PlacementRequest& request) -> std::string {
    const DeviceSpec& current = request.current;
    if (!merge && current != DeviceSpec{}) return current.to_string();
    if (has_ps_device && std::find(ps_ops.begin(), ps_ops.end(), request.type) != ps_ops.end()) {
      DeviceSpec ps = ps_spec;
      if (ps.job && (!current.job || current.job == ps.job)) ps.task = strategy(request);
      return ps.merged_with(current).to_string();
    }
    return worker_spec.merged_with(current).to_string();
  };
}

DeviceFunction replica_device_setter(int ps_tasks, std::string ps_device,
                                     std::string worker_device) {
  return replica_device_setter(
      ReplicaDeviceSetterOptions{.ps_tasks = ps_tasks,
                                 .ps_device = std::move(ps_device),
                                 .worker_device = std::move(worker_device)});
}

}  // namespace varstate
