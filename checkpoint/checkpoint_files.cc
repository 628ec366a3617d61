#include "checkpoint/checkpoint_files.h"

#include <algorithm>
#include <cstdint>
#include <regex>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "checkpoint/checkpoint_chain.h"
#include "checkpoint/file_system.h"
#include "checkpoint/tensor_bundle.h"
#include "varstate/checkpoint_state.h"
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

std::vector<std::string> newest_links_first(FileSystem& fs, std::vector<std::string> prefixes) {
  // The number of links before each prefix in its chain: 0 for a base or a
  // full checkpoint; deltas of one chain have distinct counts.
  std::vector<std::pair<size_t, std::string>> ranked;
  for (std::string& prefix : prefixes) {
    size_t links = 0;
    try {
      if (fs.file_exists(bundle_index_filename(prefix))) {
        if (auto record = read_chain_record(BundleReader(prefix, &fs))) links = record->size();
      }
    } catch (const Error&) {
      links = SIZE_MAX;  // unreadable: restores nothing, needs nothing
    }
    ranked.emplace_back(links, std::move(prefix));
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& [links, prefix] : ranked) out.push_back(std::move(prefix));
  return out;
}

std::set<std::string> kept_by_state_file(FileSystem& fs, const std::string& dir,
                                         const std::string& latest_filename) {
  std::set<std::string> kept;
  const std::optional<CheckpointState> state = get_checkpoint_state(dir, latest_filename, &fs);
  if (!state) return kept;
  std::vector<std::string> listed = state->all_model_checkpoint_paths;
  listed.push_back(state->model_checkpoint_path);
  for (const std::string& path : listed) {
    if (path.empty()) continue;
    // By name: a state file with absolute paths copied along with its
    // folder names the original's files, and means the copy's.
    const std::string here = join_path(dir, basename_of(path));
    kept.insert(basename_of(path));
    try {
      if (!fs.file_exists(bundle_index_filename(here))) continue;
      if (auto record = read_chain_record(BundleReader(here, &fs))) {
        for (const ChainRecordLink& link : *record) kept.insert(link.name);
      }
    } catch (const Error&) {
      // A listed checkpoint that does not open needs nothing readable.
    }
  }
  return kept;
}

std::vector<std::string> v2_checkpoint_files(const std::string& prefix, int num_shards,
                                             const std::string& meta_graph_file) {
  std::vector<std::string> files{bundle_index_filename(prefix)};
  for (int k = 0; k < num_shards; ++k) files.push_back(bundle_data_filename(prefix, k, num_shards));
  if (!meta_graph_file.empty()) files.push_back(meta_graph_file);
  return files;
}

namespace {

// FileSystem has no stat: a path that exists and lists is a directory.
bool is_directory(FileSystem& fs, const std::string& path) {
  if (!fs.file_exists(path)) return false;
  try {
    fs.list_dir(path);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// True when the state file of `checkpoint`'s directory lists it.
bool listed_in_state(FileSystem& fs, const std::string& checkpoint,
                     const std::string& latest_filename) {
  try {
    const std::optional<CheckpointState> state =
        get_checkpoint_state(dirname_of(checkpoint), latest_filename, &fs);
    if (!state) return false;
    const std::string name = basename_of(checkpoint);
    for (const std::string& p : state->all_model_checkpoint_paths) {
      if (basename_of(p) == name) return true;
    }
    return basename_of(state->model_checkpoint_path) == name;
  } catch (const Error&) {
    return true;  // unreadable: keep the files rather than guess
  }
}

}  // namespace

void check_no_directory_in_the_way(FileSystem& fs, const std::string& what,
                                   const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    if (is_directory(fs, path)) {
      throw FailedPreconditionError(what + ": " + quoted(path) +
                                    " is a directory, where the save must write a file; move it "
                                    "out of the way");
    }
  }
}

void remove_failed_checkpoint(FileSystem& fs, const std::string& checkpoint,
                              const std::string& meta_graph_file,
                              const std::string& latest_filename) {
  if (listed_in_state(fs, checkpoint, latest_filename)) return;
  try {
    delete_checkpoint_files(fs, checkpoint, meta_graph_file);
  } catch (const Error& e) {
    logger().warn("removing what the failed save of {} wrote: {}", quoted(checkpoint), e.what());
  }
}

}  // namespace varstate
