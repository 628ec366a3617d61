// The rows of a hash-keyed variable (varstate/dynamic_variable.h) and of its
// optimizer slots. Runtime-internal.
//
// One key index serves every member of the table: member 0 is the
// variable, the others are its slots, so a slot's rows are created and
// erased with the variable's keys. The index maps key -> arena slot
// (kernels/cpu/hash_index.h), in shards chosen by kernels/key_hash.h's
// key_shard, one per pool thread, so that a batch of new keys is inserted
// by every thread. Each member keeps its rows in an arena, a dense tensor of
// `capacity` rows on the table's device (CPU or GPU); row operations
// resolve keys to slots on the host, then run the dense kernels (gather,
// scatter, training ops) on the arena rows at those slots. Rows never move
// within an arena; an arena grows by a copy into a larger one under the
// exclusive lock. A KeyedPolicy may hold keys back until seen k times, cap
// the live keys (evicting the least recently or frequently updated) and
// expire keys not updated for T training steps.
//
// A new key's row in each member comes from that member's KeyedRowInit:
// a constant, or a seeded random row that depends only on the seeds and the
// key (the random op's Philox stream with the key added to its counter's
// high 64 bits, i.e. seed2 + key), so the same key gets the same initial
// row on every device and shard, in every run.
//
// Thread safety: every member function may be called concurrently. Lookups,
// updates and training steps of keys already present run under a shared
// lock (in parallel; updates of one key race as the dense variables' do
// without use_locking); inserts, erasures, evictions and growth take the
// lock exclusively.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/common.h"
#include "kernels/cpu/hash_index.h"
#include "varstate/device.h"
#include "varstate/tensor.h"
#include "varstate/tensor_shape.h"

namespace varstate::internal {

// The value a new key's row starts with in one member.
struct KeyedRowInit {
  enum class Kind {
    kConstant,
    kUniform,
    kNormal,
    kTruncatedNormal
  };
  Kind kind = Kind::kConstant;
  // Host scalars of the member's dtype: the constant (a); minval and maxval;
  // mean and stddev.
  Tensor a;
  Tensor b;
  uint64_t seed = 0;
  uint64_t seed2 = 0;
};

// Which keys a table holds (varstate/dynamic_variable.h's options).
struct KeyedPolicy {
  // Sightings in training before a key gets a row (1: at once).
  int64_t admit_after = 1;
  // Live keys at most (0: no cap), and what makes room for new ones.
  int64_t max_rows = 0;
  enum class Evict {
    kNone,
    kLeastRecentlyUpdated,
    kLeastFrequentlyUpdated
  };
  Evict evict = Evict::kLeastRecentlyUpdated;
  // Training steps without an update after which expire() erases a key
  // (0: never).
  int64_t expire_after = 0;
};

class KeyedTable {
 public:
  // `name`: the variable's op name, for messages.
  KeyedTable(std::string name, DType key_dtype, Device& device, KeyedPolicy policy = {});
  KeyedTable(const KeyedTable&) = delete;
  KeyedTable& operator=(const KeyedTable&) = delete;

  // A member with rows of `row_shape` and `dtype` (a float dtype); the keys
  // present get their initial rows now. Returns its number (0 first).
  int add_member(std::string op_name, DType dtype, TensorShape row_shape, KeyedRowInit init);

  const std::string& name() const { return name_; }
  DType key_dtype() const { return key_dtype_; }
  Device& device() const { return device_; }
  // Live keys now.
  int64_t size() const { return size_.load(std::memory_order_relaxed); }
  const KeyedPolicy& policy() const { return policy_; }
  // Training steps so far: update_rows calls and tick()s.
  int64_t step() const { return clock_.load(std::memory_order_relaxed); }
  // Counts a training step that updated the table another way (sparse
  // gradient descent's scatter).
  void tick() { clock_.fetch_add(1, std::memory_order_relaxed); }
  // Erases the keys no training step updated in the last
  // policy().expire_after steps (and forgets candidates unseen as long);
  // returns how many keys it erased. 0 when expiry is off.
  int64_t expire();
  // Room for `rows` live keys without growing the arenas or the index.
  void reserve(int64_t rows);
  // Bytes held: the arenas, the index and the marks.
  int64_t memory_bytes() const;
  DType dtype(int member) const;
  const TensorShape& row_shape(int member) const;
  const std::string& member_name(int member) const;
  uint64_t version(int member) const;

