// The CUDA hash index (kernels/cuda/hash_index.h) against a reference map
// and its CPU twin (kernels/cpu/hash_index.h): batches of inserts, erasures
// and lookups with keys repeated inside a batch, the two reserved key
// words, rebuilds into a larger array, and the slot accounting (each new
// key takes exactly one free slot; each erased key gives its slot back
// once).
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cpu/hash_index.h"
#include "kernels/cuda/hash_index.h"

using namespace varstate;
using namespace varstate::testing;
namespace gpu = varstate::kernels::cuda;
using kernels::kAbsentSlot;
using kernels::KeyEntry;

namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// What the keyed storage will do around the kernels: the arena's free
// slots on the host, the index's counts, and a rebuild before an insert
// could pass 3/4 of the array.
class GpuIndex {
 public:
  explicit GpuIndex(int64_t capacity) : capacity_(capacity) {
    entries_ = alloc<KeyEntry>(gpu::hash_index_entries(capacity_));
    gpu::hash_index_clear(entries_, capacity_, stream_.get());
    for (int64_t s = 1 << 20; s-- > 0;) free_.push_back(s);
  }
  ~GpuIndex() { cudaFree(entries_); }
  GpuIndex(const GpuIndex&) = delete;
  GpuIndex& operator=(const GpuIndex&) = delete;

  int64_t capacity() const { return capacity_; }
  int rebuilds() const { return rebuilds_; }

  // The slots of `keys` after inserting the absent ones; `taken`: how many
  // free slots went to new keys.
  std::vector<int64_t> insert(const std::vector<int64_t>& keys, int64_t* taken) {
    const int64_t n = std::ssize(keys);
    if (used_ + n > capacity_ / 4 * 3) grow(n);
    std::vector<int64_t> candidates(free_.end() - n, free_.end());
    std::reverse(candidates.begin(), candidates.end());
    DeviceArray<int64_t> d_keys(keys), d_free(candidates), d_pos(std::vector<int64_t>(n, -9)),
        d_slots(std::vector<int64_t>(n, -9));
    DeviceArray<unsigned long long> d_taken(std::vector<unsigned long long>{0});
    gpu::hash_index_insert(entries_, capacity_, d_keys.get(), n, d_free.get(), d_taken.get(),
                           d_pos.get(), d_slots.get(), stream_.get());
    stream_.sync();
    *taken = static_cast<int64_t>(d_taken.to_host()[0]);
    free_.resize(free_.size() - static_cast<size_t>(*taken));  // the first `taken` went
    used_ += *taken;
    return d_slots.to_host();
  }

  std::vector<int64_t> erase(const std::vector<int64_t>& keys, int64_t* erased) {
    const int64_t n = std::ssize(keys);
    DeviceArray<int64_t> d_keys(keys), d_slots(std::vector<int64_t>(n, -9));
    DeviceArray<unsigned long long> d_erased(std::vector<unsigned long long>{0});
    gpu::hash_index_erase(entries_, capacity_, d_keys.get(), n, d_slots.get(), d_erased.get(),
                          stream_.get());
    stream_.sync();
    *erased = static_cast<int64_t>(d_erased.to_host()[0]);
    std::vector<int64_t> slots = d_slots.to_host();
    for (int64_t s : slots) {
      if (s != kAbsentSlot) free_.push_back(s);
    }
    live_ -= *erased;
    return slots;
  }

  std::vector<int64_t> find(const std::vector<int64_t>& keys) {
    const int64_t n = std::ssize(keys);
    DeviceArray<int64_t> d_keys(keys), d_slots(std::vector<int64_t>(n, -9));
    gpu::hash_index_find(entries_, capacity_, d_keys.get(), n, d_slots.get(), stream_.get());
    stream_.sync();
    return d_slots.to_host();
  }

  void add_live(int64_t n) { live_ += n; }

 private:
  template <typename T>
  static T* alloc(int64_t n) {
    void* p = nullptr;
    CUDA_OK(cudaMalloc(&p, static_cast<size_t>(n) * sizeof(T)));
    return static_cast<T*>(p);
  }

  // A larger array (or the same, to drop tombstones) for `incoming` more.
  void grow(int64_t incoming) {
    int64_t capacity = capacity_;
    while (capacity / 4 * 3 < live_ + incoming) capacity *= 2;
    KeyEntry* fresh = alloc<KeyEntry>(gpu::hash_index_entries(capacity));
    gpu::hash_index_rebuild(entries_, capacity_, fresh, capacity, stream_.get());
    stream_.sync();
    CUDA_OK(cudaFree(entries_));
    entries_ = fresh;
    capacity_ = capacity;
    used_ = live_;
    ++rebuilds_;
  }

