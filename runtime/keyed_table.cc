#include "runtime/keyed_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <utility>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/random.h"
#include "kernels/cpu/stream_store.h"
#include "runtime/keyed_rows_gpu.h"
#include "runtime/row_gather.h"
#include "runtime/scatter_by_op.h"
#include "runtime/sharded_keyed_table.h"
#include "runtime/tensor_internal.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

namespace varstate::internal {
namespace {

using kernels::cpu::HashIndex;

// An absent key the policy did not admit (inside find_or_insert only).
constexpr int64_t kRejected = -2;

// The smallest batch a GPU table resolves on the device: below it, the
// host's probes cost less than the device's round trip (the keys' copy,
// the kernel and the wait for its count). An emulated GPU takes every batch
// there, so that CI checks the device index on every lookup.
constexpr int64_t kDeviceFindMinKeys = 1024;

Device& host() { return DeviceManager::instance().cpu(); }

// Calls fn(T{}) with T the storage type of a float dtype (the dtype list's
// floating entries).
template <typename Fn>
void dispatch_float(DType dtype, const std::string& who, Fn&& fn) {
  switch (dtype) {
#define VARSTATE_KEYED_CASE(E, T) \
  case DType::E:                  \
    return fn(T{});
    VARSTATE_DTYPES_FLOATING(VARSTATE_DTYPE_ENTRY, VARSTATE_KEYED_CASE)
#undef VARSTATE_KEYED_CASE
    default:
      throw InternalError(who + ": a keyed table of " + std::string(dtype_name(dtype)));
  }
}

int64_t row_elements(const TensorShape& row_shape) { return row_shape.num_elements(); }

TensorShape rows_shape(int64_t n, const TensorShape& row_shape) {
  return TensorShape({n}).concatenate(row_shape);
}

}  // namespace

DeviceKeyedTable::DeviceKeyedTable(std::string name, DType key_dtype, Device& device,
                                   KeyedPolicy policy, std::shared_ptr<KeyedBudget> budget)
    : KeyedTable(std::move(name), key_dtype, policy),
      device_(device),
      budget_(std::move(budget)),
      num_shards_(std::max(1, kernels::cpu::pool_threads())),
      shards_(static_cast<size_t>(num_shards_)),
      tracking_(tracking()) {
  if (!device_.is_cpu()) device_index_ = std::make_unique<DeviceKeyIndex>(device_);
}

void DeviceKeyedTable::note_size() {
  const int64_t now = live_keys();
  const int64_t before = size_.exchange(now, std::memory_order_relaxed);
  if (budget_) budget_->live.fetch_add(now - before);
}

int64_t DeviceKeyedTable::live_keys() const {
  int64_t n = 0;
  for (const auto& shard : shards_) n += shard.size();
  return n;
}

int DeviceKeyedTable::add_member(std::string op_name, DType dtype, TensorShape row_shape,
                                 KeyedRowInit init) {
  auto m = std::make_unique<Member>();
  m->op_name = std::move(op_name);
  m->dtype = dtype;
  m->row_shape = std::move(row_shape);
  m->init = std::move(init);
  std::unique_lock lock(mu_);
  m->arena = Tensor(dtype, rows_shape(capacity_, m->row_shape), device_);
  members_.push_back(std::move(m));
  const int member = static_cast<int>(members_.size()) - 1;
  lock.unlock();
  reset_member(member);
  return member;
}

DType DeviceKeyedTable::dtype(int member) const {
  std::shared_lock lock(mu_);
  return members_.at(static_cast<size_t>(member))->dtype;
}

const TensorShape& DeviceKeyedTable::row_shape(int member) const {
  std::shared_lock lock(mu_);
  return members_.at(static_cast<size_t>(member))->row_shape;
}

const std::string& DeviceKeyedTable::member_name(int member) const {
  std::shared_lock lock(mu_);
  return members_.at(static_cast<size_t>(member))->op_name;
}

uint64_t DeviceKeyedTable::version(int member) const {
  std::shared_lock lock(mu_);
  return members_.at(static_cast<size_t>(member))->version.load();
}

// ---------------------------------------------------------------------------
// Rows

Tensor DeviceKeyedTable::initial_rows(int member, std::span<const int64_t> keys) const {
  const Member& m = *members_.at(static_cast<size_t>(member));
  const int64_t n = static_cast<int64_t>(keys.size());
  const int64_t width = row_elements(m.row_shape);
  const KeyedRowInit& init = m.init;
  if (init.kind == KeyedRowInit::Kind::kConstant) {
    return Tensor::filled(m.dtype, rows_shape(n, m.row_shape), init.a, host());
  }
  Tensor out(m.dtype, rows_shape(n, m.row_shape), host());
  dispatch_float(m.dtype, m.op_name, [&](auto tag) {
    using T = decltype(tag);
    T* rows = static_cast<T*>(out.raw_data());
    const T a = init.a.scalar<T>();
    const T b = init.b.scalar<T>();
    for (int64_t i = 0; i < n; ++i) {
      // The op's stream with the key added to its counter's high words.
      const uint64_t seed2 = init.seed2 + static_cast<uint64_t>(keys[i]);
      T* row = rows + i * width;
      switch (init.kind) {
        case KeyedRowInit::Kind::kUniform:
          kernels::cpu::random_uniform<T>(row, width, 0, init.seed, seed2, a, b);
          break;
        case KeyedRowInit::Kind::kNormal:
          kernels::cpu::random_normal<T>(row, width, 0, init.seed, seed2, a, b);
          break;
        case KeyedRowInit::Kind::kTruncatedNormal:
          kernels::cpu::truncated_normal<T>(row, width, 0, init.seed, seed2, a, b);
          break;
        case KeyedRowInit::Kind::kConstant:
          break;
      }
    }
  });
  return out;
}

Tensor DeviceKeyedTable::slot_tensor(std::span<const int64_t> slots) const {
  Tensor out(DType::kInt64, {static_cast<int64_t>(slots.size())}, host());
  if (!slots.empty()) std::memcpy(out.raw_data(), slots.data(), slots.size_bytes());
  return out.on(device_);
}

bool DeviceKeyedTable::finds_on_device(int64_t n) const {
  return device_index_ && device_index_->valid() && n > 0 &&
         (device_.emulated() || n >= kDeviceFindMinKeys);
}

namespace {

// The slots found when every key is present.
std::optional<Tensor> all_present(DeviceKeyIndex::Found found, std::vector<int64_t>* host_slots,
                                  bool* absent) {
  if (absent != nullptr) *absent = found.absent > 0;
  if (found.absent > 0) return std::nullopt;
  if (host_slots != nullptr) *host_slots = found.slots.to_vector<int64_t>();
  return std::move(found.slots);
}

}  // namespace

std::optional<Tensor> DeviceKeyedTable::present_on_device(std::span<const int64_t> keys,
                                                          std::vector<int64_t>* host_slots,
                                                          bool* absent) const {
  if (absent != nullptr) *absent = false;
  if (!finds_on_device(static_cast<int64_t>(keys.size()))) return std::nullopt;
  return all_present(device_index_->find(keys), host_slots, absent);
}

std::optional<Tensor> DeviceKeyedTable::present_on_device(const Tensor& keys,
                                                          std::vector<int64_t>* host_slots,
                                                          bool* absent) const {
  if (absent != nullptr) *absent = false;
  if (keys.dtype() != DType::kInt64 || &keys.device() != &device_ ||
      !finds_on_device(keys.num_elements())) {
    return std::nullopt;
  }
  return all_present(device_index_->find(keys), host_slots, absent);
}

void DeviceKeyedTable::record_inserted(const std::vector<int64_t>& keys,
                                       const std::vector<int64_t>& slots) {
  if (!device_index_ || keys.empty()) return;
  if (index_changes_.empty() || index_changes_.back().erase) index_changes_.emplace_back();
  IndexChange& c = index_changes_.back();
  c.keys.insert(c.keys.end(), keys.begin(), keys.end());
  c.slots.insert(c.slots.end(), slots.begin(), slots.end());
}

void DeviceKeyedTable::record_erased(int64_t key) {
  if (!device_index_) return;
  if (index_changes_.empty() || !index_changes_.back().erase) {
    index_changes_.emplace_back();
    index_changes_.back().erase = true;
  }
  index_changes_.back().keys.push_back(key);
}

void DeviceKeyedTable::flush_index() noexcept {
  if (!device_index_) return;
  std::vector<IndexChange> changes = std::move(index_changes_);
  index_changes_.clear();
  const bool cleared = std::exchange(index_cleared_, false);
  try {
    if (!device_index_->valid()) {
      // Rebuilt whole from the host index.
      std::vector<int64_t> keys, slots;
      keys.reserve(static_cast<size_t>(live_keys()));
      slots.reserve(keys.capacity());
      for_each_key([&](int64_t key, int64_t slot) {
        keys.push_back(key);
        slots.push_back(slot);
      });
      device_index_->assign(keys, slots);
      return;
    }
    if (cleared) device_index_->clear();
    for (const IndexChange& c : changes) {
      if (c.erase) {
        device_index_->erase(c.keys);
      } else {
        device_index_->insert_at(c.keys, c.slots);
      }
    }
  } catch (const std::exception&) {
    // Lookups take the host's path until the next exclusive section
    // rebuilds the mirror.
    device_index_->invalidate();
  }
}

namespace {

// Copies rows of `row_bytes` bytes into an arena. A large batch (`rows`
// rows) stores around the caches: the arena rows it writes are not read
// soon, and a store that misses would first read the line it overwrites.
class RowCopier {
 public:
  RowCopier(std::byte* arena, size_t row_bytes, int64_t rows)
      : arena_(arena),
        row_bytes_(row_bytes),
        stream_(kernels::cpu::kCanStream &&
                rows * static_cast<int64_t>(row_bytes) >= kStreamBytes && row_bytes % 16 == 0 &&
                reinterpret_cast<uintptr_t>(arena) % 16 == 0) {}
  ~RowCopier() {
    if (stream_) kernels::cpu::stream_fence();  // seen before the table's lock is released
  }
  RowCopier(const RowCopier&) = delete;
  RowCopier& operator=(const RowCopier&) = delete;

