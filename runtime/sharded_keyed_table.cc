#include "runtime/sharded_keyed_table.h"

#include <algorithm>
#include <mutex>
#include <tuple>

#include "runtime/keyed_shards.h"
#include "runtime/row_gather.h"
#include "runtime/scatter_by_op.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

namespace varstate::internal {
ShardedKeyedTable::ShardedKeyedTable(std::string name, DType key_dtype,
                                     const std::vector<Device*>& devices, KeyedPolicy policy)
    : KeyedTable(name, key_dtype, policy) {
  const auto count = static_cast<int64_t>(devices.size());
  // A cap is one budget for every shard's keys.
  std::shared_ptr<KeyedBudget> budget;
  if (policy.max_rows > 0) budget = std::make_shared<KeyedBudget>();
  for (int64_t s = 0; s < count; ++s) {
    Device& device = *devices[static_cast<size_t>(s)];
    shards_.push_back(std::make_unique<DeviceKeyedTable>(name + " (shard " + std::to_string(s) +
                                                             " of " + std::to_string(count) +
                                                             ", on " + device.name() + ")",
                                                         key_dtype, device, policy, budget));
  }
  shard_generations_.assign(shards_.size(), 0);
}

std::vector<Device*> ShardedKeyedTable::devices() const {
  std::vector<Device*> out;
  for (const auto& s : shards_) out.push_back(&s->device());
  return out;
}

KeySplit ShardedKeyedTable::split(std::span<const int64_t> keys) const {
  return split_keys(keys, static_cast<int64_t>(shards_.size()));
}

void ShardedKeyedTable::make_room(const KeySplit& parts, bool admit) {
  const int64_t cap = policy().max_rows;
  // Room for every key being new: nothing to count (no probe on the hot
  // path of a table below its cap).
  int64_t calls_keys = 0;
  for (const auto& k : parts.keys) calls_keys += static_cast<int64_t>(k.size());
  if (cap <= 0 || size() + calls_keys <= cap) return;
  int64_t fresh = 0;
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (!parts.keys[s].empty()) fresh += shards_[s]->count_new(parts.keys[s], admit);
  }
  const int64_t live = size();
  const int64_t over = keys_over_cap(name(), policy(), live, fresh, shards_.size(), "shards");
  if (over <= 0) return;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> candidates;
  for (size_t s = 0; s < shards_.size(); ++s) {
    candidates.push_back(shards_[s]->eviction_candidates(parts.keys[s], over));
  }
  const std::vector<std::vector<int64_t>> evict =
      pick_victims(name(), policy(), live, fresh, "shards", candidates, over);
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (!evict[s].empty()) shards_[s]->erase(evict[s]);
  }
}

int ShardedKeyedTable::add_member(std::string op_name, DType dtype, TensorShape row_shape,
                                  KeyedRowInit init) {
  int member = 0;
  for (const auto& s : shards_) member = s->add_member(op_name, dtype, row_shape, init);
  return member;
}

int64_t ShardedKeyedTable::size() const {
  int64_t n = 0;
  for (const auto& s : shards_) n += s->size();
  return n;
}

void ShardedKeyedTable::tick() {
  for (const auto& s : shards_) s->tick();
}

int64_t ShardedKeyedTable::expire() {
  int64_t n = 0;
  for (const auto& s : shards_) n += s->expire();
  return n;
}

void ShardedKeyedTable::reserve(int64_t rows) {
  // The keys spread evenly, give or take: an eighth more each.
  const auto count = static_cast<int64_t>(shards_.size());
  const int64_t each = (rows + count - 1) / count;
  for (const auto& s : shards_) s->reserve(each + each / 8);
}

int64_t ShardedKeyedTable::memory_bytes() const {
  int64_t n = 0;
  for (const auto& s : shards_) n += s->memory_bytes();
  return n;
}

uint64_t ShardedKeyedTable::version(int member) const {
  uint64_t v = 0;
  for (const auto& s : shards_) v += s->version(member);
  return v;
}

Tensor ShardedKeyedTable::gather(int member, std::span<const int64_t> keys, bool insert,
                                 const Tensor& absent_row) {
  const KeySplit parts = split(keys);
  if (insert) make_room(parts, /*admit=*/true);
  Device& out_device = device();
  const TensorShape shape =
      TensorShape({static_cast<int64_t>(keys.size())}).concatenate(row_shape(member));
  if (keys.empty()) return Tensor(dtype(member), shape, out_device);
  Tensor out;
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (parts.keys[s].empty()) continue;
    const Tensor rows = shards_[s]->gather(member, parts.keys[s], insert, absent_row);
    if (parts.keys[s].size() == keys.size()) return rows.on(out_device);
    if (!out.valid()) out = Tensor(dtype(member), shape, out_device);
    scatter_tensor(kernels::ScatterOp::kUpdate, out,
                   Tensor::from_vector(parts.positions[s]).on(out_device), rows.on(out_device), {},
                   /*indices_in_range=*/true);
  }
  return out;
}

