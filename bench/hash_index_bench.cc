// The keyed variables' CPU index (kernels/cpu/hash_index.h) against
// std::unordered_map<int64_t, int64_t> doing the same work, interleaved,
// medians of the pairs:
//   insert    1M new random keys into an empty index (grown as it goes,
//             reserved ahead, and in batch calls of 65,536 keys);
//   find      65,536 keys of a 1M-key index, uniform and Zipf(1.1) over its
//             keys, one batch call (the index prefetches ahead);
//   churn     65,536 erasures then 65,536 inserts of new keys, in a
//             1M-key index.
// Single-threaded: the index is one shard's; a keyed table runs shards on
// the pool.
//   bench_hash_index [--reps N] [--out F.json] [--machine NAME]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/hash_index.h"
#include "timing.h"

using varstate::bench::median;
using varstate::bench::seconds_of_call;
using varstate::kernels::cpu::HashIndex;

namespace {

constexpr int64_t kKeys = 1 << 20;
constexpr int64_t kBatch = 65536;

std::vector<int64_t> random_keys(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<int64_t> keys(static_cast<size_t>(n));
  for (int64_t& k : keys) k = static_cast<int64_t>(gen());
  return keys;
}

// kBatch keys drawn from `keys` (random keys), uniform or Zipf(1.1) over
// their order.
std::vector<int64_t> draws(const std::vector<int64_t>& keys, bool zipf, uint64_t seed) {
  std::vector<int64_t> out =
      varstate::bench::random_positions(std::ssize(keys), kBatch, zipf, seed, /*shuffled=*/false);
  for (int64_t& k : out) k = keys[static_cast<size_t>(k)];
  return out;
}

struct Result {
  std::string name;
  int64_t ops;
  double index_s, map_s;
};

Result pair(const std::string& name, int64_t ops, int reps, const std::function<void()>& index,
            const std::function<void()>& map) {
  std::vector<double> a, b;
  index();
  map();
  for (int r = 0; r < reps; ++r) {
    a.push_back(seconds_of_call(index));
    b.push_back(seconds_of_call(map));
  }
  const Result res{name, ops, median(a), median(b)};
  std::printf(
      "%-22s index %8.3f ms (%6.1f M ops/s)  unordered_map %8.3f ms (%6.1f M ops/s)  %.2fx\n",
      name.c_str(), res.index_s * 1e3, static_cast<double>(ops) / res.index_s / 1e6,
      res.map_s * 1e3, static_cast<double>(ops) / res.map_s / 1e6, res.map_s / res.index_s);
  std::fflush(stdout);
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  const varstate::bench::PlainArgs args =
      varstate::bench::parse_plain_args(argc, argv, "bench_hash_index", 7);
  const int reps = args.reps;
  const std::string& out = args.out;
  const std::string& machine = args.machine;
  const std::vector<int64_t> keys = random_keys(kKeys, 1);
  std::vector<Result> results;
  int64_t sink = 0;

  for (const bool reserved : {false, true}) {
    results.push_back(pair(
        reserved ? "insert_1M_reserved" : "insert_1M_growing", kKeys, reps,
        [&] {
          HashIndex index(reserved ? kKeys : 0);
          for (int64_t i = 0; i < kKeys; ++i) index.insert(keys[static_cast<size_t>(i)], i);
          sink += index.size();
        },
        [&] {
          std::unordered_map<int64_t, int64_t> map;
          if (reserved) map.reserve(static_cast<size_t>(kKeys));
          for (int64_t i = 0; i < kKeys; ++i) map.emplace(keys[static_cast<size_t>(i)], i);
          sink += static_cast<int64_t>(map.size());
        }));
  }

  // The batch insert (prefetching ahead), in batches of 65,536 keys.
  std::vector<int64_t> free_slots(static_cast<size_t>(kBatch)), batch_slots(free_slots.size());
  results.push_back(pair(
      "insert_1M_batches", kKeys, reps,
      [&] {
        HashIndex index;
        for (int64_t b = 0; b < kKeys; b += kBatch) {
          for (int64_t j = 0; j < kBatch; ++j) free_slots[static_cast<size_t>(j)] = b + j;
          index.insert(keys.data() + b, kBatch, free_slots.data(), batch_slots.data());
        }
        sink += index.size();
      },
      [&] {
        std::unordered_map<int64_t, int64_t> map;
        for (int64_t i = 0; i < kKeys; ++i) map.emplace(keys[static_cast<size_t>(i)], i);
        sink += static_cast<int64_t>(map.size());
      }));

  HashIndex index(kKeys);
  std::unordered_map<int64_t, int64_t> map;
  map.reserve(static_cast<size_t>(kKeys));
  for (int64_t i = 0; i < kKeys; ++i) {
    index.insert(keys[static_cast<size_t>(i)], i);
    map.emplace(keys[static_cast<size_t>(i)], i);
  }
  std::vector<int64_t> slots(static_cast<size_t>(kBatch));
  for (const bool zipf : {false, true}) {
    const std::vector<int64_t> batch = draws(keys, zipf, 2);
    results.push_back(pair(
        zipf ? "find_65536_zipf" : "find_65536_uniform", kBatch, reps,
        [&] { index.find(batch.data(), kBatch, slots.data()); },
        [&] {
          for (int64_t i = 0; i < kBatch; ++i) {
            slots[static_cast<size_t>(i)] = map.find(batch[static_cast<size_t>(i)])->second;
          }
        }));
  }

  // Each rep erases the batch of live keys it then replaces by new ones.
  const std::vector<int64_t> fresh = random_keys(kBatch * (reps + 1), 3);
  std::vector<int64_t> live_index(keys.begin(), keys.begin() + kBatch);
  std::vector<int64_t> live_map = live_index;
  size_t next_index = 0, next_map = 0;
  auto churn = [](auto erase, auto insert, std::vector<int64_t>& live,
                  const std::vector<int64_t>& fresh, size_t& next) {
    for (int64_t& k : live) {
      erase(k);
      k = fresh[next++];
      insert(k);
    }
  };
  results.push_back(pair(
      "churn_65536", 2 * kBatch, reps,
      [&] {
        churn([&](int64_t k) { index.erase(k); }, [&](int64_t k) { index.insert(k, 7); },
              live_index, fresh, next_index);
      },
      [&] {
        churn([&](int64_t k) { map.erase(k); }, [&](int64_t k) { map.emplace(k, 7); }, live_map,
              fresh, next_map);
      }));

  if (!out.empty()) {
    std::ofstream f(out);
    f << "{\n  \"context\": {\"machine\": \"" << machine
      << "\", \"threads\": 1, \"keys\": " << kKeys << ", \"batch\": " << kBatch
      << ", \"reps\": " << reps << "},\n  \"results\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      f << "    {\"case\": \"" << r.name << "\", \"ops\": " << r.ops
        << ", \"index_ms\": " << r.index_s * 1e3 << ", \"unordered_map_ms\": " << r.map_s * 1e3
        << ", \"index_Mops_per_s\": " << static_cast<double>(r.ops) / r.index_s / 1e6
        << ", \"index_over_unordered_map\": " << r.map_s / r.index_s << "}"
        << (i + 1 < results.size() ? ",\n" : "\n");
    }
    f << "  ]\n}\n";
  }
  return sink == 0 ? 1 : 0;
}