  // The row at `from` into arena slot `slot`.
  void copy(int64_t slot, const std::byte* from) const {
    std::byte* to = arena_ + static_cast<size_t>(slot) * row_bytes_;
    if (stream_) {
      kernels::cpu::stream_copy(to, from, row_bytes_);
    } else {
      std::memcpy(to, from, row_bytes_);
    }
  }

 private:
  static constexpr int64_t kStreamBytes = int64_t{4} << 20;
  std::byte* const arena_;
  const size_t row_bytes_;
  const bool stream_;
};

}  // namespace

void DeviceKeyedTable::write_rows(Member& m, std::span<const int64_t> slots, const Tensor& rows) {
  if (slots.empty() || row_elements(m.row_shape) == 0) return;
  if (device_.is_cpu()) {
    const size_t row_bytes = static_cast<size_t>(row_elements(m.row_shape)) * dtype_size(m.dtype);
    const auto* src = static_cast<const std::byte*>(rows.raw_data());
    const auto n = static_cast<int64_t>(slots.size());
    const int64_t parts =
        kernels::cpu::worth_splitting(n * static_cast<int64_t>(row_bytes),
                                      kernels::cpu::parallel_thresholds().gather_bytes)
            ? kernels::cpu::pool_threads()
            : 1;
    // Split by slot, not by position: each thread reads every position and
    // writes the rows of its own slots (blocks of 16), in order, so that a
    // repeated slot keeps its last row.
    auto part = [&](int64_t t) {
      const RowCopier rows_out(static_cast<std::byte*>(m.arena.raw_data()), row_bytes, n / parts);
      for (int64_t i = 0; i < n; ++i) {
        if (parts > 1 && kernels::cpu::owner_of(slots[i], 4, parts) != t) continue;
        rows_out.copy(slots[i], src + static_cast<size_t>(i) * row_bytes);
      }
    };
    if (parts > 1) {
      kernels::cpu::run_shards(parts, part);
    } else {
      part(0);
    }
    return;
  }
  Tensor arena = m.arena;
  scatter_tensor(kernels::ScatterOp::kUpdate, arena, slot_tensor(slots), rows.on(device_), {},
                 /*indices_in_range=*/true);
}

Tensor DeviceKeyedTable::read_rows(const Member& m, std::span<const int64_t> slots) const {
  return gather_rows(m.arena, slots);
}

void DeviceKeyedTable::mark(std::span<const int64_t> slots) {
  if (!marking_) return;
  for (int64_t s : slots) marks_[static_cast<size_t>(s)].store(1, std::memory_order_relaxed);
}

void DeviceKeyedTable::reserve(int64_t rows) {
  Exclusive lock(*this);
  if (device_index_) device_index_->reserve(rows);
  const int64_t more = rows - live_keys();
  if (more <= 0) return;
  const int64_t room = static_cast<int64_t>(free_.size()) + (capacity_ - next_slot_);
  if (more > room) {
    const int64_t first_new = capacity_;
    grow_to(capacity_ + (more - room));
    if (device_.is_cpu()) {
      // Reserved memory is committed now (its pages touched), not by the
      // inserts that fill it.
      for (const auto& m : members_) {
        const size_t row_bytes =
            static_cast<size_t>(row_elements(m->row_shape)) * dtype_size(m->dtype);
        auto* base = static_cast<std::byte*>(m->arena.raw_data());
        const int64_t rows_new = capacity_ - first_new;
        kernels::cpu::for_ranges(
            rows_new, 4096, rows_new * static_cast<int64_t>(row_bytes),
            kernels::cpu::parallel_thresholds().dense_update_bytes, [&](int64_t a, int64_t b) {
              std::memset(base + static_cast<size_t>(first_new + a) * row_bytes, 0,
                          static_cast<size_t>(b - a) * row_bytes);
            });
      }
    }
  }
  // Keys spread evenly over the shards, give or take a few standard
  // deviations.
  const int64_t per_shard = rows / num_shards_;
  const auto spread = static_cast<int64_t>(4 * std::sqrt(static_cast<double>(per_shard)));
  for (auto& shard : shards_) shard.reserve(per_shard + spread + 16);
}

int64_t DeviceKeyedTable::memory_bytes() const {
  std::shared_lock lock(mu_);
  int64_t entries = 0;
  for (const auto& shard : shards_) entries += shard.capacity();
  int64_t bytes = entries * static_cast<int64_t>(sizeof(kernels::KeyEntry)) +
                  capacity_ /* marks */ + static_cast<int64_t>(free_.capacity() * sizeof(int64_t));
  for (const auto& m : members_) bytes += static_cast<int64_t>(m->arena.nbytes());
  if (device_index_) bytes += device_index_->bytes();
  return bytes;
}

// ---------------------------------------------------------------------------
// Keys

void DeviceKeyedTable::find_range(const int64_t* keys, int64_t n, int64_t* slots) const {
  // Each key hashed once: the hash picks the shard, prefetches the entry
  // kAhead keys early, and starts the probe (a ring of the hashes ahead).
  constexpr int64_t kAhead = 16;
  uint64_t ring[kAhead];
  auto start = [&](int64_t i) {
    const uint64_t h = kernels::key_hash(static_cast<uint64_t>(keys[i]));
    shards_[static_cast<size_t>(kernels::hash_shard(h, num_shards_))].prefetch_hashed(h);
    ring[i % kAhead] = h;
  };
  for (int64_t i = 0; i < std::min(kAhead, n); ++i) start(i);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h = ring[i % kAhead];
    if (i + kAhead < n) start(i + kAhead);
    slots[i] =
        shards_[static_cast<size_t>(kernels::hash_shard(h, num_shards_))].find_hashed(keys[i], h);
  }
}

