// interop_tool's `sharing` command: the variable-sharing cases of
// test_sharing.py (variable_scope / get_variable), run on varstate.
#pragma once

#include <string>
#include <vector>

namespace varstate::interop {

// interop_tool sharing OUT: one line "CASE\tOUTCOME" per case, OUTCOME
// "ok RESULT" or "ERRORCLASS MESSAGE".
int cmd_sharing(const std::vector<std::string>& args);

}  // namespace varstate::interop
