// The CPU hash index of the keyed variables (kernels/cpu/hash_index.h)
// against std::unordered_map: random inserts, lookups and erasures of keys
// from a small pool (so that many repeat and tombstones pile up), the two
// sentinel key values and the int64 extremes, rebuilds keeping every
// mapping, bounded growth under churn, batch lookups, reserve, clear, and
// lookups from several threads at once.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/hash_index.h"
#include "kernels/key_hash.h"

using varstate::kernels::key_hash;
using varstate::kernels::key_shard;
using varstate::kernels::cpu::HashIndex;

namespace {

constexpr int64_t kAbsent = HashIndex::kAbsent;
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Every mapping of `ref`, and nothing else, is in `index`.
void check_same(const HashIndex& index, const std::unordered_map<int64_t, int64_t>& ref) {
  REQUIRE(index.size() == static_cast<int64_t>(ref.size()));
  for (const auto& [key, slot] : ref) REQUIRE(index.find(key) == slot);
  std::map<int64_t, int64_t> seen;
  index.for_each([&](int64_t key, int64_t slot) { CHECK(seen.emplace(key, slot).second); });
  REQUIRE(seen.size() == ref.size());
  for (const auto& [key, slot] : seen) CHECK(ref.at(key) == slot);
}

}  // namespace

TEST_CASE("hash index: the keys the index reserves are ordinary keys", "[hash_index]") {
  HashIndex index;
  std::unordered_map<int64_t, int64_t> ref;
  const std::vector<int64_t> keys = {kMin, kMin + 1, kMin + 2, -1, 0, 1, kMax - 1, kMax};
  for (size_t i = 0; i < keys.size(); ++i) {
    CHECK(index.find(keys[i]) == kAbsent);
    CHECK(index.insert(keys[i], static_cast<int64_t>(10 + i)) == static_cast<int64_t>(10 + i));
    ref[keys[i]] = static_cast<int64_t>(10 + i);
  }
  check_same(index, ref);
  // Inserting a present key keeps its slot.
  for (size_t i = 0; i < keys.size(); ++i) CHECK(index.insert(keys[i], 99) == ref[keys[i]]);
  check_same(index, ref);
  for (int64_t key : {kMin, kMin + 1, int64_t{0}}) {
    CHECK(index.erase(key) == ref[key]);
    CHECK(index.erase(key) == kAbsent);
    ref.erase(key);
  }
  check_same(index, ref);
  CHECK(index.erase(12345) == kAbsent);
  check_same(index, ref);
}

TEST_CASE("hash index: random operations agree with unordered_map", "[hash_index]") {
  for (const int64_t pool : {8, 1000, 100000}) {
    CAPTURE(pool);
    std::mt19937_64 gen(static_cast<uint64_t>(pool) * 7919);
    // Keys from a pool of `pool` values (sentinels among them), scattered
    // over the whole int64 range.
    std::vector<int64_t> values(static_cast<size_t>(pool));
    for (int64_t& v : values) v = static_cast<int64_t>(gen());
    values[0] = kMin;
    if (pool > 1) values[1] = kMin + 1;
    std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
    HashIndex index;
    std::unordered_map<int64_t, int64_t> ref;
    int64_t next_slot = 0;
    const int ops = 300000;
    for (int op = 0; op < ops; ++op) {
      const int64_t key = values[pick(gen)];
      const auto it = ref.find(key);
      switch (gen() % 3) {
        case 0: {
          const int64_t got = index.insert(key, next_slot);
          if (it == ref.end()) {
            REQUIRE(got == next_slot);
            ref[key] = next_slot++;
          } else {
            REQUIRE(got == it->second);
          }
          break;
        }
        case 1:
          REQUIRE(index.erase(key) == (it == ref.end() ? kAbsent : it->second));
          if (it != ref.end()) ref.erase(it);
          break;
        default:
          REQUIRE(index.find(key) == (it == ref.end() ? kAbsent : it->second));
      }
      REQUIRE(index.size() == static_cast<int64_t>(ref.size()));
    }
    check_same(index, ref);
    // Churn does not grow the array past what the live keys need: at most
    // one doubling beyond the smallest array that holds them.
    int64_t needed = 16;
    while (needed / 4 * 3 < static_cast<int64_t>(ref.size())) needed *= 2;
    CHECK(index.capacity() <= 2 * needed);
  }
}

