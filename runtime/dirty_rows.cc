#include "runtime/dirty_rows_internal.h"

#include <algorithm>
#include <vector>

#include "varstate/device_manager.h"

namespace varstate::internal {
namespace {

DirtyRows::Marks fresh_marks(int64_t rows) {
  DirtyRows::Marks m(new std::atomic<uint8_t>[static_cast<size_t>(std::max<int64_t>(rows, 1))]);
  for (int64_t i = 0; i < rows; ++i) m[i].store(0, std::memory_order_relaxed);
  return m;
}

}  // namespace

DirtyRows::~DirtyRows() {
  if (device_bits_ != nullptr) device_->deallocate(device_bits_);
}

void DirtyRows::resize(int64_t rows) {
  if (rows == rows_ && bits_) return;
  bits_ = fresh_marks(rows);
  rows_ = rows;
  all_ = true;
  if (device_bits_ != nullptr) {
    device_->deallocate(device_bits_);  // stream-ordered: kernels using it finish first
    device_bits_ = nullptr;
  }
}

DirtyRows::Marks DirtyRows::marks(int64_t rows) {
  std::lock_guard lock(mu_);
  if (!tracking_) return nullptr;  // the first take reports every row dirty
  resize(rows);
  return bits_;
}

uint8_t* DirtyRows::device_marks(Device& device, int64_t rows) {
  std::lock_guard lock(mu_);
  resize(rows);
  if (device_bits_ != nullptr && device_ != &device) {
    device_->deallocate(device_bits_);
    device_bits_ = nullptr;
    all_ = true;  // moved to another device: its marks are gone
  }
  if (device_bits_ == nullptr) {
    device_ = &device;
    device_bits_ = device.allocate(static_cast<size_t>(std::max<int64_t>(rows, 1)));
    device.memset(device_bits_, 0, static_cast<size_t>(std::max<int64_t>(rows, 1)));
  }
  return static_cast<uint8_t*>(device_bits_);
}

void DirtyRows::collect_device_marks() {
  if (device_bits_ == nullptr || rows_ <= 0) return;
  std::vector<uint8_t> host(static_cast<size_t>(rows_));
  // Ordered after the scatters enqueued so far; the clear right after them.
  copy_bytes(DeviceManager::instance().cpu(), host.data(), *device_, device_bits_, host.size());
  device_->memset(device_bits_, 0, host.size());
  for (int64_t r = 0; r < rows_; ++r) {
    if (host[static_cast<size_t>(r)] != 0) bits_[r].store(1, std::memory_order_relaxed);
  }
}

void DirtyRows::mark_all() {
  std::lock_guard lock(mu_);
  all_ = true;
}

void DirtyRows::mark_range(int64_t rows, int64_t begin, int64_t end) {
  Marks m = marks(rows);
  if (!m) return;
  for (int64_t r = std::max<int64_t>(begin, 0); r < std::min(end, rows); ++r) {
    m[r].store(1, std::memory_order_relaxed);
  }
}

DirtyRows::Taken DirtyRows::take(int64_t rows, uint64_t generation) {
  std::lock_guard lock(mu_);
  Taken t;
  const bool was_tracking = tracking_;
  t.all = !was_tracking || all_ || rows != rows_ || !bits_ || generation != generation_;
  tracking_ = true;
  resize(rows);
  collect_device_marks();
  std::vector<int64_t> cleared;
  for (int64_t r = 0; r < rows; ++r) {
    if (bits_[r].load(std::memory_order_relaxed) == 0) continue;
    bits_[r].exchange(0, std::memory_order_acquire);
    cleared.push_back(r);
  }
  // A scatter between its marks and its write: the rows stay marked, so the
  // next take returns them again (whichever of them it was writing).
  if (writing_.load() != 0) {
    for (int64_t r : cleared) bits_[r].store(1, std::memory_order_relaxed);
  }
  if (!t.all) t.rows = std::move(cleared);
  // A write in flight that took its marks before this first take got none:
  // the next take reports every row again.
  all_ = !was_tracking && writing_.load() != 0;
  t.generation = ++generation_;
  return t;
}

}  // namespace varstate::internal