void DeviceKeyedTable::find_into(std::span<const int64_t> keys, int64_t* slots) const {
  const int64_t n = static_cast<int64_t>(keys.size());
  // About one cache miss a key: large batches split over the pool.
  constexpr int64_t kKeysPerSplit = 8192;
  kernels::cpu::for_ranges(n, 1024, n, kKeysPerSplit, [&](int64_t first, int64_t last) {
    find_range(keys.data() + first, last - first, slots + first);
  });
}

std::vector<int64_t> DeviceKeyedTable::find(std::span<const int64_t> keys) const {
  std::vector<int64_t> slots(keys.size());
  find_into(keys, slots.data());
  return slots;
}

namespace {

// The slots a find_present tensor holds, for the host's bookkeeping.
std::span<const int64_t> host_slots_of(const Tensor& slots) {
  return {slots.data<int64_t>(), static_cast<size_t>(slots.num_elements())};
}

}  // namespace

std::optional<Tensor> DeviceKeyedTable::find_present(std::span<const int64_t> keys) const {
  const int64_t n = static_cast<int64_t>(keys.size());
  Tensor slots(DType::kInt64, {n}, host());
  int64_t* const s = slots.data<int64_t>();
  find_into(keys, s);
  if (std::find(s, s + n, HashIndex::kAbsent) != s + n) return std::nullopt;
  return slots;
}

void DeviceKeyedTable::reserve_rows(int64_t more) {
  const int64_t room = static_cast<int64_t>(free_.size()) + (capacity_ - next_slot_);
  if (more <= room) return;
  // Half again (a doubling would leave up to half of every arena idle),
  // or what the insert needs.
  const int64_t needed = next_slot_ - static_cast<int64_t>(free_.size()) + more;
  grow_to(std::max({capacity_ + capacity_ / 2, needed, int64_t{64}}));
}

namespace {

// A per-slot array of `capacity` entries, zero but for the `used` first
// ones copied from `old` (null: all zero). The table is held exclusively,
// so relaxed loads and stores suffice: a sequentially consistent store is
// an exchange, which made copying 1M marks one at a time a tenth of a
// growing insert's time.
template <typename T>
std::unique_ptr<std::atomic<T>[]> grown_copy(const std::unique_ptr<std::atomic<T>[]>& old,
                                             int64_t used, int64_t capacity) {
  auto grown = std::make_unique<std::atomic<T>[]>(static_cast<size_t>(capacity));
  if (old) {
    for (size_t s = 0; s < static_cast<size_t>(used); ++s) {
      grown[s].store(old[s].load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
  }
  return grown;
}

}  // namespace

void DeviceKeyedTable::grow_to(int64_t capacity) {
  // Every arena first, then the bookkeeping: a failed allocation leaves
  // the table as it was (an arena grown in place already holds the same
  // rows, only more room). An arena the device can remap grows in place
  // (Device::grow: large CPU arenas), the others by a copy into a new one.
  std::vector<Tensor> arenas(members_.size());
  for (size_t k = 0; k < members_.size(); ++k) {
    Member& m = *members_[k];
    if (m.arena.shape().dim(0) >= capacity) continue;
    if (internal::grow_rows_in_place(m.arena, capacity)) continue;
    Tensor grown(m.dtype, rows_shape(capacity, m.row_shape), device_);
    // The rows in use are a prefix of the arena.
    const size_t used = static_cast<size_t>(next_slot_) *
                        static_cast<size_t>(row_elements(m.row_shape)) * dtype_size(m.dtype);
    if (used > 0) copy_bytes(device_, grown.raw_data(), device_, m.arena.raw_data(), used);
    arenas[k] = std::move(grown);
  }
  auto marks = grown_copy(marks_, capacity_, capacity);
  if (tracking_) {
    auto last = grown_copy(last_step_, capacity_, capacity);
    auto updates = grown_copy(updates_, capacity_, capacity);
    last_step_ = std::move(last);
    updates_ = std::move(updates);
  }
  for (size_t k = 0; k < members_.size(); ++k) {
    if (arenas[k].valid()) members_[k]->arena = std::move(arenas[k]);
  }
  marks_ = std::move(marks);
  capacity_ = capacity;
}

void DeviceKeyedTable::touch(std::span<const int64_t> slots) {
  if (!tracking_) return;
  const int64_t now = clock_.load(std::memory_order_relaxed);
  for (int64_t s : slots) {
    const auto i = static_cast<size_t>(s);
    last_step_[i].store(now, std::memory_order_relaxed);
    // A plain increment, not a locked one: two threads updating one key at
    // once may count it once (as their row updates race too).
    updates_[i].store(updates_[i].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
}

void DeviceKeyedTable::erase_slot(int64_t key, int64_t slot) {
  shard_of(key).erase(key);
  free_.push_back(slot);
  record_erased(key);
  if (marking_) {
    marks_[static_cast<size_t>(slot)].store(0, std::memory_order_relaxed);
    erased_.push_back(key);
    // Churn between two saves may erase the same keys again and again: the
    // list is made distinct each time it doubles.
    if (erased_.size() >= erased_limit_) {
      std::sort(erased_.begin(), erased_.end());
      erased_.erase(std::unique(erased_.begin(), erased_.end()), erased_.end());
      erased_limit_ = std::max(kMinErasedLimit, 2 * erased_.size());
    }
  }
}

void DeviceKeyedTable::admit(std::span<const int64_t> keys, std::vector<int64_t>& slots,
                             bool admit) {
  const bool counting = admit && policy().admit_after > 1;
  const bool capped = policy().max_rows > 0;
  if (!counting && !capped) return;
  // Each absent key's sightings in this batch, in first-appearance order.
  std::unordered_map<int64_t, int64_t> seen;
  std::vector<int64_t> order;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] != HashIndex::kAbsent) continue;
    if (seen[keys[i]]++ == 0) order.push_back(keys[i]);
  }
  std::unordered_map<int64_t, bool> admitted;
  int64_t new_keys = 0;
  for (int64_t key : order) {
    int64_t before = 0;
    if (counting) {
      const auto it = candidates_.find(key);
      if (it != candidates_.end()) before = it->second.first;
    }
    const bool yes = !counting || before + seen[key] >= policy().admit_after;
    admitted[key] = yes;
    new_keys += yes ? 1 : 0;
  }
  if (capped) {
    // The keys held against the cap: this table's, or with a shared
    // budget every shard's (the caller holds the budget's lock).
    const int64_t own = live_keys();
    const int64_t live = budget_ ? budget_->live.load() : own;
    const int64_t over = live + new_keys - policy().max_rows;
    if (over > 0) {
      // Keys of this batch stay; the others may make room.
      std::vector<uint8_t> in_batch(static_cast<size_t>(capacity_), 0);
      int64_t batch_live = 0;
      for (int64_t slot : slots) {
        if (slot >= 0 && in_batch[static_cast<size_t>(slot)] == 0) {
          in_batch[static_cast<size_t>(slot)] = 1;
          ++batch_live;
        }
      }
      const int64_t evictable = own - batch_live;
      if (policy().evict == KeyedPolicy::Evict::kNone || over > evictable) {
        throw ResourceExhaustedError(
            quoted(name()) + ": " + std::to_string(new_keys) +
            " new keys do not fit under max_rows " + std::to_string(policy().max_rows) +
            " (the table holds " + std::to_string(live) + " keys" +
            (budget_ ? ", " + std::to_string(own) + " of them in this shard" : "") +
            (policy().evict == KeyedPolicy::Evict::kNone
                 ? "; eviction is off)"
                 : "; only " + std::to_string(evictable) + " of them are outside this batch" +
                       (budget_ ? " in this shard)" : ")")) +
            "; nothing was inserted");
      }
      for (const Victim& v : victims(in_batch, over)) erase_slot(v.key, v.slot);
      note_size();
      for (const auto& m : members_) m->version.fetch_add(1);
    }
  }
  if (counting) {
    const int64_t now = clock_.load(std::memory_order_relaxed);
    for (int64_t key : order) {
      if (admitted[key]) {
        candidates_.erase(key);
      } else {
        auto& c = candidates_[key];
        c.first += seen[key];
        c.second = now;
      }
    }
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] == HashIndex::kAbsent && !admitted[keys[i]]) slots[i] = kRejected;
    }
  }
}