TEST_CASE("hash index: rebuilds keep every mapping; reserve avoids them", "[hash_index]") {
  HashIndex index;
  std::unordered_map<int64_t, int64_t> ref;
  int64_t capacity = index.capacity();
  int rebuilds = 0;
  for (int64_t i = 0; i < 200000; ++i) {
    const int64_t key = i * 1000003 - 77;  // consecutive-ish ids
    index.insert(key, i);
    ref[key] = i;
    if (index.capacity() != capacity) {
      ++rebuilds;
      capacity = index.capacity();
      check_same(index, ref);
    }
  }
  CHECK(rebuilds >= 10);
  CHECK(index.size() <= index.rebuild_threshold());
  check_same(index, ref);

  HashIndex reserved;
  reserved.reserve(200000);
  const int64_t reserved_capacity = reserved.capacity();
  CHECK(reserved.rebuild_threshold() >= 200000);
  for (int64_t i = 0; i < 200000; ++i) reserved.insert(i * 1000003 - 77, i);
  CHECK(reserved.capacity() == reserved_capacity);
  check_same(reserved, ref);
  // The mixed hash keeps probes short for such keys: about 1.5 a lookup at
  // this load under linear probing.
  CHECK(static_cast<double>(reserved.total_probes()) / reserved.size() < 2.5);

  reserved.clear();
  CHECK(reserved.size() == 0);
  CHECK(reserved.capacity() == reserved_capacity);
  CHECK(reserved.find(-77) == kAbsent);
  reserved.for_each([](int64_t, int64_t) { FAIL("a key after clear()"); });
}

TEST_CASE("hash index: a batch insert equals one insert per key", "[hash_index]") {
  std::mt19937_64 gen(9);
  HashIndex batched(10);  // small: the batch's rebuild runs first
  HashIndex single(10);
  int64_t next_slot = 1000;
  for (int round = 0; round < 20; ++round) {
    std::vector<int64_t> keys(5000);
    for (int64_t& k : keys) k = static_cast<int64_t>(gen() % 20000) - 10000;  // repeats
    keys[7] = kMin;
    keys[8] = kMin + 1;
    keys[9] = kMin;
    std::vector<int64_t> free_slots(keys.size());
    for (int64_t& s : free_slots) s = next_slot++;
    std::vector<int64_t> got(keys.size(), -9);
    const int64_t taken =
        batched.insert(keys.data(), std::ssize(keys), free_slots.data(), got.data());
    int64_t want_taken = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      const int64_t slot = single.insert(keys[i], free_slots[static_cast<size_t>(want_taken)]);
      want_taken += slot == free_slots[static_cast<size_t>(want_taken)];
      REQUIRE(got[i] == slot);
    }
    REQUIRE(taken == want_taken);
    REQUIRE(batched.size() == single.size());
    // The free slots not taken are the tail, held by no key.
    const std::set<int64_t> unused(free_slots.begin() + taken, free_slots.end());
    batched.for_each([&](int64_t, int64_t slot) { REQUIRE(unused.count(slot) == 0); });
  }
  std::unordered_map<int64_t, int64_t> ref;
  single.for_each([&](int64_t key, int64_t slot) { ref[key] = slot; });
  check_same(batched, ref);
}

TEST_CASE("hash index: a room allocated ahead and taken on another thread rebuilds in place",
          "[hash_index]") {
  // Several indexes, each with tombstones and the sentinel keys: the rooms
  // for their next batches allocated here, taken on a thread each, then
  // the batches inserted. Nothing is rebuilt by the inserts themselves, and
  // every mapping survives.
  constexpr int kIndexes = 4;
  std::vector<HashIndex> indexes(kIndexes);
  std::vector<std::unordered_map<int64_t, int64_t>> refs(kIndexes);
  std::mt19937_64 gen(21);
  int64_t next_slot = 0;
  for (int round = 0; round < 6; ++round) {
    std::vector<std::vector<int64_t>> batches(kIndexes);
    std::vector<HashIndex::Room> rooms(kIndexes);
    for (int x = 0; x < kIndexes; ++x) {
      HashIndex& index = indexes[static_cast<size_t>(x)];
      auto& ref = refs[static_cast<size_t>(x)];
      // Erase a third of the keys (tombstones), then a batch twice as large
      // as the live keys, some of them repeated, some already present.
      std::vector<int64_t> erase;
      for (const auto& [key, slot] : ref)
        if (gen() % 3 == 0) erase.push_back(key);
      for (int64_t key : erase) {
        REQUIRE(index.erase(key) == ref.at(key));
        ref.erase(key);
      }
      std::vector<int64_t>& batch = batches[static_cast<size_t>(x)];
      const int64_t n = 2 * std::ssize(ref) + 1000;
      for (int64_t i = 0; i < n; ++i) batch.push_back(static_cast<int64_t>(gen() % 1000000));
      if (!ref.empty()) batch.push_back(ref.begin()->first);
      batch.push_back(kMin);
      batch.push_back(kMin + 1);
      rooms[static_cast<size_t>(x)] = index.room_for_insert(std::ssize(batch));
      CHECK(rooms[static_cast<size_t>(x)].capacity >= index.capacity());
      check_same(index, ref);  // allocating the room changed nothing
    }
    std::vector<std::thread> threads;
    for (int x = 0; x < kIndexes; ++x) {
      threads.emplace_back([&, x] {
        indexes[static_cast<size_t>(x)].take(std::move(rooms[static_cast<size_t>(x)]));
      });
    }
    for (std::thread& t : threads) t.join();
    for (int x = 0; x < kIndexes; ++x) {
      HashIndex& index = indexes[static_cast<size_t>(x)];
      auto& ref = refs[static_cast<size_t>(x)];
      check_same(index, ref);  // the rebuild kept every mapping
      const std::vector<int64_t>& batch = batches[static_cast<size_t>(x)];
      const int64_t capacity = index.capacity();
      // Room for every key being new: the insert itself does not rebuild.
      CHECK(index.room_for_insert(std::ssize(batch)).capacity == 0);
      std::vector<int64_t> free_slots(batch.size());
      for (int64_t& s : free_slots) s = next_slot++;
      std::vector<int64_t> got(batch.size());
      index.insert(batch.data(), std::ssize(batch), free_slots.data(), got.data());
      CHECK(index.capacity() == capacity);
      for (size_t i = 0; i < batch.size(); ++i) ref.emplace(batch[i], got[i]);
      for (size_t i = 0; i < batch.size(); ++i) REQUIRE(ref.at(batch[i]) == got[i]);
      check_same(index, ref);
    }
  }
}

