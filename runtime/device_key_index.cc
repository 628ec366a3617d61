#include "runtime/device_key_index.h"

#include <algorithm>
#include <atomic>
#include <bit>

#include "kernels/key_hash.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

#ifdef VARSTATE_HAVE_CUDA
#include "kernels/cuda/hash_index.h"
#endif

namespace varstate::internal {
namespace {

using kernels::KeyEntry;

Device& host() { return DeviceManager::instance().cpu(); }

std::atomic<int64_t> finds_on_device{0};

// The smallest array kept: 1,024 entries, 16 KiB.
constexpr int64_t kMinCapacity = 1024;

// A power of two of at least kMinCapacity with `keys` at most half of it.
int64_t capacity_for(int64_t keys) {
  return std::max(
      kMinCapacity,
      static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(2 * keys, 1)))));
}

// An int64 device buffer of `n` elements, the first `from.size()` copied
// from the host.
Tensor device_int64(Device& device, int64_t n, std::span<const int64_t> from = {}) {
  Tensor out(DType::kInt64, TensorShape({n}), device);
  if (!from.empty()) {
    copy_bytes(device, out.raw_data(), host(), from.data(), from.size_bytes());
  }
  return out;
}

#ifndef VARSTATE_HAVE_CUDA
[[noreturn]] void no_cuda() { throw InternalError("a GPU key index in a build without CUDA"); }
#endif

}  // namespace

int64_t DeviceKeyIndex::finds_for_testing() { return finds_on_device.load(); }

DeviceKeyIndex::DeviceKeyIndex(Device& device) : device_(device) {
#ifndef VARSTATE_HAVE_CUDA
  no_cuda();
#endif
}

void DeviceKeyIndex::invalidate() {
  valid_ = false;
  entries_ = Tensor();
  capacity_ = live_ = used_ = 0;
}

int64_t DeviceKeyIndex::bytes() const {
  return entries_.valid() ? static_cast<int64_t>(entries_.nbytes()) : 0;
}

void DeviceKeyIndex::rebuild(int64_t capacity) {
#ifdef VARSTATE_HAVE_CUDA
  Tensor fresh(DType::kUInt8,
               TensorShape({kernels::cuda::hash_index_entries(capacity) *
                            static_cast<int64_t>(sizeof(KeyEntry))}),
               device_);
  auto* to = static_cast<KeyEntry*>(fresh.raw_data());
  {
    DeviceGuard guard(device_);
    if (capacity_ == 0) {
      kernels::cuda::hash_index_clear(to, capacity, device_.stream());
    } else {
      kernels::cuda::hash_index_rebuild(static_cast<const KeyEntry*>(entries_.raw_data()),
                                        capacity_, to, capacity, device_.stream());
    }
  }
  entries_ = std::move(fresh);  // the old array is freed in stream order
  capacity_ = capacity;
  used_ = live_;
#else
  (void)capacity;
  no_cuda();
#endif
}

void DeviceKeyIndex::make_room(int64_t more) {
  if (capacity_ > 0 && used_ + more <= capacity_ / 4 * 3) return;
  rebuild(capacity_for(live_ + more));
}

void DeviceKeyIndex::reserve(int64_t keys) {
  if (!valid_ || keys <= capacity_ / 2) return;
  try {
    rebuild(capacity_for(keys));
  } catch (...) {
    invalidate();
    throw;
  }
}

void DeviceKeyIndex::clear() {
#ifdef VARSTATE_HAVE_CUDA
  if (capacity_ > 0) {
    DeviceGuard guard(device_);
    kernels::cuda::hash_index_clear(static_cast<KeyEntry*>(entries_.raw_data()), capacity_,
                                    device_.stream());
  }
  live_ = used_ = 0;
  valid_ = true;
#else
  no_cuda();
#endif
}

void DeviceKeyIndex::assign(std::span<const int64_t> keys, std::span<const int64_t> slots) {
  try {
    const auto n = static_cast<int64_t>(keys.size());
    // A fresh array when the one held is too small or four times too large.
    if (!valid_ || capacity_ == 0 || n > capacity_ / 2 || capacity_for(n) * 4 < capacity_) {
      entries_ = Tensor();
      capacity_ = live_ = used_ = 0;
      rebuild(capacity_for(n));  // (empty)
    } else {
      clear();
    }
    valid_ = true;
    insert_at(keys, slots);
  } catch (...) {
    invalidate();
    throw;
  }
}

