// interop_tool's `placement` command: device-scope nestings of
// test_placement.py (tf.device strings, None and replica_device_setter),
// resolved by varstate.
#pragma once

#include <string>
#include <vector>

namespace varstate::interop {

// interop_tool placement OUT: one line "CASE\tVARIABLE_DEVICE\tOP_DEVICE"
// per case: the device a variable (VariableV2) and a non-variable op (NoOp)
// get under the case's scopes.
int cmd_placement(const std::vector<std::string>& args);

}  // namespace varstate::interop
