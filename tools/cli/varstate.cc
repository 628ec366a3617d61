// varstate CLI: `varstate <command> [flags]`. Flags are parsed by CLI11 for
// every command (`--name=value` and `--name value`, `--help` on each); any
// bad input ends in one line on stderr and a non-zero exit code.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "varstate/error.h"

namespace varstate::cli {

CLI::Validator count_at_least(long long min) {
  return CLI::Validator(
      [min](std::string& value) -> std::string {
        long long n = 0;
        size_t used = 0;
        try {
          n = std::stoll(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != value.size()) {
          return "expected a whole number >= " + std::to_string(min) + ", got \"" + value + "\"";
        }
        if (n < min) return "must be >= " + std::to_string(min) + ", got " + value;
        return {};
      },
      "");  // the flag's help says what it counts
}

CLI::Validator non_negative_real() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        double x = 0;
        size_t used = 0;
        try {
          x = std::stod(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != value.size() || !std::isfinite(x)) {
          return "expected a number >= 0, got \"" + value + "\"";
        }
        if (x < 0) return "must be >= 0, got " + value;
        return {};
      },
      "");
}

void ensure_writable_dir(const std::string& flag, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw InvalidArgumentError(flag + " " + varstate::quoted(dir) + ": cannot create the folder (" +
                               ec.message() + ")");
  }
  if (!fs::is_directory(dir, ec)) {
    throw InvalidArgumentError(flag + " " + varstate::quoted(dir) + ": not a folder");
  }
  const fs::path probe = fs::path(dir) / ".varstate-write-probe";
  {
    std::ofstream out(probe);
    if (!out || !(out << "x") || !out.flush()) {
      throw InvalidArgumentError(flag + " " + varstate::quoted(dir) + ": folder is not writable");
    }
  }
  fs::remove(probe, ec);
}

}  // namespace varstate::cli

namespace {

// One line: newlines in a message become "; ".
std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (size_t pos; (pos = s.find('\n')) != std::string::npos;) s.replace(pos, 1, "; ");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  namespace cli = varstate::cli;
  CLI::App app{"varstate: TensorFlow-1-style variables for C++ training programs", "varstate"};
  app.set_version_flag("--version", std::string("varstate ") + VARSTATE_VERSION_STRING);
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, cli::Action>> commands;
  for (auto add : {cli::add_demo_command, cli::add_devices_command, cli::add_inspect_command,
                   cli::add_compact_command, cli::add_bench_command}) {
    cli::Action action = add(app);
    commands.emplace_back(app.get_subcommands([](CLI::App*) { return true; }).back(),
                          std::move(action));
  }

  std::string names;
  bool known = false;
  for (const auto& [cmd, action] : commands) {
    names += (names.empty() ? "" : ", ") + cmd->get_name();
    known = known || (argc >= 2 && cmd->get_name() == argv[1]);
  }
  if (argc >= 2 && argv[1][0] != '-' && !known) {
    std::fprintf(stderr, "varstate: unknown command \"%s\" (commands: %s; see varstate --help)\n",
                 argv[1], names.c_str());
    return 2;
  }
  if (argc >= 2 && argv[1][0] == '-' && std::string(argv[1]) != "-h" &&
      std::string(argv[1]) != "--help" && std::string(argv[1]) != "--version") {
    std::fprintf(stderr,
                 "varstate: unknown flag \"%s\" (usage: varstate [--help | --version] COMMAND "
                 "[FLAGS]; commands: %s)\n",
                 argv[1], names.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version: stdout, exit 0
    std::string who = "varstate";
    for (const auto& [cmd, action] : commands) {
      if (cmd->parsed()) who += " " + cmd->get_name();
    }
    std::fprintf(stderr, "%s: %s (see %s --help)\n", who.c_str(), one_line(e.what()).c_str(),
                 who.c_str());
    return 2;
  }

  for (const auto& [cmd, action] : commands) {
    if (!cmd->parsed()) continue;
    const std::string who = "varstate " + cmd->get_name();
    try {
      return action();
    } catch (const varstate::Error& e) {
      std::fprintf(stderr, "%s: %s: %s\n", who.c_str(),
                   std::string(varstate::error_code_name(e.code())).c_str(),
                   one_line(e.what()).c_str());
      return 1;
    } catch (const std::bad_alloc&) {
      // A standard container that could not grow: the same class as a
      // tensor that cannot be allocated.
      std::fprintf(stderr, "%s: ResourceExhaustedError: out of host memory\n", who.c_str());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", who.c_str(), one_line(e.what()).c_str());
      return 1;
    }
  }
  return 2;  // unreachable: require_subcommand(1)
}
