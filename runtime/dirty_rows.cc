#include "runtime/dirty_rows.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/cpu/parallel.h"
#ifdef VARSTATE_HAVE_CUDA
#include "kernels/cuda/dirty_marks.h"
#endif
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
  retire_device_marks();
  for (const Retired& r : retired_) r.device->deallocate(r.bits);
}

void DirtyRows::retire_device_marks() {
  if (device_bits_ == nullptr) return;
  retired_.push_back({device_, device_bits_});
  device_bits_ = nullptr;
}

void DirtyRows::free_retired() {
  // A writer in flight may hold a retired buffer and not have enqueued its
  // marking kernel yet; once none is, a stream-ordered free comes after
  // every kernel that uses it.
  if (retired_.empty() || writing_.load() != 0) return;
  for (const Retired& r : retired_) r.device->deallocate(r.bits);
  retired_.clear();
}

namespace {

// -1: background folds when the pool has a second thread; else 0 or 1.
std::atomic<int> background_folds_setting{-1};

}  // namespace

bool DirtyRows::background_fold(int64_t capacity) {
  const int setting = background_folds_setting.load(std::memory_order_relaxed);
  if (setting >= 0) return setting != 0;
  return capacity >= kMinBackgroundFold && kernels::cpu::pool_threads() > 1;
}

void DirtyRows::set_background_folds_for_testing(std::optional<bool> on) {
  background_folds_setting.store(on.has_value() ? int{*on} : -1);
}

int64_t DirtyRows::log_capacity(int64_t rows) { return std::max<int64_t>(rows / 4, 4096); }

void DirtyRows::resize(int64_t rows) {
  if (rows == rows_) return;
  settle();
  bitmap().assign(static_cast<size_t>((std::max<int64_t>(rows, 0) + 63) / 64), 0);
  log_ = Log{};
  spare_ = Log{};
  logged_ = 0;
  spare_logged_ = 0;
  bytes_.reset();  // writers holding the old ones mark nothing we read: all dirty
  bytes_used_ = false;
  overflowed_ = false;
  rows_ = rows;
  all_ = true;
  retire_device_marks();
}

bool DirtyRows::tracking() {
  std::lock_guard lock(mu_);
  return tracking_;
}

uint64_t DirtyRows::folds() {
  std::lock_guard lock(mu_);
  return folds_;
}

DirtyRows::Marks DirtyRows::marks(int64_t rows) {
  std::lock_guard lock(mu_);
  return hand_out_marks(rows);
}

DirtyRows::Marks DirtyRows::hand_out_marks(int64_t rows) {
  if (!tracking_) return nullptr;  // the first take reports every row dirty
  resize(rows);
  if (!bytes_) bytes_ = fresh_marks(rows);
  bytes_used_ = true;
  return bytes_;
}

DirtyRows::Marks DirtyRows::marks_if_overflowed(int64_t rows, int64_t row_bytes) {
  std::lock_guard lock(mu_);
  if (!overflowed_ || rows != rows_ || row_bytes >= kLoggedRowBytes) return nullptr;
  return hand_out_marks(rows);
}

uint8_t* DirtyRows::device_marks(Device& device, int64_t rows) {
  std::lock_guard lock(mu_);
  free_retired();
  if (!tracking_) return nullptr;  // the first take reports every row dirty
  resize(rows);
  if (device_bits_ != nullptr && device_ != &device) {
    retire_device_marks();
    all_ = true;  // moved to another device: its marks are gone
  }
  if (device_bits_ == nullptr) {
    device_ = &device;
    device_bits_ = device.allocate(static_cast<size_t>(std::max<int64_t>(rows, 1)));
    device.memset(device_bits_, 0, static_cast<size_t>(std::max<int64_t>(rows, 1)));
  }
  return static_cast<uint8_t*>(device_bits_);
}

namespace {

// Sets the bits of rows log[0, n): random read-modify-writes of the bitmap,
// four at a time so that their misses overlap.
template <typename Row>
void set_bits(uint64_t* bitmap, const Row* log, int64_t n) {
  auto set = [bitmap](Row r) { bitmap[r >> 6] |= uint64_t{1} << (r & 63); };
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const Row r0 = log[i], r1 = log[i + 1], r2 = log[i + 2], r3 = log[i + 3];
    set(r0), set(r1), set(r2), set(r3);
  }
  for (; i < n; ++i) set(log[i]);
}

// out[i] = rows[i] (all below 2^32) for i < n. On x86 the stores bypass the
// caches (a take reads the log, long after): a scatter's next call then
// finds its indices and updates still cached.
template <typename Index>
void copy_narrow(uint32_t* out, const Index* rows, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  for (; i < n && reinterpret_cast<uintptr_t>(out + i) % 16 != 0; ++i) {
    out[i] = static_cast<uint32_t>(rows[i]);
  }
  for (; i + 4 <= n; i += 4) {
    __m128i four;
    if constexpr (sizeof(Index) == 8) {
      const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows + i));
      const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows + i + 2));
      four = _mm_unpacklo_epi64(_mm_shuffle_epi32(lo, _MM_SHUFFLE(2, 0, 2, 0)),
                                _mm_shuffle_epi32(hi, _MM_SHUFFLE(2, 0, 2, 0)));
    } else {
      four = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows + i));
    }
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + i), four);
  }
  _mm_sfence();  // the streamed stores are seen before the mutex is released
