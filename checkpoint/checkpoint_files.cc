#include "checkpoint/checkpoint_files.h"

#include <regex>
#include <vector>

#include "checkpoint/file_system.h"
#include "checkpoint/tensor_bundle.h"
#include "varstate/error.h"

namespace varstate {

std::string state_file_path(const std::string& save_path, const std::string& latest_filename) {
  return join_path(dirname_of(save_path), latest_filename.empty() ? "checkpoint" : latest_filename);
}

std::string meta_graph_filename(const std::string& checkpoint, const std::string& suffix) {
  static const std::regex kShardSuffix("-[\\d\\?]+-of-\\d+$");
  return std::regex_replace(checkpoint, kShardSuffix, "") + "." + suffix;
}

void remove_temp_dir(FileSystem& fs, const std::string& temp_prefix) {
  const std::string dir = dirname_of(temp_prefix);
  try {
    for (const std::string& name : fs.list_dir(dir)) best_effort_delete(fs, dir + "/" + name);
    fs.delete_dir(dir);
  } catch (const Error&) {
  }
}

void delete_checkpoint_files(FileSystem& fs, const std::string& prefix,
                             const std::string& meta_graph_file) {
  const bool v2 = fs.file_exists(bundle_index_filename(prefix));
  std::vector<std::string> files{bundle_index_filename(prefix)};
  for (const std::string& f : match_files(fs, prefix + ".data-?????-of-?????")) files.push_back(f);
  files.push_back(meta_graph_file);
  if (!v2) {
    for (const std::string& f : match_files(fs, prefix)) files.push_back(f);  // a V1 checkpoint
  }
  for (const std::string& f : files) best_effort_delete(fs, f);
}

}  // namespace varstate