int64_t DeviceKeyedTable::count_new(std::span<const int64_t> keys, bool admit) const {
  std::shared_lock lock(mu_);
  const std::vector<int64_t> slots = find(keys);
  std::unordered_map<int64_t, int64_t> seen;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] == HashIndex::kAbsent) ++seen[keys[i]];
  }
  if (!admit || policy().admit_after <= 1) return static_cast<int64_t>(seen.size());
  int64_t n = 0;
  for (const auto& [key, count] : seen) {
    const auto it = candidates_.find(key);
    const int64_t before = it == candidates_.end() ? 0 : it->second.first;
    n += before + count >= policy().admit_after ? 1 : 0;
  }
  return n;
}

std::vector<DeviceKeyedTable::Victim> DeviceKeyedTable::victims(
    const std::vector<uint8_t>& in_batch, int64_t n) const {
  const bool lru = policy().evict == KeyedPolicy::Evict::kLeastRecentlyUpdated;
  const auto& metric = lru ? last_step_ : updates_;
  std::vector<Victim> pool;
  for_each_key([&](int64_t key, int64_t slot) {
    if (in_batch[static_cast<size_t>(slot)] == 0) {
      pool.push_back({metric[static_cast<size_t>(slot)].load(), key, slot});
    }
  });
  const auto keep = std::min<size_t>(pool.size(), static_cast<size_t>(std::max<int64_t>(n, 0)));
  auto before = [](const Victim& a, const Victim& b) {
    return a.metric != b.metric ? a.metric < b.metric : a.key < b.key;
  };
  std::nth_element(pool.begin(), pool.begin() + static_cast<ptrdiff_t>(keep), pool.end(), before);
  pool.resize(keep);
  return pool;
}

std::vector<std::pair<int64_t, int64_t>> DeviceKeyedTable::eviction_candidates(
    std::span<const int64_t> keys, int64_t n) const {
  std::shared_lock lock(mu_);
  if (n <= 0 || !tracking_) return {};
  std::vector<uint8_t> in_batch(static_cast<size_t>(capacity_), 0);
  for (int64_t slot : find(keys)) {
    if (slot >= 0) in_batch[static_cast<size_t>(slot)] = 1;
  }
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const Victim& v : victims(in_batch, n)) out.emplace_back(v.metric, v.key);
  return out;
}

int64_t DeviceKeyedTable::expire() {
  if (policy().expire_after <= 0) return 0;
  Exclusive lock(*this);
  const int64_t now = clock_.load(std::memory_order_relaxed);
  std::vector<std::pair<int64_t, int64_t>> stale;
  for_each_key([&](int64_t key, int64_t slot) {
    if (now - last_step_[static_cast<size_t>(slot)].load() >= policy().expire_after) {
      stale.emplace_back(key, slot);
    }
  });
  for (const auto& [key, slot] : stale) erase_slot(key, slot);
  for (auto it = candidates_.begin(); it != candidates_.end();) {
    it = now - it->second.second >= policy().expire_after ? candidates_.erase(it) : std::next(it);
  }
  if (!stale.empty()) {
    note_size();
    for (const auto& m : members_) m->version.fetch_add(1);
  }
  return static_cast<int64_t>(stale.size());
}

void DeviceKeyedTable::init_rows(Member& m, int member, std::span<const int64_t> keys,
                                 std::span<const int64_t> slots, StagedKeys& staged) {
  if (slots.empty() || row_elements(m.row_shape) == 0) return;
  if (device_.is_cpu()) {
    write_rows(m, slots, initial_rows(member, keys));
    return;
  }
  // On a GPU its kernels draw the rows where they go.
  if (!staged.slots.valid()) {
    staged.keys = slot_tensor(keys);
    staged.slots = slot_tensor(slots);
  }
  write_initial_rows(m.arena, m.init, staged.keys, staged.slots);
}

void DeviceKeyedTable::fill_rows(Member& m, std::span<const int64_t> slots) {
  const size_t value_bytes = dtype_size(m.dtype);
  const size_t row_bytes = static_cast<size_t>(row_elements(m.row_shape)) * value_bytes;
  if (row_bytes == 0) return;
  const Tensor value = m.init.a.to_host();
  // One row of the constant, copied to every slot.
  std::vector<std::byte> row(row_bytes);
  for (size_t off = 0; off < row_bytes; off += value_bytes) {
    std::memcpy(row.data() + off, value.raw_data(), value_bytes);
  }
  auto* arena = static_cast<std::byte*>(m.arena.raw_data());
  for (int64_t slot : slots) {
    std::memcpy(arena + static_cast<size_t>(slot) * row_bytes, row.data(), row_bytes);
  }
}

