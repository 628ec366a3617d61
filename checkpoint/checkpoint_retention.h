// Which checkpoints a saver keeps. Internal: the save pipeline's retention
// step (checkpoint/save_pipeline.h), for Saver and DistributedSaver.
//
// TensorFlow's Saver bookkeeping (_last_checkpoints,
// _checkpoints_to_be_deleted, _next_checkpoint_time): the newest
// max_to_keep checkpoints are listed (and written to the state file); one
// that falls out of the list is deleted unless it is the first saved after
// the next keep_checkpoint_every_n_hours mark, which keeps it for good.
// Not thread-safe: the saver serializes calls.
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace varstate::internal {

class CheckpointRetention {
 public:
  // A checkpoint path and the time (seconds) it was saved.
  using Entry = std::pair<std::string, double>;

  // The newest `max_to_keep` checkpoints (all when <= 0), plus one every
  // `keep_every_n_hours` counted from `now` (none when infinite).
  void set_policy(int max_to_keep, double keep_every_n_hours, double now);

  // Lists `path`, saved at `time`, as the newest (moving it to the end if
  // listed already). With max_to_keep > 0, the oldest beyond max_to_keep
  // (several when set_last() gave a longer list) leave the list for
  // take_deletions().
  void record(const std::string& path, double time);

  // The checkpoints that left the list and are not kept by the hours rule,
  // oldest first; the caller deletes them.
  std::vector<std::string> take_deletions();

  const std::vector<Entry>& last() const { return last_; }
  std::vector<std::string> last_paths() const;
  void set_last(std::vector<Entry> last) { last_ = std::move(last); }

 private:
  int max_to_keep_ = 0;
  double keep_seconds_ = std::numeric_limits<double>::infinity();
  double next_keep_time_ = std::numeric_limits<double>::infinity();
  std::vector<Entry> last_;
  std::vector<Entry> leaving_;
};

}  // namespace varstate::internal
