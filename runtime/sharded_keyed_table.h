// A hash-keyed table sharded by key over several devices
// (varstate/dynamic_variable.h's `devices`). Runtime-internal.
//
// Each shard is a DeviceKeyedTable on its device holding the keys that
// kernels::device_shard routes to it, with every member (variable and
// slots) of those keys. A call splits its keys by shard, in order (a
// repeated key stays in one shard, so duplicates keep their meaning), runs
// on each shard, and puts the rows it returns back in the keys' order on
// the first shard's device. Exports merge the shards in ascending key
// order, so a checkpoint does not depend on the sharding and restores into
// any number of shards (the keys are routed again). Admission counts are
// exact (a key always meets the same shard); a cap holds for the shards'
// keys together (a KeyedBudget they share), a shard that needs room evicting
// its own least recently (or frequently) updated keys; every shard counts
// every training step.
//
// Thread safety: as DeviceKeyedTable's, per shard; a call spanning shards
// is not atomic across them (each shard's part is).
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "runtime/keyed_shards.h"
#include "runtime/keyed_table.h"

namespace varstate::internal {

class ShardedKeyedTable final : public KeyedTable {
 public:
  // One shard per device of `devices` (two or more), in order.
  ShardedKeyedTable(std::string name, DType key_dtype, const std::vector<Device*>& devices,
                    KeyedPolicy policy);

  Device& device() const override { return shards_.front()->device(); }
  std::vector<Device*> devices() const override;
  int add_member(std::string op_name, DType dtype, TensorShape row_shape,
                 KeyedRowInit init) override;
  int64_t size() const override;
  int64_t step() const override { return shards_.front()->step(); }
  void tick() override;
  int64_t expire() override;
  void reserve(int64_t rows) override;
  int64_t memory_bytes() const override;
  DType dtype(int member) const override { return shards_.front()->dtype(member); }
  const TensorShape& row_shape(int member) const override {
    return shards_.front()->row_shape(member);
  }
  const std::string& member_name(int member) const override {
    return shards_.front()->member_name(member);
  }
  uint64_t version(int member) const override;
  Tensor gather(int member, std::span<const int64_t> keys, bool insert,
                const Tensor& absent_row = Tensor()) override;
  void scatter(kernels::ScatterOp op, int member, std::span<const int64_t> keys,
               const Tensor& updates, const std::string& who) override;
  void insert(std::span<const int64_t> keys, const Tensor& values) override;
  int64_t erase(std::span<const int64_t> keys) override;
  void clear() override;
  void reset_member(int member) override;
  void update_rows(const std::vector<int>& members, std::span<const int64_t> keys, bool all_rows,
                   const RowsFn& fn) override;
  Export export_rows(const std::vector<int>& members) const override;
  void set_update_history(const Tensor& keys, const Tensor& versions,
                          const Tensor& counts) override;
  void replace(const Tensor& keys, const std::vector<int>& members,
               const std::vector<Tensor>& values) override;
  void write_present(int member, std::span<const int64_t> keys, const Tensor& rows) override;
  void start_marking() override;
  Changes take_changes(const std::vector<int>& members, uint64_t last) override;
  Tensor initial_rows(int member, std::span<const int64_t> keys) const override {
    return shards_.front()->initial_rows(member, keys);
  }

 private:
  // Keys split by shard (runtime/keyed_shards.h).
  KeySplit split(std::span<const int64_t> keys) const;
  // Before a call that may insert `parts` (admitting with `admit`): under
  // a cap, evicts the keys the whole table would (the least recently or
  // frequently updated outside the call's keys, over every shard), so that
  // each shard then has room; ResourceExhaustedError, nothing changed, when
  // the new keys cannot fit (eviction off, or too few keys outside them).
  void make_room(const KeySplit& parts, bool admit);

  std::vector<std::unique_ptr<DeviceKeyedTable>> shards_;
  // take_changes: the generation handed out, and each shard's of the last
  // take.
  std::mutex take_mu_;
  uint64_t generation_ = 0;
  std::vector<uint64_t> shard_generations_;
};

}  // namespace varstate::internal