std::vector<int64_t> DeviceKeyedTable::find_or_insert(std::span<const int64_t> keys, int skip_init,
                                                      bool admit_keys,
                                                      const ShardRowsFn* rows_of_shard,
                                                      bool* rows_written) {
  if (rows_written != nullptr) *rows_written = false;
  const int64_t n = static_cast<int64_t>(keys.size());
  // Without a policy to consult, every key goes straight to its shard's
  // insert, which leaves a present key's slot as it is and hands the free
  // slots to the absent ones: one probe a key. A policy needs to know the
  // absent keys first, and so does a table without a free row for every
  // key (it would grow for keys it holds).
  const bool policy_applies = (admit_keys && policy().admit_after > 1) || policy().max_rows > 0;
  const int64_t room = static_cast<int64_t>(free_.size()) + (capacity_ - next_slot_);
  std::vector<int64_t> slots;
  std::unique_lock<std::mutex> budget_lock;
  const bool every_key_routed = !(policy_applies || room < n);
  if (!every_key_routed) {
    slots = find(keys);
    if (std::find(slots.begin(), slots.end(), HashIndex::kAbsent) == slots.end()) return slots;
    // A shared cap is checked and the new keys counted in it under its
    // lock: two shards inserting at once cannot both pass it.
    if (budget_ && policy().max_rows > 0) budget_lock = std::unique_lock(budget_->mu);
    admit(keys, slots, admit_keys);
  } else {
    slots.assign(keys.size(), HashIndex::kAbsent);
  }
  const int64_t absent = std::count(slots.begin(), slots.end(), HashIndex::kAbsent);
  if (absent == 0) {
    std::replace(slots.begin(), slots.end(), kRejected, HashIndex::kAbsent);
    return slots;
  }
  reserve_rows(absent);
  // Each shard's share of the batch, handled on a pool thread of its own
  // when the batch is large: its absent keys and their positions in `keys`
  // in order, its candidate slots, and then its new keys with the slots
  // they took.
  const size_t num_shards = shards_.size();
  // Everything the shards' threads fill is allocated here, on the calling
  // thread: a task on the pool must not throw.
  struct ShardBatch {
    std::unique_ptr<int64_t[]> keys, positions;  // `count` of each
    int64_t count = 0;
    std::vector<int64_t> candidates;
    std::vector<int64_t> got;  // the slots of `keys`
    std::vector<int64_t> new_keys, new_slots;
  };
  std::vector<ShardBatch> batch(num_shards);
  for (ShardBatch& b : batch) {
    b.keys.reset(new int64_t[static_cast<size_t>(n)]);
    b.positions.reset(new int64_t[static_cast<size_t>(n)]);
  }
  constexpr int64_t kKeysPerShardThread = 4096;
  auto per_shard = [&](auto&& fn) {
    if (num_shards > 1 && absent >= kKeysPerShardThread) {
      kernels::cpu::run_shards(static_cast<int64_t>(num_shards), fn);
    } else {
      for (size_t s = 0; s < num_shards; ++s) fn(static_cast<int64_t>(s));
    }
  };
  // 1. Every shard reads every key and keeps its own absent ones (written
  //    without a branch: the next entry is overwritten unless it was one).
  auto route = [&](int64_t s) {
    ShardBatch& b = batch[static_cast<size_t>(s)];
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) {
      // (Without a policy every key is routed: no need to read its slot.)
      const bool mine =
          (every_key_routed || slots[static_cast<size_t>(i)] == HashIndex::kAbsent) &&
          (num_shards == 1 || kernels::key_shard(static_cast<uint64_t>(keys[i]), num_shards_) == s);
      b.keys[static_cast<size_t>(count)] = keys[i];
      b.positions[static_cast<size_t>(count)] = i;
      count += mine ? 1 : 0;
    }
    b.count = count;
  };
  per_shard(route);
  // The shards' rebuilt key arrays, where their inserts need them: the
  // allocations here (no key or row has changed yet if one fails), the
  // rebuilds on the shards' threads (step 3).
  std::vector<kernels::cpu::HashIndex::Room> rooms(num_shards);
  for (size_t s = 0; s < num_shards; ++s) rooms[s] = shards_[s].room_for_insert(batch[s].count);
  // 2. Each shard's candidate slots (freed ones first, then fresh ones); a
  //    shard hands them to its new keys in the order they first appear.
  for (ShardBatch& b : batch) {
    std::vector<int64_t>& c = b.candidates;
    c.resize(static_cast<size_t>(b.count));
    const size_t reused = std::min(c.size(), free_.size());
    std::copy(free_.end() - static_cast<ptrdiff_t>(reused), free_.end(), c.begin());
    free_.resize(free_.size() - reused);
    std::iota(c.begin() + static_cast<ptrdiff_t>(reused), c.end(), next_slot_);
    next_slot_ += static_cast<int64_t>(c.size() - reused);
    b.got.resize(c.size());
    b.new_keys.reserve(c.size());
    b.new_slots.reserve(c.size());
  }
  // 3. Each shard inserts its keys, writes their slots into `slots` (at
  //    positions no other shard has) and lists its new keys with their
  //    slots: its used candidates are a prefix (fewer than its keys when a
  //    new key repeats), matched with the keys that took them in order.
  auto insert = [&](int64_t s) {
    ShardBatch& b = batch[static_cast<size_t>(s)];
    const int64_t m = b.count;
    if (m == 0) return;
    shards_[static_cast<size_t>(s)].take(std::move(rooms[static_cast<size_t>(s)]));
    std::vector<int64_t>& got = b.got;
    const int64_t used =
        shards_[static_cast<size_t>(s)].insert(b.keys.get(), m, b.candidates.data(), got.data());
    b.new_keys.resize(static_cast<size_t>(used));
    b.new_slots.assign(b.candidates.begin(), b.candidates.begin() + used);
    for (int64_t i = 0, j = 0; i < m && j < used; ++i) {
      if (got[static_cast<size_t>(i)] == b.candidates[static_cast<size_t>(j)]) {
        b.new_keys[static_cast<size_t>(j++)] = b.keys[static_cast<size_t>(i)];
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      slots[static_cast<size_t>(b.positions[static_cast<size_t>(i)])] = got[static_cast<size_t>(i)];
    }
    if (every_key_routed && rows_of_shard != nullptr) {
      (*rows_of_shard)(b.positions.get(), got.data(), m);
    }
  };
  per_shard(insert);
  for (ShardBatch& b : batch) {
    free_.insert(free_.end(), b.candidates.begin() + static_cast<ptrdiff_t>(b.new_slots.size()),
                 b.candidates.end());
    record_inserted(b.new_keys, b.new_slots);
  }
  // The new rows of the members, the marks and the update history, shard
  // by shard; the new keys in one list only for initial rows that depend
  // on the key.
  std::vector<int64_t> new_keys;
  std::vector<int64_t> new_slots;
  StagedKeys staged;
  for (size_t k = 0; k < members_.size(); ++k) {
    if (static_cast<int>(k) == skip_init) continue;
    Member& m = *members_[k];
    if (m.init.kind == KeyedRowInit::Kind::kConstant && device_.is_cpu()) {
      for (const ShardBatch& b : batch) fill_rows(m, b.new_slots);
      continue;
    }
    if (new_slots.empty()) {
      for (const ShardBatch& b : batch) {
        new_keys.insert(new_keys.end(), b.new_keys.begin(), b.new_keys.end());
        new_slots.insert(new_slots.end(), b.new_slots.begin(), b.new_slots.end());
      }
    }
    init_rows(m, static_cast<int>(k), new_keys, new_slots, staged);
  }
  const int64_t now = clock_.load(std::memory_order_relaxed);
  for (const ShardBatch& b : batch) {
    mark(b.new_slots);
    if (!tracking_) continue;
    for (int64_t slot : b.new_slots) {
      last_step_[static_cast<size_t>(slot)].store(now, std::memory_order_relaxed);
      updates_[static_cast<size_t>(slot)].store(0, std::memory_order_relaxed);
    }
  }
  note_size();
  if (rows_written != nullptr) *rows_written = every_key_routed && rows_of_shard != nullptr;
  // (Only a policy marks keys kRejected.)
  if (!every_key_routed) std::replace(slots.begin(), slots.end(), kRejected, HashIndex::kAbsent);
  return slots;
}

// ---------------------------------------------------------------------------
// Operations

bool DeviceKeyedTable::gather_present(const Member& m, std::span<const int64_t> keys,
                                      Tensor& out) const {
  // One pipelined pass per range, three stages a key apart: key i+D1+D2 is
  // hashed and its index entry prefetched, key i+D2 probed (its entry has
  // arrived) and its row prefetched, row i copied (it has arrived). Every
  // miss is in flight while earlier keys are served; no slot list is built.
  constexpr int64_t kEntryAhead = 32;  // D1: keys between the prefetch and the probe
  constexpr int64_t kRowAhead = 12;    // D2: keys between the probe and the copy
  constexpr int64_t kRing = 64;        // > D1 and > D2, a power of two
  static_assert(kRing > kEntryAhead && kRing > kRowAhead && (kRing & (kRing - 1)) == 0);
  const int64_t n = static_cast<int64_t>(keys.size());
  const size_t row_bytes = static_cast<size_t>(row_elements(m.row_shape)) * dtype_size(m.dtype);
  // Rows up to 1 KiB prefetched whole; wider ones stream from their start.
  const size_t prefetched = std::min<size_t>(row_bytes, 1024);
  const auto* arena = static_cast<const std::byte*>(m.arena.raw_data());
  auto* dst = static_cast<std::byte*>(out.raw_data());
  std::atomic<bool> absent{false};
  kernels::cpu::for_ranges(
      n, 64, n * static_cast<int64_t>(row_bytes),
      kernels::cpu::parallel_thresholds().gather_bytes / 4, [&](int64_t first, int64_t last) {
        uint64_t hashes[kRing];
        int64_t slots[kRing];
        const int64_t count = last - first;
        const int64_t* k = keys.data() + first;
        for (int64_t i = 0; i < count + kEntryAhead + kRowAhead; ++i) {
          if (i < count) {
            const uint64_t h = kernels::key_hash(static_cast<uint64_t>(k[i]));
            shards_[static_cast<size_t>(kernels::hash_shard(h, num_shards_))].prefetch_hashed(h);
            hashes[i & (kRing - 1)] = h;
          }
          const int64_t probe = i - kEntryAhead;
          if (probe >= 0 && probe < count) {
            const uint64_t h = hashes[probe & (kRing - 1)];
            const int64_t slot =
                shards_[static_cast<size_t>(kernels::hash_shard(h, num_shards_))].find_hashed(
                    k[probe], h);
            if (slot == HashIndex::kAbsent) {
              absent.store(true, std::memory_order_relaxed);
              return;
            }
            slots[probe & (kRing - 1)] = slot;
            const std::byte* row = arena + static_cast<size_t>(slot) * row_bytes;
            for (size_t b = 0; b < prefetched; b += 64) __builtin_prefetch(row + b);
          }
          const int64_t copy = probe - kRowAhead;
          if (copy >= 0 && copy < count) {
            std::memcpy(dst + static_cast<size_t>(first + copy) * row_bytes,
                        arena + static_cast<size_t>(slots[copy & (kRing - 1)]) * row_bytes,
                        row_bytes);
          }
        }
      });
  return !absent.load();
}

