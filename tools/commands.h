// Subcommands of the varstate CLI. Each takes the arguments after its name
// and returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace varstate::cli {

using Args = std::vector<std::string>;

int devices_command(const Args& args);
int demo_command(const Args& args);
int inspect_command(const Args& args);

}  // namespace varstate::cli