void ShardedKeyedTable::scatter(kernels::ScatterOp op, int member, std::span<const int64_t> keys,
                                const Tensor& updates, const std::string& who) {
  const KeySplit parts = split(keys);
  make_room(parts, /*admit=*/true);
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (parts.keys[s].empty()) continue;
    const Tensor mine = updates.rank() == 0 || parts.keys[s].size() == keys.size()
                            ? updates
                            : gather_rows(updates, parts.positions[s]);
    shards_[s]->scatter(op, member, parts.keys[s], mine.on(shards_[s]->device()), who);
  }
}

void ShardedKeyedTable::insert(std::span<const int64_t> keys, const Tensor& values) {
  const KeySplit parts = split(keys);
  make_room(parts, /*admit=*/false);
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (parts.keys[s].empty()) continue;
    shards_[s]->insert(parts.keys[s], gather_rows(values, parts.positions[s]));
  }
}

int64_t ShardedKeyedTable::erase(std::span<const int64_t> keys) {
  const KeySplit parts = split(keys);
  int64_t n = 0;
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (!parts.keys[s].empty()) n += shards_[s]->erase(parts.keys[s]);
  }
  return n;
}

void ShardedKeyedTable::clear() {
  for (const auto& s : shards_) s->clear();
}

void ShardedKeyedTable::reset_member(int member) {
  for (const auto& s : shards_) s->reset_member(member);
}

void ShardedKeyedTable::update_rows(const std::vector<int>& members, std::span<const int64_t> keys,
                                    bool all_rows, const RowsFn& fn) {
  const KeySplit parts = split(keys);
  make_room(parts, /*admit=*/true);
  // Every shard counts the step, with keys or not.
  for (size_t s = 0; s < shards_.size(); ++s) {
    const std::vector<int64_t>& positions = parts.positions[s];
    shards_[s]->update_rows(
        members, parts.keys[s], all_rows,
        [&](std::vector<Tensor>& arenas, const Tensor& slots, const std::vector<int64_t>* kept) {
          if (kept == nullptr) return fn(arenas, slots, &positions);
          std::vector<int64_t> mine;
          mine.reserve(kept->size());
          for (int64_t k : *kept) mine.push_back(positions[static_cast<size_t>(k)]);
          fn(arenas, slots, &mine);
        });
  }
}

KeyedTable::Export ShardedKeyedTable::export_rows(const std::vector<int>& members) const {
  std::vector<Export> parts;
  for (const auto& s : shards_) parts.push_back(s->export_rows(members));
  return merge_exports(parts, members.size(), tracking());
}

void ShardedKeyedTable::set_update_history(const Tensor& keys, const Tensor& versions,
                                           const Tensor& counts) {
  const std::vector<int64_t> k = keys.to_vector<int64_t>();
  const KeySplit parts = split(k);
  for (size_t s = 0; s < shards_.size(); ++s) {
    shards_[s]->set_update_history(Tensor::from_vector(parts.keys[s]),
                                   gather_rows(versions, parts.positions[s]),
                                   gather_rows(counts, parts.positions[s]));
  }
}

void ShardedKeyedTable::replace(const Tensor& keys, const std::vector<int>& members,
                                const std::vector<Tensor>& values) {
  const std::vector<int64_t> k = keys.to_vector<int64_t>();
  const KeySplit parts = split(k);
  if (policy().max_rows > 0 && static_cast<int64_t>(k.size()) > policy().max_rows) {
    throw ResourceExhaustedError(quoted(name()) + ": restoring " + std::to_string(k.size()) +
                                 " keys into a table capped at max_rows " +
                                 std::to_string(policy().max_rows));
  }
  // Every shard emptied first, so that no shard's new keys meet another's
  // old ones in the cap.
  for (const auto& s : shards_) s->clear();
  for (size_t s = 0; s < shards_.size(); ++s) {
    std::vector<Tensor> mine;
    for (const Tensor& v : values) mine.push_back(gather_rows(v, parts.positions[s]));
    shards_[s]->replace(Tensor::from_vector(parts.keys[s]), members, mine);
  }
}

void ShardedKeyedTable::write_present(int member, std::span<const int64_t> keys,
                                      const Tensor& rows) {
  const KeySplit parts = split(keys);
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (parts.keys[s].empty()) continue;
    shards_[s]->write_present(member, parts.keys[s], gather_rows(rows, parts.positions[s]));
  }
}

void ShardedKeyedTable::start_marking() {
  for (const auto& s : shards_) s->start_marking();
}

KeyedTable::Changes ShardedKeyedTable::take_changes(const std::vector<int>& members,
                                                    uint64_t last) {
  std::lock_guard lock(take_mu_);
  std::vector<Changes> parts;
  for (size_t s = 0; s < shards_.size(); ++s) {
    parts.push_back(shards_[s]->take_changes(members, shard_generations_[s]));
    shard_generations_[s] = parts.back().generation;
  }
  const bool complete = last == generation_;
  return join_changes(parts, complete, ++generation_, members.size(), tracking());
}

}  // namespace varstate::internal
