// varstate CLI: `varstate <command> [args]`.
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <string>

#include "base/error.h"
#include "tools/commands.h"

namespace {

struct Command {
  std::function<int(const varstate::cli::Args&)> run;
  const char* help;
};

const std::map<std::string, Command>& commands() {
  static const std::map<std::string, Command> table = {
      {"demo", {varstate::cli::demo_command, "the main job: build, initialize and train variables"}},
      {"devices", {varstate::cli::devices_command, "list the CPU and GPUs varstate finds"}},
      {"inspect", {varstate::cli::inspect_command, "list a checkpoint's tensors (PATH [--tensor NAME])"}},
  };
  return table;
}

int usage(FILE* out) {
  std::fprintf(out, "usage: varstate <command> [args]\n\ncommands:\n");
  for (const auto& [name, cmd] : commands()) std::fprintf(out, "  %-10s %s\n", name.c_str(), cmd.help);
  return out == stderr ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr);
  std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") return usage(stdout);
  auto it = commands().find(name);
  if (it == commands().end()) {
    std::fprintf(stderr, "varstate: unknown command \"%s\"\n\n", name.c_str());
    return usage(stderr);
  }
  try {
    return it->second.run(varstate::cli::Args(argv + 2, argv + argc));
  } catch (const varstate::Error& e) {
    std::fprintf(stderr, "varstate %s: %s: %s\n", name.c_str(),
                 std::string(varstate::error_code_name(e.code())).c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "varstate %s: %s\n", name.c_str(), e.what());
    return 1;
  }
}