Tensor DeviceKeyedTable::compose_on_device(const Member& m, const Tensor& keys, const Tensor& slots,
                                           const Tensor& absent_row) const {
  Tensor fill;
  if (absent_row.valid()) {  // a scalar repeats; a row is taken whole
    const Tensor row = absent_row.to_host();
    fill = (row.rank() == 0 ? Tensor::filled(m.dtype, m.row_shape, row, host())
                            : row.reshaped(m.row_shape))
               .on(device_);
  }
  Tensor out = gather_slots(m.arena, slots, fill);
  if (!fill.valid()) write_initial_rows_where_absent(out, m.init, keys, slots);
  return out;
}

Tensor DeviceKeyedTable::compose_rows(const Member& m, int member, std::span<const int64_t> keys,
                                      const std::vector<int64_t>& slots,
                                      const Tensor& absent_row) const {
  const int64_t n = static_cast<int64_t>(keys.size());
  if (!device_.is_cpu())
    return compose_on_device(m, slot_tensor(keys), slot_tensor(slots), absent_row);
  std::vector<int64_t> present_slots;
  std::vector<int64_t> absent_keys;
  for (int64_t i = 0; i < n; ++i) {
    if (slots[static_cast<size_t>(i)] == HashIndex::kAbsent) {
      absent_keys.push_back(keys[i]);
    } else {
      present_slots.push_back(slots[static_cast<size_t>(i)]);
    }
  }
  const Tensor present = read_rows(m, present_slots).to_host();
  const Tensor made = absent_row.valid() ? Tensor() : initial_rows(member, absent_keys);
  const Tensor fill = absent_row.valid() ? absent_row.to_host() : Tensor();
  Tensor out(m.dtype, rows_shape(n, m.row_shape), host());
  const size_t row_bytes = static_cast<size_t>(row_elements(m.row_shape)) * dtype_size(m.dtype);
  auto* dst = static_cast<std::byte*>(out.raw_data());
  const auto* from_present = static_cast<const std::byte*>(present.raw_data());
  const auto* from_made = made.valid() ? static_cast<const std::byte*>(made.raw_data()) : nullptr;
  size_t p = 0;
  size_t a = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::byte* row = dst + static_cast<size_t>(i) * row_bytes;
    if (slots[static_cast<size_t>(i)] != HashIndex::kAbsent) {
      std::memcpy(row, from_present + p++ * row_bytes, row_bytes);
    } else if (fill.valid()) {
      // A scalar default repeats; a row default is copied whole.
      const size_t fill_bytes = fill.nbytes();
      for (size_t off = 0; off < row_bytes; off += fill_bytes) {
        std::memcpy(row + off, fill.raw_data(), fill_bytes);
      }
    } else {
      std::memcpy(row, from_made + a++ * row_bytes, row_bytes);
    }
  }
  return out.on(device_);
}

Tensor DeviceKeyedTable::gather(int member, std::span<const int64_t> keys, bool insert,
                                const Tensor& absent_row) {
  const int64_t n = static_cast<int64_t>(keys.size());
  {
    std::shared_lock lock(mu_);
    const Member& m = *members_.at(static_cast<size_t>(member));
    const bool cpu = device_.is_cpu() && row_elements(m.row_shape) > 0;
    if (cpu) {
      Tensor out(m.dtype, rows_shape(n, m.row_shape), host());
      if (gather_present(m, keys, out)) return out;
    } else if (finds_on_device(n)) {
      // Resolved on the device, with no probe on the host. An evaluation
      // lookup decides nothing there: the absent keys read their default
      // (or initial rows) on the device too, and the host waits for
      // nothing. A training one waits for the count of absent keys: with
      // none, the rows are gathered there.
      if (!insert) {
        const DeviceKeyIndex::Found found = device_index_->find(keys, /*count_absent=*/false);
        return compose_on_device(m, found.keys, found.slots, absent_row);
      }
      DeviceKeyIndex::Found found = device_index_->find(keys);
      if (found.absent == 0) return gather_slots(m.arena, found.slots);
    }
    // (A CPU training lookup that met an absent key goes straight to the
    // insert below, which looks every key up again under the exclusive lock.)
    if (!(cpu && insert)) {
      std::vector<int64_t> slots = find(keys);
      const auto absent = std::count(slots.begin(), slots.end(), HashIndex::kAbsent);
      if (absent == 0) return read_rows(m, slots);
      if (!insert) return compose_rows(m, member, keys, slots, absent_row);
    }
  }
  Exclusive lock(*this);
  const Member& m = *members_.at(static_cast<size_t>(member));
  const std::vector<int64_t> slots = find_or_insert(keys, -1, /*admit_keys=*/true);
  if (std::find(slots.begin(), slots.end(), HashIndex::kAbsent) == slots.end()) {
    return read_rows(m, slots);
  }
  // Keys not admitted (yet) read the default.
  return compose_rows(m, member, keys, slots, absent_row);
}

namespace {

// The positions of `slots` that hold a slot (not kAbsent); all of them when
// every key is present (then `kept` is left empty and false is returned).
bool kept_positions(std::vector<int64_t>& slots, std::vector<int64_t>& kept) {
  if (std::find(slots.begin(), slots.end(), HashIndex::kAbsent) == slots.end()) return false;
  std::vector<int64_t> present;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] == HashIndex::kAbsent) continue;
    kept.push_back(static_cast<int64_t>(i));
    present.push_back(slots[i]);
  }
  slots = std::move(present);
  return true;
}

}  // namespace

void DeviceKeyedTable::scatter_at(kernels::ScatterOp op, Member& m, std::vector<int64_t> slots,
                                  const Tensor& updates, const std::string& who) {
  // The updates of keys not admitted are dropped.
  std::vector<int64_t> kept;
  Tensor values = updates;
  if (kept_positions(slots, kept) && updates.rank() > 0) values = gather_rows(updates, kept);
  if (slots.empty()) return;
  Tensor arena = m.arena;
  scatter_tensor(op, arena, slot_tensor(slots), values, {.name = who}, /*indices_in_range=*/true);
  mark(slots);
  touch(slots);
  m.version.fetch_add(1);
}

void DeviceKeyedTable::scatter(kernels::ScatterOp op, int member, std::span<const int64_t> keys,
                               const Tensor& updates, const std::string& who) {
  {
    std::shared_lock lock(mu_);
    Member& m = *members_.at(static_cast<size_t>(member));
    std::vector<int64_t> host_slots;
    bool absent = false;
    if (std::optional<Tensor> slots =
            present_on_device(keys, needs_host_slots() ? &host_slots : nullptr, &absent)) {
      scatter_slots(op, m, *slots, host_slots, updates, who);
      return;
    }
    // (A key the device found absent: straight to the insert.)
    if (!absent) {
      if (std::optional<Tensor> slots = find_present(keys)) {
        scatter_slots(op, m, slots->on(device_), host_slots_of(*slots), updates, who);
        return;
      }
    }
  }
  Exclusive lock(*this);
  scatter_at(op, *members_.at(static_cast<size_t>(member)),
             find_or_insert(keys, -1, /*admit_keys=*/true), updates, who);
}

