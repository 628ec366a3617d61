#include "varstate/placement.h"

#include <atomic>
#include <mutex>
#include <set>
#include <variant>
#include <vector>

#include "base/logging.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

namespace varstate {
namespace {

using ScopeEntry = std::variant<DeviceSpec, DeviceFunction>;

std::vector<ScopeEntry>& scope_stack() {
  thread_local std::vector<ScopeEntry> stack;
  return stack;
}

std::atomic<bool> g_soft_placement{true};

}  // namespace

DeviceScope::DeviceScope(std::string_view spec) {
  scope_stack().emplace_back(DeviceSpec::parse(spec));
}

DeviceScope::DeviceScope(DeviceFunction fn) { scope_stack().emplace_back(std::move(fn)); }

DeviceScope::~DeviceScope() { scope_stack().pop_back(); }

// TensorFlow's order: the innermost scope applies first and each enclosing
// one applies to what the inner ones chose. A device string fills the fields
// the inner scopes left unset; a device function gets that choice as
// `current` and returns the new device; an empty function (tf.device(None))
// ends the walk, so the scopes outside it do not apply.
DeviceSpec current_device_spec(const PlacementRequest& what) {
  DeviceSpec spec;
  const auto& stack = scope_stack();
  for (auto entry = stack.rbegin(); entry != stack.rend(); ++entry) {
    if (const auto* s = std::get_if<DeviceSpec>(&*entry)) {
      spec = s->merged_with(spec);
      continue;
    }
    const auto& fn = std::get<DeviceFunction>(*entry);
    if (!fn) break;
    PlacementRequest request = what;
    request.current = spec;
    spec = DeviceSpec::parse(fn(request));
  }
  return spec;
}

Device& resolve_device(const DeviceSpec& spec, std::string_view what) {
  auto& manager = DeviceManager::instance();
  if (!spec.device_type) {
    return manager.num_gpus() > 0 ? manager.gpu(0) : manager.cpu();
  }
  if (Device* device = manager.find(spec)) return *device;
  DeviceSpec wanted = spec;
  if (!wanted.device_index) wanted.device_index = 0;
  std::string subject = what.empty() ? std::string() : " for " + quoted(what);
  if (!g_soft_placement.load()) {
    throw InvalidArgumentError(
        "cannot place" + subject + " on device " + quoted(wanted.to_string()) +
        ": no such device (soft placement is off); available devices: " + manager.device_list());
  }
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard lock(mu);
  if (warned.insert(wanted.to_string()).second) {
    logger().warn("device {} does not exist{}; placing on {} instead (soft placement)",
                  quoted(wanted.to_string()), subject, manager.cpu().name());
  }
  return manager.cpu();
}

Device& resolve_device(const DeviceSpec& spec, DType dtype, std::string_view what) {
  if (dtype_has_gpu_kernels(dtype)) return resolve_device(spec, what);
  auto& manager = DeviceManager::instance();
  if (!spec.device_type) return manager.cpu();
  Device& requested = resolve_device(spec, what);
  if (requested.is_cpu()) return requested;
  const std::string type(dtype_name(dtype));
  const std::string subject = what.empty() ? type + " tensor" : quoted(what) + " (" + type + ")";
  if (!g_soft_placement.load()) {
    throw InvalidArgumentError("cannot place " + subject + " on " + requested.name() + ": " + type +
                               " has no GPU kernels (soft placement is off)");
  }
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard lock(mu);
  if (warned.insert(requested.name() + "/" + type).second) {
    logger().warn("{} has no GPU kernels: placing {} on {} instead of {} (soft placement)", type,
                  subject, manager.cpu().name(), requested.name());
  }
  return manager.cpu();
}

Device& place(const PlacementRequest& what) {
  return resolve_device(current_device_spec(what), what.name);
}

Device& place(const PlacementRequest& what, DType dtype) {
  return resolve_device(current_device_spec(what), dtype, what.name);
}

void set_soft_placement(bool enabled) { g_soft_placement.store(enabled); }
bool soft_placement() { return g_soft_placement.load(); }

}  // namespace varstate