  // Rows of `keys` in `member`, [keys.size()] + row shape, on the device.
  // With `insert` (training), absent keys are admitted (the policy's
  // sightings and cap; ResourceExhaustedError when the cap leaves no room
  // and nothing may be evicted, nothing changed) and get their initial rows
  // in every member. An absent key not admitted, or any absent key without
  // `insert`, reads `absent_row` when it is valid (a host tensor of the row
  // shape, or a scalar), else its initial row.
  Tensor gather(int member, std::span<const int64_t> keys, bool insert,
                const Tensor& absent_row = Tensor());
  // member[keys] (op)= updates ([n] + row shape, or a scalar; the
  // member's dtype, on any device): absent keys are admitted first (as a
  // training gather), then the scatter kernel runs on their slots
  // (duplicates as the dense scatter treats them); the updates of keys not
  // admitted are dropped. The caller validated the arguments.
  void scatter(kernels::ScatterOp op, int member, std::span<const int64_t> keys,
               const Tensor& updates, const std::string& who);
  // Inserts or overwrites the rows of `keys` in member 0 with `values`
  // ([n] + row shape, host; a repeated key keeps its last row); new keys
  // get their slot rows initialized.
  void insert(std::span<const int64_t> keys, const Tensor& values);
  // Removes the keys present among `keys` from every member; returns how
  // many were removed.
  int64_t erase(std::span<const int64_t> keys);
  // Removes every key.
  void clear();
  // Rewrites the rows of every key of `member` with its initial rows.
  void reset_member(int member);

  // The training ops in place: runs fn(arenas, slots) with the arenas of
  // `members` and `slots` (int64 [keys.size()] on the device) the rows of
  // `keys`, absent ones inserted first, under the table's lock (shared
  // when every key was present, so updates of other keys run meanwhile);
  // then marks those rows (every live row with `all_rows`) and bumps the
  // members' versions.
  // Keys not admitted are left out: then `kept` holds the positions in
  // `keys` of the slots' keys (else it is null), for the caller to pick the
  // matching gradient rows. Advances step().
  void update_rows(const std::vector<int>& members, std::span<const int64_t> keys, bool all_rows,
                   const std::function<void(std::vector<Tensor>& arenas, const Tensor& slots,
                                            const std::vector<int64_t>* kept)>& fn);

  // Every key, ascending, as an int64 host tensor [n], and each of
  // `members`' rows in that order ([n] + row shape, host), taken together
  // under one lock.
  // A tracking table (capped or expiring) also gives each key's last
  // update step and update count (int64 [n], host; invalid otherwise).
  struct Export {
    Tensor keys;
    std::vector<Tensor> values;
    Tensor versions;
    Tensor counts;
  };
  Export export_rows(const std::vector<int>& members) const;
  // Whether rows carry update steps and counts (a cap or expiry).
  bool tracking() const { return tracking_; }
  // Sets the update step and count of each of `keys` present (host int64
  // [n] each, as export_rows gives them); the step clock moves up to the
  // latest step. A no-op when not tracking.
  void set_update_history(const Tensor& keys, const Tensor& versions, const Tensor& counts);
  // Replaces every key and row: `keys` (distinct, host int64 [n]) and, for
  // each member k of `members`, values[k] ([n] + row shape, host); members
  // not listed get their initial rows.
  void replace(const Tensor& keys, const std::vector<int>& members,
               const std::vector<Tensor>& values);

  // Overwrites `member`'s rows of those of `keys` the table holds with
  // their rows of `rows` (host, [keys.size()] + row shape); other keys are
  // skipped.
  void write_present(int member, std::span<const int64_t> keys, const Tensor& rows);

  // Turns on the change marks: from now on writes mark the keys they
  // touch and erasures record the key. Idempotent.
  void start_marking();
  // The changes since the last take, for incremental saves, taken together
  // under the exclusive lock and cleared: the keys written since (inserted,
  // updated, trained, restored; ascending) with each of `members`' rows of
  // them and, when tracking, their update history; and the keys erased
  // since (ascending; a key erased then inserted again is in both).
  // `complete` is false, and nothing but `generation` is given, on the
  // first take (it turns the marks on) and when `last` is not the
  // generation the previous take returned (another saver took the changes
  // in between): the caller then saves the table whole.
  struct Changes {
    bool complete = false;
    uint64_t generation = 0;  // pass to the next take
    Export written;
    std::vector<int64_t> erased;
  };
  Changes take_changes(const std::vector<int>& members, uint64_t last);

  // The initial rows of `keys` in `member`, [n] + row shape, on the host.
  Tensor initial_rows(int member, std::span<const int64_t> keys) const;

 private:
  struct Member {
    std::string op_name;
    DType dtype;
    TensorShape row_shape;
    KeyedRowInit init;
    Tensor arena;  // [capacity] + row_shape on the device
    std::atomic<uint64_t> version{0};
  };