#endif
  for (; i < n; ++i) out[i] = static_cast<uint32_t>(rows[i]);
}

}  // namespace

void DirtyRows::Log::set_bits_of(uint64_t* bitmap, int64_t n) const {
  if (narrow) {
    set_bits(bitmap, narrow.get(), n);
  } else if (wide) {
    set_bits(bitmap, wide.get(), n);
  }
}

void DirtyRows::settle() {
  if (!folding_) return;
  folding_->finish();
  folding_.reset();
  spare_logged_ = 0;
}

void DirtyRows::fold_spare(void* self) {
  auto& rows = *static_cast<DirtyRows*>(self);
  rows.spare_.set_bits_of(rows.bitmap_.data(), rows.spare_logged_);
}

void DirtyRows::fold() {
  settle();
  if (logged_ == 0) return;
  log_.set_bits_of(bitmap().data(), logged_);
  logged_ = 0;
  ++folds_;
}

// Copies the ids into the log. A log they would overflow is first handed
// to a pool thread to fold, and the spare log (folded by then) takes its
// place. Without a second pool thread, for a log too short to pay for the
// hand-off, or for a call larger than the whole log (whose bits are then
// set here, directly), it is folded here, and narrow rows are marked by the
// kernel until the next take.
template <typename Index>
void DirtyRows::append(const Index* indices, int64_t n) {
  const int64_t capacity = log_capacity(rows_);
  if (logged_ + n > capacity) {
    if (n <= capacity && background_fold(capacity)) {
      settle();  // the previous fold: the spare log and the bitmap are ours again
      std::swap(log_, spare_);
      spare_logged_ = logged_;
      logged_ = 0;
      folding_.emplace(&DirtyRows::fold_spare, this);
      ++folds_;
    } else {
      fold();
      overflowed_ = true;  // CPU scatters mark in their kernel until the next take
    }
  }
  if (n > capacity) {
    set_bits(bitmap().data(), indices, n);
    return;
  }
  if (rows_ < narrow_rows_) {
    if (!log_.narrow) log_.narrow.reset(new uint32_t[static_cast<size_t>(capacity)]);
    copy_narrow(log_.narrow.get() + logged_, indices, n);
  } else {
    if (!log_.wide) log_.wide.reset(new int64_t[static_cast<size_t>(capacity)]);
    int64_t* out = log_.wide.get() + logged_;
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(indices[i]);
  }
  logged_ += n;
}

void DirtyRows::record(int64_t rows, const Tensor& indices) {
  const int64_t n = indices.num_elements();
  if (indices.dtype() == DType::kInt32) {
    record_ids(rows, static_cast<const int32_t*>(indices.raw_data()), n);
  } else {
    record_ids(rows, static_cast<const int64_t*>(indices.raw_data()), n);
  }
}

void DirtyRows::record(int64_t rows, std::span<const int64_t> indices) {
  record_ids(rows, indices.data(), static_cast<int64_t>(indices.size()));
}

template <typename Index>
void DirtyRows::record_ids(int64_t rows, const Index* ids, int64_t n) {
  std::lock_guard lock(mu_);
  if (!tracking_ || n == 0) return;
  resize(rows);
  if (all_) return;  // the next take reports every row anyway
  append(ids, n);
}

std::shared_ptr<DirtyRows> DirtyRows::shared_group(std::span<DirtyRows* const> parts,
                                                   std::span<const int64_t> begin) {
  std::shared_ptr<DirtyRows> group;
  for (size_t k = 0; k < parts.size(); ++k) {
    std::lock_guard lock(parts[k]->mu_);
    if (k == 0) group = parts[0]->group_;
    if (!group || parts[k]->group_ != group || parts[k]->group_begin_ != begin[k] ||
        parts[k]->group_end_ != begin[k + 1]) {
      return nullptr;
    }
  }
  // Parts that tile the front of a longer variable's group are not its
  // layout.
  std::lock_guard lock(group->mu_);
  return group->rows_ == begin.back() ? group : nullptr;
}

std::shared_ptr<DirtyRows> DirtyRows::link_group(std::span<DirtyRows* const> parts,
                                                 std::span<const int64_t> begin) {
  if (std::shared_ptr<DirtyRows> shared = shared_group(parts, begin)) return shared;
  auto group = std::make_shared<DirtyRows>();
  {
    std::lock_guard lock(group->mu_);
    group->tracking_ = true;
    group->resize(begin.back());
    group->all_ = false;
  }
  for (size_t k = 0; k < parts.size(); ++k) {
    DirtyRows& part = *parts[k];
    std::lock_guard lock(part.mu_);
    part.absorb_group();  // the rows its previous group holds for it
    part.group_ = group;
    part.group_begin_ = begin[k];
    part.group_end_ = begin[k + 1];
  }
  return group;
}

