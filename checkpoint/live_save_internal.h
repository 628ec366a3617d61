// Saves in flight in this process, and the sweep of what interrupted saves
// left behind. Internal: shared by Saver and DistributedSaver.
#pragma once

#include <string>

namespace varstate {

class FileSystem;

namespace internal {

// Registers one save of `checkpoint` (a prefix) for its lifetime, after
// removing what interrupted saves of `save_path` left in its directory:
// "<checkpoint>_temp_<hex>" folders, "<checkpoint>.*.tempstate<n>" files,
// data shards whose index is gone and "<state_file>.tempstate<n>", for
// checkpoints no registered save owns (so that no save in this process
// takes another's temporary files for leftovers). Best effort: failures
// are logged.
class LiveSave {
 public:
  LiveSave(FileSystem& fs, const std::string& save_path, std::string checkpoint,
           std::string state_file);
  ~LiveSave();
  LiveSave(const LiveSave&) = delete;
  LiveSave& operator=(const LiveSave&) = delete;

 private:
  std::string checkpoint_;
  std::string state_file_;
};

}  // namespace internal
}  // namespace varstate
