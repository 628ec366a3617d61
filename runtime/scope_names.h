// TensorFlow's checks of the names that open name scopes (ops.name_scope):
// get_variable's full names and variable_scope's names.
#pragma once

#include <string_view>

namespace varstate {

// ValueError unless `name` may open a name scope: at the root (no name
// scope open) it must match TensorFlow's op-name pattern
// ^[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*$, inside a name scope the scope-name
// pattern ^[A-Za-z0-9_.\\/>-]*$. The messages are TensorFlow's.
void check_scope_name(std::string_view name, bool in_name_scope);

}  // namespace varstate
