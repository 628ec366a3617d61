#include "runtime/keyed_shards.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <tuple>

#include "kernels/key_hash.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

namespace varstate::internal {

KeySplit split_keys(std::span<const int64_t> keys, int64_t count) {
  KeySplit out;
  out.keys.resize(static_cast<size_t>(count));
  out.positions.resize(static_cast<size_t>(count));
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto s =
        static_cast<size_t>(kernels::device_shard(static_cast<uint64_t>(keys[i]), count));
    out.keys[s].push_back(keys[i]);
    out.positions[s].push_back(static_cast<int64_t>(i));
  }
  return out;
}

KeyedTable::Export merge_exports(std::vector<KeyedTable::Export>& parts, size_t members,
                                 bool tracking) {
  // (key, shard, row) for every row of every shard, sorted by key.
  std::vector<std::tuple<int64_t, uint32_t, int64_t>> order;
  for (size_t s = 0; s < parts.size(); ++s) {
    const std::vector<int64_t> keys = parts[s].keys.to_vector<int64_t>();
    for (size_t r = 0; r < keys.size(); ++r) {
      order.emplace_back(keys[r], static_cast<uint32_t>(s), static_cast<int64_t>(r));
    }
  }
  std::sort(order.begin(), order.end());
  const auto n = static_cast<int64_t>(order.size());
  KeyedTable::Export out;
  std::vector<int64_t> keys(order.size());
  for (size_t i = 0; i < order.size(); ++i) keys[i] = std::get<0>(order[i]);
  out.keys = Tensor::from_vector(keys);
  // Each tensor of rows by key: the shards' rows copied in the merged order.
  Device& host = DeviceManager::instance().cpu();
  auto merged = [&](const std::function<const Tensor&(const KeyedTable::Export&)>& of) {
    const Tensor& first = of(parts.front());
    Tensor t(first.dtype(), TensorShape({n}).concatenate(first.shape().tail(1)), host);
    const size_t row = n == 0 ? 0 : t.nbytes() / static_cast<size_t>(n);
    auto* dst = static_cast<std::byte*>(t.raw_data());
    for (size_t i = 0; i < order.size(); ++i) {
      const auto* src = static_cast<const std::byte*>(of(parts[std::get<1>(order[i])]).raw_data());
      std::memcpy(dst + i * row, src + static_cast<size_t>(std::get<2>(order[i])) * row, row);
    }
    return t;
  };
  for (size_t m = 0; m < members; ++m) {
    out.values.push_back(
        merged([m](const KeyedTable::Export& e) -> const Tensor& { return e.values[m]; }));
  }
  if (tracking) {
    out.versions = merged([](const KeyedTable::Export& e) -> const Tensor& { return e.versions; });
    out.counts = merged([](const KeyedTable::Export& e) -> const Tensor& { return e.counts; });
  }
  return out;
}

KeyedTable::Changes join_changes(std::vector<KeyedTable::Changes>& parts, bool complete,
                                 uint64_t generation, size_t members, bool tracking) {
  KeyedTable::Changes out;
  out.generation = generation;
  out.complete = complete;
  for (const KeyedTable::Changes& c : parts) out.complete = out.complete && c.complete;
  if (!out.complete) return out;
  std::vector<KeyedTable::Export> written;
  for (KeyedTable::Changes& c : parts) {
    written.push_back(std::move(c.written));
    out.erased.insert(out.erased.end(), c.erased.begin(), c.erased.end());
  }
  out.written = merge_exports(written, members, tracking);
  std::sort(out.erased.begin(), out.erased.end());
  return out;
}

namespace {

[[noreturn]] void refuse_room(const std::string& table, const KeyedPolicy& policy, int64_t live,
                              int64_t fresh, size_t shards, const char* kind,
                              const std::string& why) {
  throw ResourceExhaustedError(
      quoted(table) + ": " + std::to_string(fresh) + " new keys do not fit under max_rows " +
      std::to_string(policy.max_rows) + " (the table holds " + std::to_string(live) +
      " keys over " + std::to_string(shards) + " " + kind + "; " + why + "); nothing was inserted");
}

}  // namespace

int64_t keys_over_cap(const std::string& table, const KeyedPolicy& policy, int64_t live,
                      int64_t fresh, size_t shards, const char* kind) {
  const int64_t over = live + fresh - policy.max_rows;
  if (fresh == 0 || over <= 0) return 0;
  if (policy.evict == KeyedPolicy::Evict::kNone) {
    refuse_room(table, policy, live, fresh, shards, kind, "eviction is off");
  }
  return over;
}

std::vector<std::vector<int64_t>> pick_victims(
    const std::string& table, const KeyedPolicy& policy, int64_t live, int64_t fresh,
    const char* kind, const std::vector<std::vector<std::pair<int64_t, int64_t>>>& candidates,
    int64_t over) {
  // Each shard's best, then the best of those.
  std::vector<std::tuple<int64_t, int64_t, size_t>> victims;
  for (size_t s = 0; s < candidates.size(); ++s) {
    for (const auto& [metric, key] : candidates[s]) victims.emplace_back(metric, key, s);
  }
  if (static_cast<int64_t>(victims.size()) < over) {
    refuse_room(table, policy, live, fresh, candidates.size(), kind,
                "only " + std::to_string(victims.size()) + " of them are outside this call's keys");
  }
  std::partial_sort(victims.begin(), victims.begin() + over, victims.end());
  std::vector<std::vector<int64_t>> evict(candidates.size());
  for (int64_t v = 0; v < over; ++v) {
    const auto& [metric, key, s] = victims[static_cast<size_t>(v)];
    evict[s].push_back(key);
  }
  return evict;
}

}  // namespace varstate::internal