void DeviceKeyedTable::scatter_slots(kernels::ScatterOp op, Member& m, const Tensor& slots,
                                     std::span<const int64_t> host_slots, const Tensor& updates,
                                     const std::string& who) {
  Tensor arena = m.arena;
  scatter_tensor(op, arena, slots, updates, {.name = who}, /*indices_in_range=*/true);
  mark(host_slots);
  touch(host_slots);
  m.version.fetch_add(1);
}

std::optional<Tensor> DeviceKeyedTable::gather_device_keys(int member, const Tensor& keys,
                                                           bool insert, const Tensor& absent_row) {
  std::shared_lock lock(mu_);
  const Member& m = *members_.at(static_cast<size_t>(member));
  if (!insert) {
    // An evaluation lookup of keys already on the device: found and
    // composed there whatever their number (nothing to copy to the host,
    // nothing to wait for).
    if (!device_index_ || !device_index_->valid() || keys.dtype() != DType::kInt64 ||
        &keys.device() != &device_) {
      return std::nullopt;
    }
    const DeviceKeyIndex::Found found = device_index_->find(keys, /*count_absent=*/false);
    return compose_on_device(m, found.keys, found.slots, absent_row);
  }
  if (std::optional<Tensor> slots = present_on_device(keys, nullptr)) {
    return gather_slots(m.arena, *slots);
  }
  return std::nullopt;
}

bool DeviceKeyedTable::scatter_device_keys(kernels::ScatterOp op, int member, const Tensor& keys,
                                           const Tensor& updates, const std::string& who) {
  {
    std::shared_lock lock(mu_);
    Member& m = *members_.at(static_cast<size_t>(member));
    std::vector<int64_t> host_slots;
    bool absent = false;
    std::optional<Tensor> slots =
        present_on_device(keys, needs_host_slots() ? &host_slots : nullptr, &absent);
    if (slots) {
      scatter_slots(op, m, *slots, host_slots, updates, who);
      return true;
    }
    if (!absent) return false;  // the device did not look: the caller's host path
  }
  // A key the device found absent: the keys to the host, whose index
  // decides the insert, without looking them up again on either side.
  const std::vector<int64_t> host_keys = keys.to_vector<int64_t>();
  Exclusive lock(*this);
  scatter_at(op, *members_.at(static_cast<size_t>(member)),
             find_or_insert(host_keys, -1, /*admit_keys=*/true), updates, who);
  return true;
}

void DeviceKeyedTable::insert(std::span<const int64_t> keys, const Tensor& values) {
  Exclusive lock(*this);
  // Member 0's new rows are written here, not initialized first.
  Member& m = *members_.front();
  // On the host each shard's thread writes the rows of the keys it inserts,
  // in order (a key's positions all go to one shard): a repeated key keeps
  // its last row.
  auto on_host = [&] {
    const size_t row_bytes = static_cast<size_t>(row_elements(m.row_shape)) * dtype_size(m.dtype);
    const auto* src = static_cast<const std::byte*>(values.raw_data());
    const ShardRowsFn write = [&](const int64_t* positions, const int64_t* at, int64_t count) {
      const RowCopier rows_out(static_cast<std::byte*>(m.arena.raw_data()), row_bytes, count);
      for (int64_t i = 0; i < count; ++i) {
        rows_out.copy(at[i], src + static_cast<size_t>(positions[i]) * row_bytes);
      }
    };
    bool written = false;
    std::vector<int64_t> slots = find_or_insert(keys, /*skip_init=*/0, /*admit=*/false,
                                                row_bytes > 0 ? &write : nullptr, &written);
    if (!written) write_rows(m, slots, values);
    return slots;
  };
  // On a GPU the last row of each repeated key only (a scatter of repeats
  // has no order there).
  auto on_device = [&] {
    std::vector<int64_t> slots = find_or_insert(keys, /*skip_init=*/0);
    std::vector<int64_t> last(static_cast<size_t>(capacity_), -1);
    for (size_t i = 0; i < slots.size(); ++i)
      last[static_cast<size_t>(slots[i])] = static_cast<int64_t>(i);
    std::vector<int64_t> positions;
    std::vector<int64_t> distinct;
    for (size_t i = 0; i < slots.size(); ++i) {
      if (last[static_cast<size_t>(slots[i])] != static_cast<int64_t>(i)) continue;
      positions.push_back(static_cast<int64_t>(i));
      distinct.push_back(slots[i]);
    }
    write_rows(m, distinct,
               distinct.size() == slots.size() ? values : gather_rows(values, positions));
    return slots;
  };
  const std::vector<int64_t> slots = device_.is_cpu() ? on_host() : on_device();
  mark(slots);
  touch(slots);
  m.version.fetch_add(1);
}

int64_t DeviceKeyedTable::erase(std::span<const int64_t> keys) {
  Exclusive lock(*this);
  int64_t erased = 0;
  for (int64_t key : keys) {
    const int64_t slot = shard_of(key).find(key);
    if (slot == HashIndex::kAbsent) continue;
    erase_slot(key, slot);
    ++erased;
  }
  if (erased > 0) {
    note_size();
    for (const auto& m : members_) m->version.fetch_add(1);
  }
  return erased;
}

void DeviceKeyedTable::drop_keys() {
  if (marking_) {
    for_each_key([&](int64_t key, int64_t) { erased_.push_back(key); });
    for (int64_t s = 0; s < capacity_; ++s) {
      marks_[static_cast<size_t>(s)].store(0, std::memory_order_relaxed);
    }
  }
  for (auto& shard : shards_) shard.clear();
  free_.clear();
  next_slot_ = 0;
  note_size();
  if (device_index_) {
    index_changes_.clear();
    index_cleared_ = true;
  }
}

void DeviceKeyedTable::clear() {
  Exclusive lock(*this);
  drop_keys();
  for (const auto& m : members_) m->version.fetch_add(1);
}

void DeviceKeyedTable::reset_member(int member) {
  std::unique_lock lock(mu_);
  Member& m = *members_.at(static_cast<size_t>(member));
  std::vector<int64_t> keys;
  std::vector<int64_t> slots;
  for_each_key([&](int64_t key, int64_t slot) {
    keys.push_back(key);
    slots.push_back(slot);
  });
  StagedKeys staged;
  init_rows(m, member, keys, slots, staged);
  mark(slots);
  m.version.fetch_add(1);
}

std::vector<Tensor> DeviceKeyedTable::arenas_of(const std::vector<int>& members) const {
  std::vector<Tensor> arenas;
  for (int member : members) arenas.push_back(members_.at(static_cast<size_t>(member))->arena);
  return arenas;
}

void DeviceKeyedTable::apply_rows(const std::vector<int>& members, std::vector<int64_t> slots,
                                  bool all_rows, const RowsFn& fn) {
  std::vector<int64_t> kept;
  const bool filtered = kept_positions(slots, kept);
  if (!slots.empty() || all_rows) {
    std::vector<Tensor> arenas = arenas_of(members);
    fn(arenas, slot_tensor(slots), filtered ? &kept : nullptr);
  }
  rows_updated(members, slots, all_rows);
}

void DeviceKeyedTable::apply_found(const std::vector<int>& members, const Tensor& slots,
                                   std::span<const int64_t> host_slots, bool all_rows,
                                   const RowsFn& fn) {
  if (slots.num_elements() > 0 || all_rows) {
    std::vector<Tensor> arenas = arenas_of(members);
    fn(arenas, slots, nullptr);
  }
  rows_updated(members, host_slots, all_rows);
}

void DeviceKeyedTable::rows_updated(const std::vector<int>& members, std::span<const int64_t> slots,
                                    bool all_rows) {
  touch(slots);
  clock_.fetch_add(1, std::memory_order_relaxed);
  if (all_rows && marking_) {
    for_each_key([&](int64_t, int64_t slot) {
      marks_[static_cast<size_t>(slot)].store(1, std::memory_order_relaxed);
    });
  } else {
    mark(slots);
  }
  for (int member : members) members_.at(static_cast<size_t>(member))->version.fetch_add(1);
}

