#include "runtime/scatter_check_internal.h"

#include <cstring>
#include <string>
#include <vector>

#include "runtime/deferred_check.h"
#include "varstate/error.h"
#include "varstate/scatter.h"

namespace varstate::internal {
namespace {

#ifdef VARSTATE_HAVE_CUDA
using kernels::cuda::IndexCheck;
constexpr size_t kRecordBytes = sizeof(IndexCheck);
#else
constexpr size_t kRecordBytes = 32;
#endif

// "indices", "indices[3]" or "indices[1,0]" for flat position `flat`.
std::string position_string(const char* what, int64_t flat, const TensorShape& shape) {
  if (shape.rank() == 0) return what;
  std::vector<int64_t> coords(shape.rank());
  for (int d = shape.rank() - 1; d >= 0; --d) {
    const int64_t extent = shape.dim(d);
    coords[d] = extent == 0 ? 0 : flat % extent;
    flat = extent == 0 ? 0 : flat / extent;
  }
  std::string s = std::string(what) + "[";
  for (size_t d = 0; d < coords.size(); ++d) s += (d ? "," : "") + std::to_string(coords[d]);
  return s + "]";
}

}  // namespace

std::string bad_index_message(const std::string& who, int64_t position,
                              const TensorShape& indices_shape, int64_t value, int64_t rows) {
  return who + ": " + position_string("indices", position, indices_shape) + " = " +
         std::to_string(value) + " is not in [0, " + std::to_string(rows) + ")";
}

std::string zero_divisor_message(const std::string& who, int64_t position,
                                 const TensorShape& updates_shape) {
  return who + ": " + position_string("updates", position, updates_shape) +
         " is 0 (integer division by zero)";
}

std::string check_error(const void* record, const std::string& who,
                        const TensorShape& indices_shape, const TensorShape& updates_shape,
                        int64_t rows) {
#ifdef VARSTATE_HAVE_CUDA
  IndexCheck c;
  std::memcpy(&c, record, sizeof c);
  if (c.first_bad_position == IndexCheck::kNone) return {};
  if (c.first_bad_position == IndexCheck::kZeroDivisor) {
    return zero_divisor_message(who, c.bad_index, updates_shape);
  }
  return bad_index_message(who, static_cast<int64_t>(c.first_bad_position), indices_shape,
                           c.bad_index, rows);
#else
  (void)record, (void)who, (void)indices_shape, (void)updates_shape, (void)rows;
  return {};
#endif
}

// ---------------------------------------------------------------------------
// ScatterState

ScatterState::~ScatterState() {
  try {
    std::lock_guard lock(pending_mu_);
    if (!pending_.empty()) pending_.back().event->wait_host();
  } catch (...) {
    // Tearing down: the copies target our pinned slots; nothing to report to.
  }
  if (check_ != nullptr) device_->deallocate(check_);
}

void ScatterState::raise_pending_errors(bool wait) {
  std::unique_lock lock(pending_mu_);
  collect(wait, lock);
  raise_collected();
}

#ifdef VARSTATE_HAVE_CUDA
ScatterState::Slot ScatterState::acquire(Device& device) {
  std::unique_lock lock(pending_mu_);
  if (check_ == nullptr) {
    host_ = PinnedBuffer(kRecordBytes * kMaxPendingChecks);
    check_ = static_cast<IndexCheck*>(device.allocate(sizeof(IndexCheck)));
    device_ = &device;
    for (int s = kMaxPendingChecks - 1; s >= 0; --s) free_.push_back(s);
  }
  collect(/*wait=*/false, lock);
  if (free_.empty()) collect_oldest(lock);
  raise_collected();
  const int s = free_.back();
  free_.pop_back();
  return {s, static_cast<char*>(host_.data()) + s * kRecordBytes, static_cast<IndexCheck*>(check_)};
}

void ScatterState::release(int slot) {
  std::lock_guard lock(pending_mu_);
  free_.push_back(slot);
}

void ScatterState::push(int slot, std::shared_ptr<Event> event, std::string who,
                        TensorShape indices_shape, TensorShape updates_shape, int64_t rows) {
  std::lock_guard lock(pending_mu_);
  pending_.push_back({slot, std::move(event), std::move(who), std::move(indices_shape),
                      std::move(updates_shape), rows});
}
#endif

void ScatterState::collect(bool wait, std::unique_lock<std::mutex>& lock) {
  while (!pending_.empty()) {
    if (!wait && !pending_.front().event->done()) return;
    collect_oldest(lock);
  }
}

void ScatterState::collect_oldest(std::unique_lock<std::mutex>&) {
  Pending p = std::move(pending_.front());
  pending_.pop_front();
  p.event->wait_host();
  const char* record = static_cast<const char*>(host_.data()) + p.slot * kRecordBytes;
  std::string error = check_error(record, p.who, p.indices_shape, p.updates_shape, p.rows);
  free_.push_back(p.slot);
  if (!error.empty()) errors_.push_back(std::move(error));
}

void ScatterState::raise_collected() {
  if (errors_.empty()) return;
  std::string message = errors_.front();
  if (errors_.size() > 1) {
    message += " (and " + std::to_string(errors_.size() - 1) +
               " later scatter(s) on this variable failed their device-side check too)";
  }
  message += "; found by the device-side check after the call returned, nothing was written";
  errors_.clear();
  throw InvalidArgumentError(message);
}

#ifdef VARSTATE_HAVE_CUDA
DeferredIndexCheck::DeferredIndexCheck(const Variable& var, Device& device)
    : DeferredIndexCheck(scatter_state(var), {}, device) {}

DeferredIndexCheck::DeferredIndexCheck(std::shared_ptr<ScatterState> state,
                                       std::unique_lock<std::mutex> serial, Device& device)
    : state_(std::move(state)), serial_(std::move(serial)), device_(device) {
  if (!serial_.owns_lock()) serial_ = std::unique_lock(state_->mutex());
  const ScatterState::Slot slot = state_->acquire(device);
  slot_ = slot.index;
  host_ = slot.host;
  record_ = slot.check;
}

DeferredIndexCheck::~DeferredIndexCheck() {
  if (slot_ >= 0) state_->release(slot_);
}

void DeferredIndexCheck::commit(std::string who, const TensorShape& indices_shape,
                                const TensorShape& updates_shape, int64_t rows, bool synchronous) {
  device_.copy_to_host_async(host_, record_, sizeof(IndexCheck));
  std::shared_ptr<Event> event = device_.record_event();
  state_->push(slot_, std::move(event), std::move(who), indices_shape, updates_shape, rows);
  slot_ = -1;
  serial_.unlock();
  if (synchronous) state_->raise_pending_errors(/*wait=*/true);
}
#endif

std::shared_ptr<ScatterState> scatter_state(const Variable& ref) {
  return std::static_pointer_cast<ScatterState>(
      internal::update_state(ref, [] { return std::make_shared<ScatterState>(); }));
}

// ---------------------------------------------------------------------------
// CheckRecordPool

#ifdef VARSTATE_HAVE_CUDA
CheckRecordPool& CheckRecordPool::instance() {
  // Never destroyed: records outlive static destruction, as devices do.
  static auto* pool = new CheckRecordPool;
  return *pool;
}

std::unique_ptr<CheckRecord> CheckRecordPool::take(Device& device) {
  {
    std::lock_guard lock(mu_);
    auto found = free_.find(&device);
    if (found != free_.end() && !found->second.empty()) {
      std::unique_ptr<CheckRecord> record = std::move(found->second.back());
      found->second.pop_back();
      return record;
    }
  }
  auto record = std::make_unique<CheckRecord>();
  record->host = PinnedBuffer(sizeof(IndexCheck));
  record->check = static_cast<IndexCheck*>(device.allocate(sizeof(IndexCheck)));
  record->device = &device;
  return record;
}

void CheckRecordPool::give_back(std::unique_ptr<CheckRecord> record) {
  std::lock_guard lock(mu_);
  free_[record->device].push_back(std::move(record));
}

void CheckRecordPool::discard(std::unique_ptr<CheckRecord> record) {
  record->device->deallocate(record->check);
}

std::string check_now(Device& device, const std::function<void(IndexCheck*)>& enqueue,
                      const std::string& who, const TensorShape& indices_shape,
                      const TensorShape& updates_shape, int64_t rows) {
  CheckRecordPool& pool = CheckRecordPool::instance();
  std::unique_ptr<CheckRecord> record = pool.take(device);
  try {
    enqueue(record->check);
    device.copy_to_host_async(record->host.data(), record->check, sizeof(IndexCheck));
    device.record_event()->wait_host();
  } catch (...) {
    CheckRecordPool::discard(std::move(record));
    throw;
  }
  std::string error = check_error(record->host.data(), who, indices_shape, updates_shape, rows);
  pool.give_back(std::move(record));
  return error;
}
#endif

}  // namespace varstate::internal
