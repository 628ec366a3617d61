// Subcommands of the varstate CLI. Each add_*_command registers its
// subcommand and flags on the root CLI11 app and returns the action that
// runs it once the command line parsed; the action returns the exit code.
#pragma once

#include <CLI/Validators.hpp>

#include <functional>
#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace varstate::cli {

using Action = std::function<int()>;

Action add_bench_command(CLI::App& app);
Action add_compact_command(CLI::App& app);
Action add_demo_command(CLI::App& app);
Action add_devices_command(CLI::App& app);
Action add_inspect_command(CLI::App& app);

// A CLI11 check for counts: a whole number >= `min` ("--steps: expected a
// whole number >= 0, got \"abc\"").
CLI::Validator count_at_least(long long min);

// A CLI11 check for a finite real number >= 0.
CLI::Validator non_negative_real();

// Creates `dir` (and its parents) when missing and checks a file can be
// created in it; throws InvalidArgumentError naming `flag` and the reason.
void ensure_writable_dir(const std::string& flag, const std::string& dir);

}  // namespace varstate::cli
