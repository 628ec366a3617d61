#include "runtime/scope_names.h"

#include <string>

#include "varstate/error.h"

namespace varstate {
namespace {

bool is_alnum_or_dot(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.';
}

// [A-Za-z0-9_.\\/>-]
bool is_scope_char(char c) {
  return is_alnum_or_dot(c) || c == '_' || c == '\\' || c == '/' || c == '>' || c == '-';
}

bool all_scope_chars(std::string_view s) {
  for (char c : s) {
    if (!is_scope_char(c)) return false;
  }
  return true;
}

}  // namespace

void check_scope_name(std::string_view name, bool in_name_scope) {
  if (in_name_scope) {
    if (all_scope_chars(name)) return;
    throw ValueError("'" + std::string(name) +
                     "' is not a valid scope name. A scope name has to match the following "
                     "pattern: ^[A-Za-z0-9_.\\\\/>-]*$");
  }
  if (!name.empty() && is_alnum_or_dot(name[0]) && all_scope_chars(name.substr(1))) return;
  throw ValueError("'" + std::string(name) +
                   "' is not a valid root scope name. A root scope name has to match the "
                   "following pattern: ^[A-Za-z0-9.][A-Za-z0-9_.\\\\/>-]*$");
}

}  // namespace varstate