void DeviceKeyIndex::insert_at(std::span<const int64_t> keys, std::span<const int64_t> slots) {
#ifdef VARSTATE_HAVE_CUDA
  const auto n = static_cast<int64_t>(keys.size());
  if (n == 0 || !valid_) return;
  try {
    make_room(n);
    Tensor staged = device_int64(device_, 2 * n, keys);
    auto* base = static_cast<int64_t*>(staged.raw_data());
    copy_bytes(device_, base + n, host(), slots.data(), slots.size_bytes());
    DeviceGuard guard(device_);
    kernels::cuda::hash_index_insert_at(static_cast<KeyEntry*>(entries_.raw_data()), capacity_,
                                        base, base + n, n, device_.stream());
  } catch (...) {
    invalidate();
    throw;
  }
  live_ += n;
  used_ += n;
#else
  (void)keys, (void)slots;
  no_cuda();
#endif
}

void DeviceKeyIndex::erase(std::span<const int64_t> keys) {
#ifdef VARSTATE_HAVE_CUDA
  const auto n = static_cast<int64_t>(keys.size());
  if (n == 0 || !valid_) return;
  try {
    // The keys, then the slots they had and the count (which nobody reads:
    // the host index knows both).
    Tensor staged = device_int64(device_, 2 * n + 1, keys);
    auto* base = static_cast<int64_t*>(staged.raw_data());
    DeviceGuard guard(device_);
    kernels::cuda::hash_index_erase(static_cast<KeyEntry*>(entries_.raw_data()), capacity_, base, n,
                                    base + n, reinterpret_cast<unsigned long long*>(base + 2 * n),
                                    device_.stream());
  } catch (...) {
    invalidate();
    throw;
  }
  live_ -= n;  // each entry left a tombstone: used_ stays
#else
  (void)keys;
  no_cuda();
#endif
}

DeviceKeyIndex::Found DeviceKeyIndex::find(std::span<const int64_t> keys, bool count_absent) const {
  return find(device_int64(device_, static_cast<int64_t>(keys.size()), keys), count_absent);
}

DeviceKeyIndex::Found DeviceKeyIndex::find(const Tensor& keys, bool count_absent) const {
  Tensor count = count_absent ? device_int64(device_, 1) : Tensor();
  return find_staged(keys,
                     count_absent ? static_cast<unsigned long long*>(count.raw_data()) : nullptr);
}

DeviceKeyIndex::Found DeviceKeyIndex::find_staged(const Tensor& keys,
                                                  unsigned long long* count) const {
  const int64_t n = keys.num_elements();
  Found out;
  out.keys = keys;
  out.slots = device_int64(device_, n);
  out.absent = count != nullptr ? 0 : -1;
  if (n == 0) return out;
#ifdef VARSTATE_HAVE_CUDA
  if (capacity_ == 0) {  // no key yet: every slot kAbsentSlot (all bits set)
    device_.memset(out.slots.raw_data(), 0xFF, static_cast<size_t>(n) * sizeof(int64_t));
    if (count != nullptr) out.absent = n;
    return out;
  }
  if (count != nullptr) device_.memset(count, 0, sizeof(*count));
  {
    DeviceGuard guard(device_);
    kernels::cuda::hash_index_find(static_cast<const KeyEntry*>(entries_.raw_data()), capacity_,
                                   static_cast<const int64_t*>(keys.raw_data()), n,
                                   static_cast<int64_t*>(out.slots.raw_data()), device_.stream(),
                                   count);
  }
  if (count != nullptr) {
    unsigned long long absent = 0;
    copy_bytes(host(), &absent, device_, count, sizeof(absent));
    out.absent = static_cast<int64_t>(absent);
  }
  finds_on_device.fetch_add(1, std::memory_order_relaxed);
#else
  (void)count;
  no_cuda();
#endif
  return out;
}

}  // namespace varstate::internal
