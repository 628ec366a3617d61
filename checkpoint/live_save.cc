#include "checkpoint/live_save_internal.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <set>
#include <string_view>
#include <vector>

#include "base/logging.h"
#include "checkpoint/checkpoint_chain.h"
#include "checkpoint/checkpoint_files.h"
#include "checkpoint/file_system.h"
#include "checkpoint/tensor_bundle.h"
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

// True when `present` (a directory's names) holds checkpoint `checkpoint`:
// its V2 index, or its V1 file or shards ("<checkpoint>-00000-of-00002").
bool has_checkpoint(const std::set<std::string>& present, const std::string& checkpoint) {
  if (present.count(checkpoint + ".index") != 0 || present.count(checkpoint) != 0) return true;
  const auto shard = present.lower_bound(checkpoint + "-");
  return shard != present.end() && shard->starts_with(checkpoint + "-");
}

// Removes `path`, named "<checkpoint><rest>", if it is what an interrupted
// save of <checkpoint> left: a "_temp_<hex>" folder, a ".*.tempstate<n>"
// file, or what a deletion cut short left: a ".data-?????-of-?????" shard
// whose index is gone, or, for a checkpoint with a step (`stepped`: a meta
// graph exported on its own as "<save_path>.meta" is the user's), its
// ".meta" file (the meta graph is written after the index and deleted
// after it).
void remove_if_stale(FileSystem& fs, const std::string& path, const std::string& checkpoint,
                     std::string_view rest, const std::set<std::string>& present, bool stepped) {
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
    return;
  }
  if (stepped && rest == ".meta" && !has_checkpoint(present, checkpoint)) {
    logger().info("removing {}: its checkpoint was deleted", path);
    best_effort_delete(fs, path);
  }
}

// Removes the deltas among `checkpoints` (names in `dir`) with a link
// missing from `present` that the state file `state_file` neither lists
// nor needs: a deletion of their chain was cut short, and nothing can
// restore them. Newest first, as retention deletes.
void remove_broken_chains(FileSystem& fs, const std::string& dir,
                          const std::vector<std::string>& checkpoints,
                          const std::set<std::string>& present, const std::string& state_file) {
  std::vector<std::string> broken;
  for (const std::string& name : checkpoints) {
    try {
      const auto record = read_chain_record(BundleReader(join_path(dir, name), &fs));
      if (record && std::any_of(record->begin(), record->end(), [&](const ChainRecordLink& l) {
            return present.count(l.name + ".index") == 0;
          })) {
        broken.push_back(name);
      }
    } catch (const Error&) {
      // Unreadable: not known to be a delta; left alone.
    }
  }
  if (broken.empty()) return;
  std::set<std::string> kept;
  try {
    kept = kept_by_state_file(fs, dir, basename_of(state_file));
  } catch (const Error& e) {
    logger().warn("not removing deltas whose base is missing: reading {}: {}", state_file,
                  e.what());
    return;
  }
  std::vector<std::string> doomed;
  for (const std::string& name : broken) {
    if (kept.count(name) == 0) doomed.push_back(join_path(dir, name));
  }
  for (const std::string& prefix : newest_links_first(fs, std::move(doomed))) {
    logger().info("removing {}: a checkpoint its chain needs is gone (an interrupted deletion)",
                  prefix);
    delete_checkpoint_files(fs, prefix, prefix + ".meta");
  }
}

// Removes what interrupted (killed) saves of `save_path` left in its
// directory (remove_if_stale) and "<state file>.tempstate<n>", where
// <checkpoint> is save_path or save_path-<step> (with Sweep::kCheckpointOnly
// only `checkpoint`) and no save in flight in this process owns it, then
// with Sweep::kSavePath the broken chains (remove_broken_chains). Best
// effort: failures are logged. Called with live_saves().mu held, so that
// no save registers and creates files meanwhile.
void remove_stale_temporaries(FileSystem& fs, const std::string& save_path,
                              const std::string& only_checkpoint, const std::string& state_file,
                              Sweep sweep) {
  const std::string dir = dirname_of(save_path);
  const std::string base = basename_of(save_path);
  const std::string state_temp =
      state_file.empty() ? std::string() : basename_of(state_file) + ".tempstate";
  std::set<std::string> owned;
  for (const std::string& c : live_saves().checkpoints) {
    if (dirname_of(c) == dir) owned.insert(basename_of(c));
  }
  const bool state_owned = live_saves().state_files.count(state_file) != 0;
  std::vector<std::string> names;
  try {
    if (!fs.file_exists(dir)) return;  // a new folder: nothing to sweep
    names = fs.list_dir(dir);
  } catch (const Error& e) {
    logger().warn("could not list {} to remove stale temporary files: {}", dir, e.what());
    return;
  }
  const std::set<std::string> present(names.begin(), names.end());
  std::vector<std::string> indexed;  // unowned checkpoints with an index
  for (const std::string& name : names) {
    const std::string path = join_path(dir, name);
    if (!state_temp.empty() && name.starts_with(state_temp)) {
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
    if (sweep == Sweep::kCheckpointOnly && checkpoint != basename_of(only_checkpoint)) continue;
    const std::string_view rest = std::string_view(name).substr(stem);
    remove_if_stale(fs, path, checkpoint, rest, present, stem > base.size());
    if (rest == ".index") indexed.push_back(checkpoint);
  }
  if (sweep == Sweep::kSavePath) remove_broken_chains(fs, dir, indexed, present, state_file);
}

}  // namespace

LiveSave::LiveSave(FileSystem& fs, const std::string& save_path, std::string checkpoint,
                   std::string state_file, Sweep sweep)
    : checkpoint_(std::move(checkpoint)), state_file_(std::move(state_file)) {
  std::lock_guard lock(live_saves().mu);
  remove_stale_temporaries(fs, save_path, checkpoint_, state_file_, sweep);
  live_saves().checkpoints.insert(checkpoint_);
  if (!state_file_.empty()) live_saves().state_files.insert(state_file_);
}

LiveSave::~LiveSave() {
  std::lock_guard lock(live_saves().mu);
  live_saves().checkpoints.erase(live_saves().checkpoints.find(checkpoint_));
  if (!state_file_.empty()) {
    live_saves().state_files.erase(live_saves().state_files.find(state_file_));
  }
}

}  // namespace varstate::internal