bool DirtyRows::collect_marks() {
  // A writer between its marks and the end of its write: the rows stay
  // marked, so the next take returns them again (whichever of them it was
  // writing). Read before the marks: a writer that marks a row after the
  // pass below has read it, and is gone by the end of this take, must still
  // count as in flight, or its mark would be left unread.
  const bool in_flight = writing_.load() != 0;
  collect_device_marks();
  collect_byte_marks();
  if (after_collect_for_testing_) after_collect_for_testing_();
  fold();
  // bytes_ handed out before now were read above, but for a writer still in
  // flight, which may mark after: the next take reads them again.
  bytes_used_ = bytes_used_ && in_flight;
  overflowed_ = false;  // back to logging
  return in_flight;
}

template <typename RowFn>
void DirtyRows::read_marked(int64_t begin, int64_t end, bool clear, const RowFn& row_fn) {
  begin = std::max<int64_t>(begin, 0);
  end = std::min(end, rows_);
  if (begin >= end) return;
  std::vector<uint64_t>& marked = bitmap();
  for (int64_t w = begin >> 6; w < (end + 63) >> 6; ++w) {
    // The bits of word w inside [begin, end).
    uint64_t range = ~uint64_t{0};
    if (w == begin >> 6) range &= ~uint64_t{0} << (begin & 63);
    if (w == (end - 1) >> 6 && (end & 63) != 0) range &= ~uint64_t{0} >> (64 - (end & 63));
    uint64_t& word = marked[static_cast<size_t>(w)];
    for (uint64_t bits = word & range; bits != 0; bits &= bits - 1) {
      row_fn(w * 64 + std::countr_zero(bits));
    }
    if (clear) word &= ~range;
  }
}

template <typename RowFn>
void DirtyRows::take_range(int64_t begin, int64_t end, const RowFn& row_fn) {
  std::lock_guard lock(mu_);
  settle();
  const bool in_flight = collect_marks();
  read_marked(begin, end, /*clear=*/!in_flight, row_fn);
}

void DirtyRows::absorb_group() {
  if (!group_ || group_end_ - group_begin_ != rows_) return;
  const int64_t first = group_begin_;
  group_->take_range(group_begin_, group_end_, [&](int64_t r) { set_bit(r - first); });
}

void DirtyRows::collect_byte_marks() {
  if (!bytes_used_) return;
  for (int64_t r = 0; r < rows_; ++r) {
    if (bytes_[r].load(std::memory_order_relaxed) == 0) continue;
    bytes_[r].exchange(0, std::memory_order_acquire);
    set_bit(r);
  }
}

void DirtyRows::collect_device_marks() {
#ifdef VARSTATE_HAVE_CUDA
  if (device_bits_ == nullptr || rows_ <= 0) return;
  const auto n = static_cast<size_t>(rows_);
  // The marks move out and are cleared by one kernel, in the device's
  // stream order: a scatter that took device_marks() before this take but
  // enqueues its marking kernel after it leaves its marks for the next take.
  // (A copy followed by a separate clear lost the marks of a kernel
  // enqueued between the two.)
  Device& device = *device_;
  std::unique_ptr<uint8_t, std::function<void(uint8_t*)>> moved(
      static_cast<uint8_t*>(device.allocate(n)), [&device](uint8_t* p) { device.deallocate(p); });
  {
    DeviceGuard guard(device);
    kernels::cuda::take_marks(static_cast<uint8_t*>(device_bits_), moved.get(), rows_,
                              device.stream());
  }
  std::vector<uint8_t> host(n);
  copy_bytes(DeviceManager::instance().cpu(), host.data(), device, moved.get(), n);
  if (after_device_read_for_testing_) after_device_read_for_testing_();
  for (int64_t r = 0; r < rows_; ++r) {
    if (host[static_cast<size_t>(r)] != 0) set_bit(r);
  }
#endif
}

void DirtyRows::mark_all() {
  std::lock_guard lock(mu_);
  all_ = true;
}

void DirtyRows::mark_range(int64_t rows, int64_t begin, int64_t end) {
  std::lock_guard lock(mu_);
  if (!tracking_) return;
  resize(rows);
  for (int64_t r = std::max<int64_t>(begin, 0); r < std::min(end, rows); ++r) set_bit(r);
}

DirtyRows::Taken DirtyRows::take(int64_t rows, uint64_t generation) {
  std::lock_guard lock(mu_);
  Taken t;
  const bool was_tracking = tracking_;
  t.all = !was_tracking || all_ || rows != rows_ || generation != generation_;
  tracking_ = true;
  free_retired();
  resize(rows);
  settle();
  const bool in_flight = collect_marks();
  absorb_group();
  std::vector<int64_t> dirty;
  read_marked(0, rows_, /*clear=*/!in_flight, [&](int64_t r) { dirty.push_back(r); });
  if (!t.all) t.rows = std::move(dirty);
  // A write in flight that took its marks before this first take got none:
  // the next take reports every row again.
  all_ = !was_tracking && in_flight;
  t.generation = ++generation_;
  return t;
}

}  // namespace varstate::internal
