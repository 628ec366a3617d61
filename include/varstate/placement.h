// Device placement: which device a new variable or op goes to.
//
// Device scopes stack per thread, as `with tf.device(...)` blocks do: a
// DeviceScope pushes a device string or a device function (a callable that
// picks a device string from what is being placed, like
// replica_device_setter) for its lifetime. As in TensorFlow, the innermost
// scope applies first and each enclosing scope applies to its result: a
// string fills the fields still unset (inner fields win), a function is
// called with the device chosen so far (PlacementRequest::current) and
// returns the new one. An empty DeviceFunction is tf.device(None): the
// scopes outside it are ignored. An empty string changes nothing.
//
// Resolution: no device type -> GPU:0 if there is a GPU, else CPU:0; a
// device type without index -> index 0. Under soft placement (the default) a
// device this process does not have falls back to CPU:0 with one logged
// warning per device string; under strict placement it raises
// InvalidArgumentError naming the device and the devices that exist.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "varstate/device.h"
#include "varstate/device_spec.h"
#include "varstate/dtype.h"

namespace varstate {

// What is being placed, for device functions: its name and kind
// ("VariableV2", "Assign", ...), the device chosen so far by the scopes
// inside the function's scope (TensorFlow's op.device when the function
// runs), and for a variable its size in bytes when known (-1 otherwise).
struct PlacementRequest {
  std::string name;
  std::string type;
  DeviceSpec current = {};
  int64_t bytes = -1;
};

using DeviceFunction = std::function<std::string(const PlacementRequest&)>;

class DeviceScope {
 public:
  // Throws InvalidArgumentError if `spec` is malformed (nothing is pushed).
  explicit DeviceScope(std::string_view spec);
  // An empty `fn` (TensorFlow's None) clears the enclosing scopes.
  explicit DeviceScope(DeviceFunction fn);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
};

// The merged spec of this thread's device scopes for `what`.
DeviceSpec current_device_spec(const PlacementRequest& what = {});

// Resolves a spec to a device with the rules above; `what` names the thing
// being placed in warnings and errors.
Device& resolve_device(const DeviceSpec& spec, std::string_view what = {});

// Placement by kernel availability, as TensorFlow's placer does: a dtype
// with no GPU kernels (string) goes to CPU:0 when the spec names no device
// type, and, when it names a GPU, under soft placement (one logged warning
// per device and dtype); under strict placement that raises
// InvalidArgumentError naming `what`, the dtype and the device. Other dtypes
// resolve as resolve_device(spec, what).
Device& resolve_device(const DeviceSpec& spec, DType dtype, std::string_view what = {});

// resolve_device(current_device_spec(what), what.name), and the same for
// something holding `dtype` elements.
Device& place(const PlacementRequest& what = {});
Device& place(const PlacementRequest& what, DType dtype);

// Soft placement is process-wide and on by default.
void set_soft_placement(bool enabled);
bool soft_placement();

}  // namespace varstate