void DeviceKeyedTable::update_rows(const std::vector<int>& members, std::span<const int64_t> keys,
                                   bool all_rows, const RowsFn& fn) {
  {
    std::shared_lock lock(mu_);
    std::vector<int64_t> host_slots;
    bool absent = false;
    if (std::optional<Tensor> slots =
            present_on_device(keys, needs_host_slots() ? &host_slots : nullptr, &absent)) {
      apply_found(members, *slots, host_slots, all_rows, fn);
      return;
    }
    // (A key the device found absent: straight to the insert.)
    if (!absent) {
      if (std::optional<Tensor> slots = find_present(keys)) {
        apply_found(members, slots->on(device_), host_slots_of(*slots), all_rows, fn);
        return;
      }
    }
  }
  Exclusive lock(*this);
  apply_rows(members, find_or_insert(keys, -1, /*admit_keys=*/true), all_rows, fn);
}

bool DeviceKeyedTable::update_rows_device_keys(const std::vector<int>& members, const Tensor& keys,
                                               bool all_rows, const RowsFn& fn) {
  {
    std::shared_lock lock(mu_);
    std::vector<int64_t> host_slots;
    bool absent = false;
    std::optional<Tensor> slots =
        present_on_device(keys, needs_host_slots() ? &host_slots : nullptr, &absent);
    if (slots) {
      apply_found(members, *slots, host_slots, all_rows, fn);
      return true;
    }
    if (!absent) return false;  // the device did not look: the caller's host path
  }
  // A key the device found absent: inserted on the host (as scatter_device_keys).
  const std::vector<int64_t> host_keys = keys.to_vector<int64_t>();
  Exclusive lock(*this);
  apply_rows(members, find_or_insert(host_keys, -1, /*admit_keys=*/true), all_rows, fn);
  return true;
}

KeyedTable::Export DeviceKeyedTable::export_rows(const std::vector<int>& members) const {
  std::shared_lock lock(mu_);
  std::vector<std::pair<int64_t, int64_t>> entries;
  entries.reserve(static_cast<size_t>(live_keys()));
  for_each_key([&](int64_t key, int64_t slot) { entries.emplace_back(key, slot); });
  std::sort(entries.begin(), entries.end());
  return export_entries(members, entries);
}

KeyedTable::Export DeviceKeyedTable::export_entries(
    const std::vector<int>& members,
    const std::vector<std::pair<int64_t, int64_t>>& entries) const {
  std::vector<int64_t> keys(entries.size());
  std::vector<int64_t> slots(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) std::tie(keys[i], slots[i]) = entries[i];
  Export out;
  out.keys = Tensor::from_vector(keys);
  for (int member : members) {
    out.values.push_back(read_rows(*members_.at(static_cast<size_t>(member)), slots).to_host());
  }
  if (tracking_) {
    std::vector<int64_t> versions(slots.size());
    std::vector<int64_t> counts(slots.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      versions[i] = last_step_[static_cast<size_t>(slots[i])].load();
      counts[i] = updates_[static_cast<size_t>(slots[i])].load();
    }
    out.versions = Tensor::from_vector(versions);
    out.counts = Tensor::from_vector(counts);
  }
  return out;
}

void DeviceKeyedTable::set_update_history(const Tensor& keys, const Tensor& versions,
                                          const Tensor& counts) {
  if (!tracking_) return;
  const std::vector<int64_t> k = keys.to_vector<int64_t>();
  const std::vector<int64_t> v = versions.to_vector<int64_t>();
  const std::vector<int64_t> c = counts.to_vector<int64_t>();
  std::unique_lock lock(mu_);
  const std::vector<int64_t> slots = find(k);
  int64_t latest = clock_.load();
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] == HashIndex::kAbsent) continue;
    last_step_[static_cast<size_t>(slots[i])].store(v[i], std::memory_order_relaxed);
    updates_[static_cast<size_t>(slots[i])].store(c[i], std::memory_order_relaxed);
    latest = std::max(latest, v[i]);
  }
  clock_.store(latest);
}

void DeviceKeyedTable::replace(const Tensor& keys, const std::vector<int>& members,
                               const std::vector<Tensor>& values) {
  const std::vector<int64_t> k = keys.to_vector<int64_t>();
  if (policy().max_rows > 0 && static_cast<int64_t>(k.size()) > policy().max_rows) {
    throw ResourceExhaustedError(quoted(name()) + ": restoring " + std::to_string(k.size()) +
                                 " keys into a table capped at max_rows " +
                                 std::to_string(policy().max_rows));
  }
  Exclusive lock(*this);
  drop_keys();
  const std::vector<int64_t> slots = find_or_insert(k);
  for (size_t j = 0; j < members.size(); ++j) {
    write_rows(*members_.at(static_cast<size_t>(members[j])), slots, values[j]);
  }
  for (const auto& m : members_) m->version.fetch_add(1);
}

void DeviceKeyedTable::write_present(int member, std::span<const int64_t> keys,
                                     const Tensor& rows) {
  std::unique_lock lock(mu_);
  Member& m = *members_.at(static_cast<size_t>(member));
  const std::vector<int64_t> slots = find(keys);
  std::vector<int64_t> present_slots;
  std::vector<int64_t> positions;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] == HashIndex::kAbsent) continue;
    present_slots.push_back(slots[i]);
    positions.push_back(static_cast<int64_t>(i));
  }
  write_rows(m, present_slots, gather_rows(rows, positions));
  mark(present_slots);
  m.version.fetch_add(1);
}

void KeyedTable::train(const std::vector<int>&, std::span<const int64_t>, bool,
                       const KeyedTrainingStep& step) {
  throw InternalError(step.who + ": " + quoted(name_) +
                      " holds its rows in this process; train it through update_rows");
}

std::shared_ptr<KeyedTable> make_keyed_table(std::string name, DType key_dtype,
                                             const std::vector<Device*>& devices,
                                             KeyedPolicy policy) {
  if (devices.size() == 1) {
    return std::make_shared<DeviceKeyedTable>(std::move(name), key_dtype, *devices[0], policy);
  }
  return std::make_shared<ShardedKeyedTable>(std::move(name), key_dtype, devices, policy);
}

void DeviceKeyedTable::start_marking() {
  std::unique_lock lock(mu_);
  if (marking_) return;
  marking_ = true;
  if (!marks_ && capacity_ > 0) {
    marks_ = std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(capacity_));
  }
}

KeyedTable::Changes DeviceKeyedTable::take_changes(const std::vector<int>& members, uint64_t last) {
  std::unique_lock lock(mu_);
  Changes out;
  out.complete = marking_ && last == generation_;
  out.generation = ++generation_;
  if (!marking_) {
    marking_ = true;
    if (!marks_ && capacity_ > 0) {
      marks_ = std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(capacity_));
    }
  }
  // Every mark is cleared, whether the changes are given or not.
  std::vector<std::pair<int64_t, int64_t>> written;
  for_each_key([&](int64_t key, int64_t slot) {
    std::atomic<uint8_t>& m = marks_[static_cast<size_t>(slot)];
    if (m.load(std::memory_order_relaxed) != 0) {
      m.store(0, std::memory_order_relaxed);
      written.emplace_back(key, slot);
    }
  });
  std::vector<int64_t> erased = std::move(erased_);
  erased_.clear();
  erased_limit_ = kMinErasedLimit;
  if (!out.complete) return out;
  std::sort(written.begin(), written.end());
  std::sort(erased.begin(), erased.end());
  erased.erase(std::unique(erased.begin(), erased.end()), erased.end());
  out.written = export_entries(members, written);
  out.erased = std::move(erased);
  return out;
}

}  // namespace varstate::internal
