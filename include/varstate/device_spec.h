// TensorFlow device strings: parsing, validation, merging and printing.
//
//   /job:ps/replica:0/task:1/device:GPU:0   full form
//   /device:CPU:0  /gpu:1  /cpu:0           device only (legacy lowercase too)
//   GPU:0  CPU                              bare type[:index]
//   /job:worker/task:3                      partial: unset fields stay unset
//   /device:GPU:*                           "*" index: any device of that type
//
// Every field is optional; merging an inner spec into an outer one (nested
// device scopes) takes the inner fields where set and the outer ones
// elsewhere, as tf.device does.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace varstate {

struct DeviceSpec {
  std::optional<std::string> job;
  std::optional<int> replica;
  std::optional<int> task;
  std::optional<std::string> device_type;  // canonical upper case: "CPU", "GPU"
  std::optional<int> device_index;         // unset for "*" or no index

  // Parses a device string. The empty string gives an empty spec. Throws
  // InvalidArgumentError quoting the string when it is malformed.
  static DeviceSpec parse(std::string_view text);

  // A spec of the given type and index: DeviceSpec::of("GPU", 1).
  static DeviceSpec of(std::string_view type, int index);

  // Returns this spec with every field that `inner` sets replaced by it.
  DeviceSpec merged_with(const DeviceSpec& inner) const;

  // Canonical string: "/job:ps/replica:0/task:1/device:GPU:0", with unset
  // fields left out ("/device:GPU:0"); a type without index prints "/device:GPU:*".
  std::string to_string() const;

  bool empty() const { return !job && !replica && !task && !device_type && !device_index; }
  bool operator==(const DeviceSpec&) const = default;
};

}  // namespace varstate