  // slots[i] = the slot of keys[i], or kAbsent, for i in [0, n), entries
  // prefetched ahead. Caller holds mu_.
  void find_range(const int64_t* keys, int64_t n, int64_t* slots) const;
  // Slots of `keys` (kAbsent when absent). Caller holds mu_.
  std::vector<int64_t> find(std::span<const int64_t> keys) const;
  // Slots of `keys`, absent ones inserted and initialized in every member
  // but `skip_init` (whose new rows the caller writes). With `admit`, the
  // policy decides which absent keys get rows (the others stay kAbsent)
  // and makes room under the cap. Caller holds mu_ exclusively.
  std::vector<int64_t> find_or_insert(std::span<const int64_t> keys, int skip_init = -1,
                                      bool admit = false);
  // The policy's part of find_or_insert: marks the positions of absent keys
  // not admitted kRejected, counting their sightings, and evicts keys not in
  // the batch to make room under the cap; ResourceExhaustedError first,
  // with nothing changed, when there is no room.
  void admit(std::span<const int64_t> keys, std::vector<int64_t>& slots, bool admit);
  // Erases the key of live slot `slot`. Caller holds mu_ exclusively.
  void erase_slot(int64_t key, int64_t slot);
  // Records an update of `slots` at the current step (capped or expiring
  // tables).
  void touch(std::span<const int64_t> slots);
  // Rows of `keys` at `slots`, absent keys (kAbsent) reading `absent_row`
  // or their initial rows. Caller holds mu_.
  Tensor compose_rows(const Member& m, int member, std::span<const int64_t> keys,
                      const std::vector<int64_t>& slots, const Tensor& absent_row) const;
  // Writes m's constant initial value to the rows `slots` (CPU arenas).
  void fill_rows(Member& m, std::span<const int64_t> slots);
  // Room for `more` rows beyond the slots in use (arenas grown by half, or
  // to what is needed). Caller holds mu_ exclusively.
  void reserve_rows(int64_t more);
  // Arenas (and marks) of `capacity` rows, the rows kept. Caller holds mu_
  // exclusively.
  void grow_to(int64_t capacity);
  // Writes rows (host, [slots.size()] + row shape) at `slots` of a member.
  void write_rows(Member& m, std::span<const int64_t> slots, const Tensor& rows);
  Tensor read_rows(const Member& m, std::span<const int64_t> slots) const;
  // The CPU lookup of keys all present: their rows of `m` into `out`
  // ([keys.size()] + row shape, host); false when a key is absent (`out`
  // then holds some rows). Caller holds mu_.
  bool gather_present(const Member& m, std::span<const int64_t> keys, Tensor& out) const;
  void mark(std::span<const int64_t> slots);
  // Removes every key (recorded as erased when marking). Caller holds mu_
  // exclusively.
  void drop_keys();
  Tensor slot_tensor(std::span<const int64_t> slots) const;
  // The export of `entries` ((key, slot), ascending by key). Caller holds
  // mu_.
  Export export_entries(const std::vector<int>& members,
                        const std::vector<std::pair<int64_t, int64_t>>& entries) const;

  const std::string name_;
  const DType key_dtype_;
  Device& device_;

  mutable std::shared_mutex mu_;
  kernels::cpu::HashIndex& shard_of(int64_t key) {
    return shards_[static_cast<size_t>(
        kernels::key_shard(static_cast<uint64_t>(key), num_shards_))];
  }
  const kernels::cpu::HashIndex& shard_of(int64_t key) const {
    return shards_[static_cast<size_t>(
        kernels::key_shard(static_cast<uint64_t>(key), num_shards_))];
  }
  // fn(key, slot) for every live key.
  template <typename Fn>
  void for_each_key(Fn&& fn) const {
    for (const auto& shard : shards_) shard.for_each(fn);
  }
  int64_t live_keys() const;

  const int64_t num_shards_;
  std::vector<kernels::cpu::HashIndex> shards_;
  std::vector<std::unique_ptr<Member>> members_;
  std::vector<int64_t> free_;  // freed slots
  int64_t next_slot_ = 0;      // slots [next_slot_, capacity) never used
  int64_t capacity_ = 0;
  std::atomic<int64_t> size_{0};

  const KeyedPolicy policy_;
  // Per slot, when tracking (a cap or expiry): the step of its last update
  // and its update count. Written under either lock.
  bool tracking_ = false;
  std::unique_ptr<std::atomic<int64_t>[]> last_step_;
  std::unique_ptr<std::atomic<int64_t>[]> updates_;
  std::atomic<int64_t> clock_{0};
  // Keys seen fewer than admit_after times: (sightings, last step seen).
  std::unordered_map<int64_t, std::pair<int64_t, int64_t>> candidates_;

  // Dirty keys: a mark per slot, set by writers under either lock; the
  // keys erased since the last take; that take's generation.
  bool marking_ = false;
  std::unique_ptr<std::atomic<uint8_t>[]> marks_;
  std::vector<int64_t> erased_;
  static constexpr size_t kMinErasedLimit = size_t{1} << 16;
  size_t erased_limit_ = kMinErasedLimit;
  uint64_t generation_ = 0;
};

}  // namespace varstate::internal
