#include "checkpoint/checkpoint_retention.h"

#include <algorithm>

namespace varstate::internal {

void CheckpointRetention::set_policy(int max_to_keep, double keep_every_n_hours, double now) {
  max_to_keep_ = max_to_keep;
  keep_seconds_ = keep_every_n_hours * 3600.0;
  next_keep_time_ = now + keep_seconds_;
}

void CheckpointRetention::record(const std::string& path, double time) {
  std::erase_if(last_, [&](const Entry& e) { return e.first == path; });
  last_.emplace_back(path, time);
  // A list recovered from an earlier run with a larger max_to_keep may be
  // longer than the policy allows: everything beyond it leaves at once.
  while (max_to_keep_ > 0 && static_cast<int>(last_.size()) > max_to_keep_) {
    leaving_.push_back(last_.front());
    last_.erase(last_.begin());
  }
}

std::vector<std::string> CheckpointRetention::take_deletions() {
  std::vector<std::string> out;
  for (const auto& [path, time] : leaving_) {
    if (time > next_keep_time_) {
      next_keep_time_ += keep_seconds_;
      continue;
    }
    out.push_back(path);
  }
  leaving_.clear();
  return out;
}

std::vector<std::string> CheckpointRetention::last_paths() const {
  std::vector<std::string> out;
  for (const auto& [path, time] : last_) out.push_back(path);
  return out;
}

}  // namespace varstate::internal