  Stream stream_;
  KeyEntry* entries_ = nullptr;
  int64_t capacity_;
  int64_t used_ = 0;  // live entries plus tombstones (side entries counted too)
  int64_t live_ = 0;
  int rebuilds_ = 0;
  std::vector<int64_t> free_;  // the arena's free slots, next at the back
};

}  // namespace

TEST_CASE("GPU hash index: batches against a reference map and the CPU twin", "[gpu][hash_index]") {
  std::mt19937_64 gen(20261128);
  // A pool of keys over the whole int64 range, the reserved words among them.
  std::vector<int64_t> pool(20000);
  for (int64_t& k : pool) k = static_cast<int64_t>(gen());
  pool[0] = kMin;
  pool[1] = kMin + 1;
  pool[2] = 0;
  std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
  auto batch = [&](int64_t n) {
    std::vector<int64_t> keys(static_cast<size_t>(n));
    for (int64_t& k : keys) k = pool[pick(gen)];  // repeats within the batch
    return keys;
  };

  GpuIndex index(64);
  std::map<int64_t, int64_t> ref;  // key -> the slot the GPU gave it
  kernels::cpu::HashIndex twin;    // fed the same keys and slots
  for (int round = 0; round < 60; ++round) {
    CAPTURE(round);
    // Insert: every position of a key gets one slot; old keys keep theirs;
    // the new ones take distinct slots, exactly one each.
    const std::vector<int64_t> keys = batch(round % 3 == 0 ? 5000 : 700);
    int64_t taken = 0;
    const std::vector<int64_t> slots = index.insert(keys, &taken);
    std::map<int64_t, int64_t> fresh;
    for (size_t i = 0; i < keys.size(); ++i) {
      REQUIRE(slots[i] >= 0);
      if (const auto it = ref.find(keys[i]); it != ref.end()) {
        REQUIRE(slots[i] == it->second);
      } else if (const auto [f, inserted] = fresh.emplace(keys[i], slots[i]); !inserted) {
        REQUIRE(slots[i] == f->second);
      }
    }
    REQUIRE(taken == std::ssize(fresh));
    std::set<int64_t> used_slots;
    for (const auto& [k, s] : ref) used_slots.insert(s);
    for (const auto& [k, s] : fresh) {
      REQUIRE(used_slots.insert(s).second);  // not a slot another key holds
      ref[k] = s;
      twin.insert(k, s);
    }
    index.add_live(taken);

    // Erase a few: each present key once, at one of its positions.
    const std::vector<int64_t> gone = batch(round % 2 == 0 ? 300 : 2500);
    int64_t erased = 0;
    const std::vector<int64_t> freed = index.erase(gone, &erased);
    std::map<int64_t, int> hits;
    for (size_t i = 0; i < gone.size(); ++i) {
      if (freed[i] == kAbsentSlot) continue;
      REQUIRE(ref.count(gone[i]) == 1);
      REQUIRE(freed[i] == ref.at(gone[i]));
      ++hits[gone[i]];
    }
    std::set<int64_t> distinct_present;
    for (int64_t k : gone) {
      if (ref.count(k)) distinct_present.insert(k);
    }
    REQUIRE(erased == std::ssize(distinct_present));
    REQUIRE(std::ssize(hits) == std::ssize(distinct_present));
    for (const auto& [k, count] : hits) REQUIRE(count == 1);
    for (int64_t k : distinct_present) {
      ref.erase(k);
      CHECK(twin.erase(k) != kAbsentSlot);
    }

    // Lookups of the whole pool: the reference, and the CPU twin.
    const std::vector<int64_t> found = index.find(pool);
    for (size_t i = 0; i < pool.size(); ++i) {
      const auto it = ref.find(pool[i]);
      REQUIRE(found[i] == (it == ref.end() ? kAbsentSlot : it->second));
      REQUIRE(found[i] == twin.find(pool[i]));
    }
  }
  CHECK(index.rebuilds() >= 3);  // grew from 64 entries, and dropped tombstones
  CHECK(twin.size() == std::ssize(ref));
}

