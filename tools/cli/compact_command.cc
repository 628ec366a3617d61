// `varstate compact CHECKPOINT OUTPUT`: an incremental checkpoint's chain
// (its base and deltas) written as one ordinary full checkpoint that
// TensorFlow reads.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "commands.h"
#include "varstate/checkpoint_chain.h"

namespace varstate::cli {
namespace {

int compact(const std::string& checkpoint, const std::string& output) {
  const std::vector<ChainLink> chain = checkpoint_chain(checkpoint);
  compact_checkpoint(checkpoint, output);
  std::printf("compacted %s (a base and %zu delta(s)) into %s\n", checkpoint.c_str(),
              chain.size() - 1, output.c_str());
  return 0;
}

}  // namespace

Action add_compact_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "compact", "write an incremental checkpoint's chain as one full checkpoint");
  auto checkpoint = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  cmd->add_option("checkpoint", *checkpoint, "the checkpoint prefix (a delta or a full one)")
      ->required();
  cmd->add_option("output", *output, "the prefix of the full checkpoint to write")->required();
  return [checkpoint, output] { return compact(*checkpoint, *output); };
}

}  // namespace varstate::cli
