// Runtime-internal: creating dynamic variables (varstate/dynamic_variable.h)
// for get_dynamic_variable (runtime/variable_scope.cc) and the optimizers'
// dynamic slots (training/optimizer.cc).
#pragma once

#include <string>
#include <vector>

#include "runtime/keyed_table.h"
#include "varstate/dynamic_variable.h"
#include "varstate/graph.h"
#include "varstate/initializers.h"

namespace varstate::internal {

// Whether keyed_row_init accepts `init` (false for an empty one).
bool draws_rows_from_keys(const Initializer& init);

// How `init` draws a new key's row of `dtype` for the variable `name`:
// ValueError for an initializer whose values depend on the table's shape
// or that is a custom function.
KeyedRowInit keyed_row_init(const Initializer& init, DType dtype, const std::string& name);

// Checks DynamicVariableOptions::devices: none, or two or more distinct
// devices this process has (ValueError naming `what` and the device).
void check_shard_devices(const std::string& what, const std::vector<std::string>& devices);

// The devices a table is sharded over, as a message lists them
// ("[/device:CPU:0, /device:GPU:0]"; one device when not sharded): those
// `devices` name (checked), or those of `v`'s table.
std::string shard_device_names(const std::vector<std::string>& devices);
std::string shard_device_names(const DynamicVariable& v);

// The new dynamic variable `name` (a full name, used as given) in `graph`,
// on the current device scope's device. The caller holds the variable
// store's lock, has checked that the name is free and `o`'s values.
Variable create_dynamic_variable(Graph& graph, const std::string& name,
                                 const DynamicVariableOptions& o, DType dtype,
                                 const Initializer& initializer);

// The handle of a Variable known to be a dynamic variable.
DynamicVariable as_dynamic(const Variable& v);

}  // namespace varstate::internal