TEST_CASE("GPU hash index: a batch of one key repeated takes one slot", "[gpu][hash_index]") {
  GpuIndex index(1024);
  for (const int64_t key : {int64_t{42}, kMin, kMin + 1}) {
    CAPTURE(key);
    int64_t taken = 0;
    const std::vector<int64_t> slots = index.insert(std::vector<int64_t>(600, key), &taken);
    CHECK(taken == 1);
    CHECK(std::count(slots.begin(), slots.end(), slots[0]) == 600);
    index.add_live(taken);
    int64_t erased = 0;
    const std::vector<int64_t> freed = index.erase(std::vector<int64_t>(600, key), &erased);
    CHECK(erased == 1);
    CHECK(std::count(freed.begin(), freed.end(), slots[0]) == 1);
    CHECK(std::count(freed.begin(), freed.end(), kAbsentSlot) == 599);
    CHECK(index.find({key}) == std::vector<int64_t>{kAbsentSlot});
  }
}

// insert_at: keys with the slots a host index chose (the keyed table's
// mirror, runtime/device_key_index.h), past tombstones, and find's count
// of absent positions.
TEST_CASE("GPU hash index: inserts at given slots, and the count of absent keys",
          "[gpu][hash_index]") {
  Stream stream;
  const int64_t capacity = 1 << 14;
  void* memory = nullptr;
  CUDA_OK(cudaMalloc(&memory,
                     static_cast<size_t>(gpu::hash_index_entries(capacity)) * sizeof(KeyEntry)));
  auto* entries = static_cast<KeyEntry*>(memory);
  gpu::hash_index_clear(entries, capacity, stream.get());
  std::mt19937_64 gen(20261129);
  std::map<int64_t, int64_t> ref;
  auto insert_at = [&](const std::vector<int64_t>& keys, const std::vector<int64_t>& slots) {
    DeviceArray<int64_t> d_keys(keys), d_slots(slots);
    gpu::hash_index_insert_at(entries, capacity, d_keys.get(), d_slots.get(), std::ssize(keys),
                              stream.get());
    stream.sync();
    for (size_t i = 0; i < keys.size(); ++i) ref[keys[i]] = slots[i];
  };
  auto erase = [&](const std::vector<int64_t>& keys) {
    DeviceArray<int64_t> d_keys(keys), d_slots(std::vector<int64_t>(keys.size(), -9));
    DeviceArray<unsigned long long> d_erased(std::vector<unsigned long long>{0});
    gpu::hash_index_erase(entries, capacity, d_keys.get(), std::ssize(keys), d_slots.get(),
                          d_erased.get(), stream.get());
    stream.sync();
    for (int64_t k : keys) ref.erase(k);
  };
  // Distinct keys, the reserved words among them, each with an arbitrary
  // slot (the host's choice, not the index's).
  std::set<int64_t> distinct = {kMin, kMin + 1, 0};
  while (distinct.size() < 6000) distinct.insert(static_cast<int64_t>(gen()));
  std::vector<int64_t> keys(distinct.begin(), distinct.end());
  std::shuffle(keys.begin(), keys.end(), gen);
  std::vector<int64_t> slots(keys.size());
  for (int64_t& s : slots) s = static_cast<int64_t>(gen() % 1000000);
  insert_at(keys, slots);
  // Half erased (tombstones), then a third of those back with new slots:
  // their probes pass the tombstones.
  const std::vector<int64_t> gone(keys.begin(), keys.begin() + 3000);
  erase(gone);
  const std::vector<int64_t> back(gone.begin(), gone.begin() + 1000);
  std::vector<int64_t> back_slots(back.size());
  for (int64_t& s : back_slots) s = 2000000 + static_cast<int64_t>(gen() % 1000);
  insert_at(back, back_slots);
  // Lookups of every key ever inserted, repeated, with unseen keys.
  std::vector<int64_t> probe = keys;
  probe.insert(probe.end(), keys.begin(), keys.begin() + 500);
  for (int i = 0; i < 700; ++i) probe.push_back(static_cast<int64_t>(gen()));
  const int64_t n = std::ssize(probe);
  DeviceArray<int64_t> d_probe(probe), d_found(std::vector<int64_t>(probe.size(), -9));
  DeviceArray<unsigned long long> d_absent(std::vector<unsigned long long>{5});
  gpu::hash_index_find(entries, capacity, d_probe.get(), n, d_found.get(), stream.get(),
                       d_absent.get());
  stream.sync();
  const std::vector<int64_t> found = d_found.to_host();
  int64_t absent = 0;
  for (size_t i = 0; i < probe.size(); ++i) {
    const auto it = ref.find(probe[i]);
    REQUIRE(found[i] == (it == ref.end() ? kAbsentSlot : it->second));
    absent += it == ref.end() ? 1 : 0;
  }
  CHECK(absent >= 2000 + 700 - 10);  // the erased keys not put back, and nearly every unseen one
  CHECK(static_cast<int64_t>(d_absent.to_host()[0]) == 5 + absent);  // the count adds up
  CUDA_OK(cudaFree(entries));
}