TEST_CASE("hash index: erase and reinsert cycles reuse entries", "[hash_index]") {
  // Keys inserted and erased in turn: tombstones and emptied runs must not
  // make the array grow while the live count stays small.
  HashIndex index(100);
  const int64_t capacity = index.capacity();
  std::unordered_map<int64_t, int64_t> ref;
  for (int64_t round = 0; round < 20000; ++round) {
    for (int64_t j = 0; j < 50; ++j) {
      const int64_t key = round * 50 + j;
      index.insert(key, key);
      ref[key] = key;
    }
    for (int64_t j = 0; j < 50; ++j) {
      const int64_t key = round * 50 + j;
      REQUIRE(index.erase(key) == key);
      ref.erase(key);
    }
  }
  CHECK(index.size() == 0);
  CHECK(index.capacity() == capacity);
  check_same(index, ref);
}

TEST_CASE("hash index: batch lookups equal single lookups, from several threads", "[hash_index]") {
  HashIndex index;
  std::mt19937_64 gen(5);
  std::vector<int64_t> keys(50000);
  for (int64_t i = 0; i < 50000; ++i) {
    keys[static_cast<size_t>(i)] = static_cast<int64_t>(gen());
    index.insert(keys[static_cast<size_t>(i)], i);
  }
  // Present and absent keys mixed, sentinels included.
  std::vector<int64_t> probe;
  for (int64_t i = 0; i < 100000; ++i) {
    probe.push_back(i % 2 == 0 ? keys[static_cast<size_t>(gen() % keys.size())]
                               : static_cast<int64_t>(gen()));
  }
  probe.push_back(kMin);
  probe.push_back(kMin + 1);
  std::vector<int64_t> want(probe.size());
  for (size_t i = 0; i < probe.size(); ++i) want[i] = index.find(probe[i]);
  CHECK(std::count(want.begin(), want.end(), kAbsent) >= 50000);
  std::vector<std::vector<int64_t>> got(4, std::vector<int64_t>(probe.size(), -7));
  std::vector<std::thread> threads;
  for (auto& out : got) {
    threads.emplace_back([&index, &probe, &out] {
      for (int rep = 0; rep < 5; ++rep) index.find(probe.data(), std::ssize(probe), out.data());
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& out : got) CHECK(out == want);
}

TEST_CASE("key hash: spreads neighbouring keys; shards are balanced and independent of slots",
          "[hash_index]") {
  // Known values of the finalizer pin it: the CUDA index must probe the
  // same entries.
  CHECK(key_hash(0) == 0);
  CHECK(key_hash(1) == 0xb456bcfc34c2cb2cull);
  constexpr int64_t kShards = 7;
  std::vector<int64_t> per_shard(kShards);
  std::vector<int64_t> low_bits(16);
  for (int64_t key = 0; key < 700000; ++key) {
    const int64_t s = key_shard(static_cast<uint64_t>(key), kShards);
    REQUIRE(s >= 0);
    REQUIRE(s < kShards);
    ++per_shard[static_cast<size_t>(s)];
    if (s == 3) ++low_bits[key_hash(static_cast<uint64_t>(key)) & 15];
  }
  for (int64_t count : per_shard) CHECK(std::abs(count - 100000) < 2000);
  // Within one shard, the position bits are still uniform.
  for (int64_t count : low_bits) CHECK(std::abs(count - per_shard[3] / 16) < 600);
}
