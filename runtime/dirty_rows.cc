#include "runtime/dirty_rows_internal.h"

#include <algorithm>

namespace varstate::internal {
namespace {

DirtyRows::Marks fresh_marks(int64_t rows) {
  DirtyRows::Marks m(new std::atomic<uint8_t>[static_cast<size_t>(std::max<int64_t>(rows, 1))]);
  for (int64_t i = 0; i < rows; ++i) m[i].store(0, std::memory_order_relaxed);
  return m;
}

}  // namespace

DirtyRows::Marks DirtyRows::marks(int64_t rows) {
  std::lock_guard lock(mu_);
  if (rows != rows_ || !bits_) {
    bits_ = fresh_marks(rows);
    rows_ = rows;
    all_ = true;
  }
  return bits_;
}

void DirtyRows::mark_all() {
  std::lock_guard lock(mu_);
  all_ = true;
}

void DirtyRows::mark_range(int64_t rows, int64_t begin, int64_t end) {
  Marks m = marks(rows);
  for (int64_t r = std::max<int64_t>(begin, 0); r < std::min(end, rows); ++r) {
    m[r].store(1, std::memory_order_relaxed);
  }
}

DirtyRows::Taken DirtyRows::take(int64_t rows, uint64_t generation) {
  std::lock_guard lock(mu_);
  Taken t;
  t.all = all_ || rows != rows_ || !bits_ || generation != generation_;
  if (rows != rows_ || !bits_) {
    bits_ = fresh_marks(rows);
    rows_ = rows;
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      if (bits_[r].load(std::memory_order_relaxed) == 0) continue;
      bits_[r].exchange(0, std::memory_order_relaxed);
      if (!t.all) t.rows.push_back(r);
    }
  }
  all_ = false;
  t.generation = ++generation_;
  return t;
}

}  // namespace varstate::internal
