// Saves in flight in this process, and the sweep of what interrupted saves
// left behind. Internal: shared by Saver and DistributedSaver.
#pragma once

#include <string>

namespace varstate {

class FileSystem;

namespace internal {

// What LiveSave sweeps before a save of <checkpoint> to `save_path`.
enum class Sweep {
  // A Saver's: every checkpoint named save_path or save_path-<step> in its
  // directory, the state file's temporaries, and the deltas whose chain is
  // broken that no checkpoint the state file keeps needs.
  kSavePath,
  // A compaction's: the temporaries of <checkpoint> alone (its directory
  // may hold a training job's checkpoints, which are that job's to sweep).
  kCheckpointOnly,
};

// Registers one save of `checkpoint` (a prefix) for its lifetime, after
// removing what interrupted saves of `save_path` left in its directory:
// "<checkpoint>_temp_<hex>" folders, "<checkpoint>.*.tempstate<n>" files,
// data shards whose index is gone, "<save_path>-<step>.meta" files whose
// checkpoint is gone (a deletion cut short) and "<state_file>.tempstate<n>",
// for checkpoints no registered save owns (so that no save in this process
// takes another's temporary files for leftovers); then, with
// Sweep::kSavePath, every delta of those checkpoints with a missing link
// that the state file neither lists nor needs (kept_by_state_file), which
// no one can restore. Best effort: failures are logged.
class LiveSave {
 public:
  LiveSave(FileSystem& fs, const std::string& save_path, std::string checkpoint,
           std::string state_file, Sweep sweep = Sweep::kSavePath);
  ~LiveSave();
  LiveSave(const LiveSave&) = delete;
  LiveSave& operator=(const LiveSave&) = delete;

 private:
  std::string checkpoint_;
  std::string state_file_;
};

}  // namespace internal
}  // namespace varstate
