#include "checkpoint/live_save_internal.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <set>
#include <string_view>
#include <vector>

#include "base/logging_internal.h"
#include "checkpoint/checkpoint_files.h"
#include "checkpoint/file_system.h"
#include "varstate/error.h"

namespace varstate::internal {
namespace {

// The saves in flight in this process: their checkpoint prefixes and state
// files. Cleaning up after a crash leaves their temporary files alone.
struct LiveSaves {
  std::mutex mu;
  std::multiset<std::string> checkpoints;
  std::multiset<std::string> state_files;
};

LiveSaves& live_saves() {
  static LiveSaves* saves =
      new LiveSaves;  // never destroyed: savers may outlive static destruction
  return *saves;
}

bool all_of_chars(std::string_view s, int (*pred)(int)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) {
    return pred(static_cast<unsigned char>(c)) != 0;
  });
}

// The length of the checkpoint name that `name` starts with: `base`, or
// `base`-<step>.
size_t checkpoint_stem(const std::string& name, const std::string& base) {
  size_t stem = base.size();
  if (stem < name.size() && name[stem] == '-') {
    size_t end = stem + 1;
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    if (end > stem + 1) stem = end;
  }
  return stem;
}

// Removes `path`, named "<checkpoint><rest>", if it is what an interrupted
// save of <checkpoint> left: a "_temp_<hex>" folder, a ".*.tempstate<n>"
// file, or a ".data-?????-of-?????" shard whose index is gone (a deletion
// cut short).
void remove_if_stale(FileSystem& fs, const std::string& path, const std::string& checkpoint,
                     std::string_view rest, const std::set<std::string>& present) {
  if (rest.starts_with("_temp_")) {
    const std::string_view hex = rest.substr(6);
    if (hex.size() == 32 && all_of_chars(hex, isxdigit)) {
      logger().info("removing {}, left by an interrupted sharded save", path);
      remove_temp_dir(fs, path + "/part");
    }
    return;
  }
  if (!rest.starts_with(".")) return;
  const auto temp = rest.rfind(".tempstate");
  if (temp != std::string_view::npos && all_of_chars(rest.substr(temp + 10), isdigit)) {
    logger().info("removing {}, left by an interrupted save", path);
    best_effort_delete(fs, path);
    return;
  }
  // ".data-00000-of-00001" without the index: an interrupted deletion.
  if (rest.size() == 20 && rest.starts_with(".data-") && rest.substr(11, 4) == "-of-" &&
      all_of_chars(rest.substr(6, 5), isdigit) && all_of_chars(rest.substr(15), isdigit) &&
      present.count(checkpoint + ".index") == 0) {
    logger().info("removing {}: its checkpoint's index was deleted", path);
    best_effort_delete(fs, path);
  }
}

// Removes what interrupted (killed) saves of `save_path` left in its
// directory (remove_if_stale) and "<state file>.tempstate<n>", where
// <checkpoint> is save_path or save_path-<step> and no save in flight in
// this process owns it. Best effort: failures are logged. Called with
// live_saves().mu held, so that no save registers and creates files
// meanwhile.
void remove_stale_temporaries(FileSystem& fs, const std::string& save_path,
                              const std::string& state_file) {
  const std::string dir = dirname_of(save_path);
  const std::string base = basename_of(save_path);
  const std::string state_temp = basename_of(state_file) + ".tempstate";
  std::set<std::string> owned;
  for (const std::string& c : live_saves().checkpoints) {
    if (dirname_of(c) == dir) owned.insert(basename_of(c));
  }
  const bool state_owned = live_saves().state_files.count(state_file) != 0;
  std::vector<std::string> names;
  try {
    names = fs.list_dir(dir);
  } catch (const Error& e) {
    logger().warn("could not list {} to remove stale temporary files: {}", dir, e.what());
    return;
  }
  const std::set<std::string> present(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = join_path(dir, name);
    if (name.starts_with(state_temp)) {
      if (!state_owned && all_of_chars(std::string_view(name).substr(state_temp.size()), isdigit)) {
        logger().info("removing {}, left by an interrupted save", path);
        best_effort_delete(fs, path);
      }
      continue;
    }
    if (!name.starts_with(base)) continue;
    const size_t stem = checkpoint_stem(name, base);
    const std::string checkpoint = name.substr(0, stem);
    if (owned.count(checkpoint) != 0) continue;
    remove_if_stale(fs, path, checkpoint, std::string_view(name).substr(stem), present);
  }
}

}  // namespace

LiveSave::LiveSave(FileSystem& fs, const std::string& save_path, std::string checkpoint,
                   std::string state_file)
    : checkpoint_(std::move(checkpoint)), state_file_(std::move(state_file)) {
  std::lock_guard lock(live_saves().mu);
  remove_stale_temporaries(fs, save_path, state_file_);
  live_saves().checkpoints.insert(checkpoint_);
  live_saves().state_files.insert(state_file_);
}

LiveSave::~LiveSave() {
  std::lock_guard lock(live_saves().mu);
  live_saves().checkpoints.erase(live_saves().checkpoints.find(checkpoint_));
  live_saves().state_files.erase(live_saves().state_files.find(state_file_));
}

}  // namespace varstate::internal
