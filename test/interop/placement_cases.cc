#include "placement_cases.h"

#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>

#include "varstate/placement.h"
#include "varstate/replica_device_setter.h"

namespace varstate::interop {
namespace {

using Scopes = std::vector<std::unique_ptr<DeviceScope>>;
using Scope = std::function<std::unique_ptr<DeviceScope>()>;

Scope device(const char* spec) {
  return [=] { return std::make_unique<DeviceScope>(spec); };
}
Scope none() {
  return [] { return std::make_unique<DeviceScope>(DeviceFunction{}); };
}
Scope setter(ReplicaDeviceSetterOptions options) {
  return [=] { return std::make_unique<DeviceScope>(replica_device_setter(options)); };
}
Scope setter_positional(int ps_tasks) {
  return [=] { return std::make_unique<DeviceScope>(replica_device_setter(ps_tasks)); };
}

// Outermost scope first, as the `with` blocks of test_placement.py.
const std::map<std::string, std::vector<Scope>>& cases() {
  static const auto* all = new std::map<std::string, std::vector<Scope>>{
      {"strings_nested", {device("/job:ps/task:1"), device("/device:CPU:0")}},
      {"inner_job_wins", {device("/job:ps/task:1"), device("/job:worker")}},
      {"setter_in_ps_task", {device("/job:ps/task:5"), setter({.ps_tasks = 2})}},
      {"setter_in_other_job", {device("/job:other"), setter({.ps_tasks = 2})}},
      {"setter_in_worker_task", {device("/job:worker/task:7"), setter({.ps_tasks = 1})}},
      {"setter_in_cpu", {device("/device:CPU:0"), setter({.ps_tasks = 2})}},
      {"setter_no_merge_in_cpu",
       {device("/device:CPU:0"), setter({.ps_tasks = 2, .merge_devices = false})}},
      {"setter_no_merge_around_worker",
       {setter({.ps_tasks = 2, .merge_devices = false}), device("/job:worker/device:CPU:0")}},
      {"setter_around_cpu", {setter({.ps_tasks = 2}), device("/device:CPU:0")}},
      {"none_in_job", {device("/job:foo"), none()}},
      {"none_then_cpu", {device("/job:foo/task:2"), none(), device("/device:CPU:0")}},
      {"setter_zero_in_job", {device("/job:foo"), setter_positional(0)}},
      {"setter_zero_options_in_job", {device("/job:foo"), setter({.ps_tasks = 0})}},
      {"empty_string_in_job", {device("/job:foo"), device("")}},
  };
  return *all;
}

}  // namespace

int cmd_placement(const std::vector<std::string>& args) {
  if (args.size() != 1) throw std::invalid_argument("usage: interop_tool placement OUT");
  std::ofstream out(args[0]);
  for (const auto& [name, scopes] : cases()) {
    Scopes open;
    for (const auto& make : scopes) open.push_back(make());
    out << name << '\t' << current_device_spec({"v", "VariableV2"}).to_string() << '\t'
        << current_device_spec({"n", "NoOp"}).to_string() << '\n';
    while (!open.empty()) open.pop_back();  // innermost first, as the scopes nest
  }
  return out ? 0 : 1;
}

}  // namespace varstate::interop
