// The rows of a hash-keyed variable (varstate/dynamic_variable.h) and of its
// optimizer slots. Runtime-internal.
//
// KeyedTable is the interface every user of a table sees (the storage, the
// training ops, the checkpoints); DeviceKeyedTable (below) holds a table on
// one device, ShardedKeyedTable (runtime/sharded_keyed_table.h) routes keys
// to DeviceKeyedTable shards on several. What follows describes a
// DeviceKeyedTable.
//
// One key index serves every member of the table: member 0 is the
// variable, the others are its slots, so a slot's rows are created and
// erased with the variable's keys. The index maps key -> arena slot
// (kernels/cpu/hash_index.h), in shards chosen by kernels/key_hash.h's
// key_shard, one per pool thread, so that a batch of new keys is inserted
// by every thread. Each member keeps its rows in an arena, a dense tensor of
// `capacity` rows on the table's device (CPU or GPU); row operations
// resolve keys to slots, then run the dense kernels (gather, scatter,
// training ops) on the arena rows at those slots. On a GPU the index is
// mirrored in device memory (runtime/device_key_index.h): a batch of keys
// all present is resolved there by a kernel; a batch with absent keys, and
// every change of the keys, goes through the host index, which the mirror
// follows. Rows never move
// within an arena; an arena grows under the exclusive lock, in place where
// its device can remap it (Device::grow: CPU arenas of 2 MiB and more),
// else by a copy into a larger one. A KeyedPolicy may hold keys back until seen k times, cap
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
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/common.h"
#include "kernels/cpu/hash_index.h"
#include "kernels/training_functors.h"
#include "runtime/device_key_index.h"
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

// A training op on a table's rows, as data: what a table whose rows live
// in another process (KeyedTable::remote()) sends to where they are. The
// op, its hyperparameters and its name for messages (TrainingKernel's,
// training/training_ops_internal.h), and the gradient's rows, [keys] + the
// row shape, in the order of the call's keys.
struct KeyedTrainingStep {
  kernels::TrainingOp op = kernels::TrainingOp::kGradientDescent;
  kernels::TrainingHyper hyper;
  bool deterministic = true;
  std::string who;
  Tensor values;
};

// A hash-keyed table: on one device (DeviceKeyedTable, below), sharded by
// key over several (ShardedKeyedTable, runtime/sharded_keyed_table.h), or
// held by parameter-server tasks (distributed/mpi_keyed_table.h).
// make_keyed_table picks the first two, a Cluster the third.
class KeyedTable {
 public:
  virtual ~KeyedTable() = default;
  KeyedTable(const KeyedTable&) = delete;
  KeyedTable& operator=(const KeyedTable&) = delete;

  // `name`: the variable's op name, for messages.
  const std::string& name() const { return name_; }
  DType key_dtype() const { return key_dtype_; }
  const KeyedPolicy& policy() const { return policy_; }
  // Whether rows carry update steps and counts (a cap or expiry).
  bool tracking() const { return policy_.max_rows > 0 || policy_.expire_after > 0; }
  // The device of the rows it returns: its own, or its first shard's.
  virtual Device& device() const = 0;
  // The devices of its shards, in order (its device alone when unsharded).
  virtual std::vector<Device*> devices() const = 0;

  // A member with rows of `row_shape` and `dtype` (a float dtype); the keys
  // present get their initial rows now. Returns its number (0 first).
  virtual int add_member(std::string op_name, DType dtype, TensorShape row_shape,
                         KeyedRowInit init) = 0;
  // Live keys now.
  virtual int64_t size() const = 0;
  // Training steps so far: update_rows calls and tick()s.
  virtual int64_t step() const = 0;
  // Counts a training step that updated the table another way (sparse
  // gradient descent's scatter).
  virtual void tick() = 0;
  // Erases the keys no training step updated in the last
  // policy().expire_after steps (and forgets candidates unseen as long);
  // returns how many keys it erased. 0 when expiry is off.
  virtual int64_t expire() = 0;
  // Room for `rows` live keys without growing the arenas or the index.
  virtual void reserve(int64_t rows) = 0;
  // Bytes held: the arenas, the index and the marks.
  virtual int64_t memory_bytes() const = 0;
  virtual DType dtype(int member) const = 0;
  virtual const TensorShape& row_shape(int member) const = 0;
  virtual const std::string& member_name(int member) const = 0;
  // Bumped by every change of the member's rows.
  virtual uint64_t version(int member) const = 0;

  // Rows of `keys` in `member`, [keys.size()] + row shape, on device().
  // With `insert` (training), absent keys are admitted (the policy's
  // sightings and cap; ResourceExhaustedError when the cap leaves no room
  // and nothing may be evicted, nothing changed) and get their initial rows
  // in every member. An absent key not admitted, or any absent key without
  // `insert`, reads `absent_row` when it is valid (a host tensor of the row
  // shape, or a scalar), else its initial row.
  virtual Tensor gather(int member, std::span<const int64_t> keys, bool insert,
                        const Tensor& absent_row = Tensor()) = 0;
  // member[keys] (op)= updates ([n] + row shape, or a scalar; the
  // member's dtype, on any device): absent keys are admitted first (as a
  // training gather), then the scatter kernel runs on their slots
  // (duplicates as the dense scatter treats them); the updates of keys not
  // admitted are dropped. The caller validated the arguments.
  virtual void scatter(kernels::ScatterOp op, int member, std::span<const int64_t> keys,
                       const Tensor& updates, const std::string& who) = 0;
  // For keys already in the memory of device() (int64 [n]): gather()'s
  // rows of `member` ([n] + row shape, on device()) when the table
  // resolves the keys where they are (with `insert`, only when every key
  // is present), else nullopt (the caller then reads the keys to the host
  // and calls gather(); nothing changed).
  virtual std::optional<Tensor> gather_device_keys(int member, const Tensor& keys, bool insert,
                                                   const Tensor& absent_row = Tensor()) {
    (void)member, (void)keys, (void)insert, (void)absent_row;
    return std::nullopt;
  }
  // The same for scatter(): true when done (keys found absent on the
  // device are read to the host and inserted there, with no second
  // lookup), false when nothing was done.
  virtual bool scatter_device_keys(kernels::ScatterOp op, int member, const Tensor& keys,
                                   const Tensor& updates, const std::string& who) {
    (void)op, (void)member, (void)keys, (void)updates, (void)who;
    return false;
  }
  // Inserts or overwrites the rows of `keys` in member 0 with `values`
  // ([n] + row shape, on the host, or on device() for a DeviceKeyedTable
  // on a GPU; a repeated key keeps its last row); new keys get their slot
  // rows initialized.
  virtual void insert(std::span<const int64_t> keys, const Tensor& values) = 0;
  // Removes the keys present among `keys` from every member; returns how
  // many were removed.
  virtual int64_t erase(std::span<const int64_t> keys) = 0;
  // Removes every key.
  virtual void clear() = 0;
  // Rewrites the rows of every key of `member` with its initial rows.
  virtual void reset_member(int member) = 0;

  // The training ops in place: runs fn(arenas, slots, kept) with the
  // arenas of `members` and `slots` (int64 on the arenas' device) the rows
  // of `keys`, absent ones inserted first, under the table's lock (shared
  // when every key was present, so updates of other keys run meanwhile);
  // then marks those rows (every live row with `all_rows`) and bumps the
  // members' versions. `kept`, when not null, holds the positions in
  // `keys` of the slots' keys (keys not admitted are left out; a sharded
  // table calls fn once per shard, with that shard's keys), for the caller
  // to pick the matching gradient rows; null means all of `keys`, in order.
  // fn moves them to the arenas' device. Advances step().
  using RowsFn = std::function<void(std::vector<Tensor>& arenas, const Tensor& slots,
                                    const std::vector<int64_t>* kept)>;
  virtual void update_rows(const std::vector<int>& members, std::span<const int64_t> keys,
                           bool all_rows, const RowsFn& fn) = 0;

  // update_rows() for keys in the memory of device() (int64 [n]): true
  // when the table resolved them there, every key present (fn then gets
  // `kept` null), or found one absent there and inserted the keys through
  // the host index as update_rows() does; false, with nothing done,
  // otherwise (the caller reads the keys to the host and calls
  // update_rows()).
  virtual bool update_rows_device_keys(const std::vector<int>& members, const Tensor& keys,
                                       bool all_rows, const RowsFn& fn) {
    (void)members, (void)keys, (void)all_rows, (void)fn;
    return false;
  }

  // Whether its rows live in other processes (cluster tasks): the training
  // ops then call train() with the step as data, where they would call
  // update_rows() with a function.
  virtual bool remote() const { return false; }
  // update_rows() of a remote() table: the processes holding the rows of
  // `keys` run `step` on them (step.values on the host). InternalError on
  // a table that is not remote().
  virtual void train(const std::vector<int>& members, std::span<const int64_t> keys, bool all_rows,
                     const KeyedTrainingStep& step);
  // A remote() table's record of which members were initialized (their
  // initializer ran, or a restore), where every task sees it: one task
  // (the chief) initializes the variables of all. A table of this process
  // keeps none (its storage's flag suffices): false, and a no-op.
  virtual bool initialized(int member) const {
    (void)member;
    return false;
  }
  virtual void set_initialized(int member) { (void)member; }

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
  virtual Export export_rows(const std::vector<int>& members) const = 0;
  // Sets the update step and count of each of `keys` present (host int64
  // [n] each, as export_rows gives them); the step clock moves up to the
  // latest step. A no-op when not tracking.
  virtual void set_update_history(const Tensor& keys, const Tensor& versions,
                                  const Tensor& counts) = 0;
  // Replaces every key and row: `keys` (distinct, host int64 [n]) and, for
  // each member k of `members`, values[k] ([n] + row shape, host); members
  // not listed get their initial rows. ResourceExhaustedError, nothing
  // changed, when the keys do not fit under the cap.
  virtual void replace(const Tensor& keys, const std::vector<int>& members,
                       const std::vector<Tensor>& values) = 0;
  // Overwrites `member`'s rows of those of `keys` the table holds with
  // their rows of `rows` (host, [keys.size()] + row shape); other keys are
  // skipped.
  virtual void write_present(int member, std::span<const int64_t> keys, const Tensor& rows) = 0;

  // Turns on the change marks: from now on writes mark the keys they
  // touch and erasures record the key. Idempotent.
  virtual void start_marking() = 0;
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
  virtual Changes take_changes(const std::vector<int>& members, uint64_t last) = 0;

  // The initial rows of `keys` in `member`, [n] + row shape, on the host.
  virtual Tensor initial_rows(int member, std::span<const int64_t> keys) const = 0;

 protected:
  KeyedTable(std::string name, DType key_dtype, KeyedPolicy policy)
      : name_(std::move(name)), key_dtype_(key_dtype), policy_(policy) {}

 private:
  const std::string name_;
  const DType key_dtype_;
  const KeyedPolicy policy_;
};

// A table whose shards are on `devices` (one: a DeviceKeyedTable), keys
// routed by kernels::key_shard; a cap is split evenly over the shards.
std::shared_ptr<KeyedTable> make_keyed_table(std::string name, DType key_dtype,
                                             const std::vector<Device*>& devices,
                                             KeyedPolicy policy = {});

// A cap shared by the shards of one table (runtime/sharded_keyed_table.h):
// their live keys together stay at most the policy's max_rows. A shard
// inserting new keys holds `mu` from the cap's check until `live` counts
// them, evicting its own keys to make room.
struct KeyedBudget {
  std::mutex mu;
  std::atomic<int64_t> live{0};
};

// A table on one device.
class DeviceKeyedTable final : public KeyedTable {
 public:
  // With `budget`, max_rows caps the keys of every table sharing it.
  DeviceKeyedTable(std::string name, DType key_dtype, Device& device, KeyedPolicy policy = {},
                   std::shared_ptr<KeyedBudget> budget = nullptr);

  Device& device() const override { return device_; }
  std::vector<Device*> devices() const override { return {&device_}; }
  int add_member(std::string op_name, DType dtype, TensorShape row_shape,
                 KeyedRowInit init) override;
  int64_t size() const override { return size_.load(std::memory_order_relaxed); }
  int64_t step() const override { return clock_.load(std::memory_order_relaxed); }
  void tick() override { clock_.fetch_add(1, std::memory_order_relaxed); }
  int64_t expire() override;
  void reserve(int64_t rows) override;
  int64_t memory_bytes() const override;
  DType dtype(int member) const override;
  const TensorShape& row_shape(int member) const override;
  const std::string& member_name(int member) const override;
  uint64_t version(int member) const override;
  Tensor gather(int member, std::span<const int64_t> keys, bool insert,
                const Tensor& absent_row = Tensor()) override;
  void scatter(kernels::ScatterOp op, int member, std::span<const int64_t> keys,
               const Tensor& updates, const std::string& who) override;
  std::optional<Tensor> gather_device_keys(int member, const Tensor& keys, bool insert,
                                           const Tensor& absent_row) override;
  bool scatter_device_keys(kernels::ScatterOp op, int member, const Tensor& keys,
                           const Tensor& updates, const std::string& who) override;
  void insert(std::span<const int64_t> keys, const Tensor& values) override;
  int64_t erase(std::span<const int64_t> keys) override;
  void clear() override;
  void reset_member(int member) override;
  void update_rows(const std::vector<int>& members, std::span<const int64_t> keys, bool all_rows,
                   const RowsFn& fn) override;
  bool update_rows_device_keys(const std::vector<int>& members, const Tensor& keys, bool all_rows,
                               const RowsFn& fn) override;
  Export export_rows(const std::vector<int>& members) const override;
  void set_update_history(const Tensor& keys, const Tensor& versions,
                          const Tensor& counts) override;
  void replace(const Tensor& keys, const std::vector<int>& members,
               const std::vector<Tensor>& values) override;
  void write_present(int member, std::span<const int64_t> keys, const Tensor& rows) override;
  void start_marking() override;
  Changes take_changes(const std::vector<int>& members, uint64_t last) override;
  Tensor initial_rows(int member, std::span<const int64_t> keys) const override;

  // For a sharded table's cap (ShardedKeyedTable): how many of `keys` a
  // training call would insert now (distinct, absent and, with `admit`,
  // admitted), and the keys it would evict first: up to `n` of the keys
  // not among `keys`, as (metric, key), least recently (or frequently)
  // updated first, ties by the smaller key. Change nothing.
  int64_t count_new(std::span<const int64_t> keys, bool admit) const;
  std::vector<std::pair<int64_t, int64_t>> eviction_candidates(std::span<const int64_t> keys,
                                                               int64_t n) const;

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
  // slots[i] = the slot of keys[i], or kAbsent; large batches split over
  // the pool. Caller holds mu_.
  void find_into(std::span<const int64_t> keys, int64_t* slots) const;
  // Slots of `keys` (kAbsent when absent). Caller holds mu_.
  std::vector<int64_t> find(std::span<const int64_t> keys) const;
  // The slots of `keys` when every one is present, found straight into an
  // int64 tensor on the host (the indices a CPU table's kernels read, with
  // no copy; a GPU table's copy them over); nullopt when one is absent.
  // Caller holds mu_.
  std::optional<Tensor> find_present(std::span<const int64_t> keys) const;
  // Slots of `keys`, absent ones inserted and initialized in every member
  // but `skip_init` (whose new rows the caller writes). With `admit`, the
  // policy decides which absent keys get rows (the others stay kAbsent)
  // and makes room under the cap. Caller holds mu_ exclusively.
  //
  // `rows_of_shard`, when given, is called on the thread of each shard that
  // inserts, with the positions of `keys` routed to that shard (ascending)
  // and their slots, so that the caller's rows are written beside the
  // index's work; `rows_written` says whether it was called for every
  // position (not when a policy applies or the arenas lack a free row per
  // key: the caller then writes the rows itself).
  using ShardRowsFn =
      std::function<void(const int64_t* positions, const int64_t* slots, int64_t count)>;
  std::vector<int64_t> find_or_insert(std::span<const int64_t> keys, int skip_init = -1,
                                      bool admit = false,
                                      const ShardRowsFn* rows_of_shard = nullptr,
                                      bool* rows_written = nullptr);
  // The policy's part of find_or_insert: marks the positions of absent keys
  // not admitted kRejected, counting their sightings, and evicts keys not in
  // the batch to make room under the cap; ResourceExhaustedError first,
  // with nothing changed, when there is no room.
  void admit(std::span<const int64_t> keys, std::vector<int64_t>& slots, bool admit);
  // The `n` (or all) live keys outside `in_batch` (a byte per slot) least
  // recently or frequently updated (the policy's measure), ties broken by
  // the smaller key; in no order. Caller holds mu_.
  struct Victim {
    int64_t metric, key, slot;
  };
  std::vector<Victim> victims(const std::vector<uint8_t>& in_batch, int64_t n) const;
  // Erases the key of live slot `slot`. Caller holds mu_ exclusively.
  void erase_slot(int64_t key, int64_t slot);
  // Records an update of `slots` at the current step (capped or expiring
  // tables).
  void touch(std::span<const int64_t> slots);
  // compose_rows on a GPU, from the keys and their slots in device memory
  // (kAbsent for absent keys): one gather, the absent keys reading
  // `absent_row` or getting their initial rows drawn in place; nothing is
  // read back to the host.
  Tensor compose_on_device(const Member& m, const Tensor& keys, const Tensor& slots,
                           const Tensor& absent_row) const;
  // Rows of `keys` at `slots`, absent keys (kAbsent) reading `absent_row`
  // or their initial rows. Caller holds mu_.
  Tensor compose_rows(const Member& m, int member, std::span<const int64_t> keys,
                      const std::vector<int64_t>& slots, const Tensor& absent_row) const;
  // Writes m's initial rows of `keys` at `slots` (distinct): on the host
  // from initial_rows(), on a GPU by its kernels, the keys and slots copied
  // over once (into `staged`) for every member that draws rows.
  struct StagedKeys {
    Tensor keys, slots;
  };
  void init_rows(Member& m, int member, std::span<const int64_t> keys,
                 std::span<const int64_t> slots, StagedKeys& staged);
  // Writes m's constant initial value to the rows `slots` (CPU arenas).
  void fill_rows(Member& m, std::span<const int64_t> slots);
  // Room for `more` rows beyond the slots in use (arenas grown by half, or
  // to what is needed). Caller holds mu_ exclusively.
  void reserve_rows(int64_t more);
  // Arenas (and marks) of `capacity` rows, the rows kept. Caller holds mu_
  // exclusively.
  void grow_to(int64_t capacity);
  // Writes rows (host, [slots.size()] + row shape) at `slots` of a member.
  // On the CPU a slot named twice keeps its last row; GPU callers pass
  // distinct slots.
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

  // GPU tables: the slots of `keys` resolved by the device index (int64 on
  // the device), when it is valid, the batch is worth a kernel and every
  // key is present; else nullopt (the caller takes the host's path). With
  // `host_slots`, the slots are copied there too. With `absent`, *absent
  // tells whether the device looked and found a key absent (the caller
  // then goes straight to the insert: no key need be looked up again).
  // Caller holds mu_.
  std::optional<Tensor> present_on_device(std::span<const int64_t> keys,
                                          std::vector<int64_t>* host_slots,
                                          bool* absent = nullptr) const;
  // The same for keys in device memory (int64 on device_).
  std::optional<Tensor> present_on_device(const Tensor& keys, std::vector<int64_t>* host_slots,
                                          bool* absent = nullptr) const;
  // scatter()'s work once the keys' slots are known (kAbsent for keys not
  // admitted: their updates are dropped). Caller holds mu_.
  void scatter_at(kernels::ScatterOp op, Member& m, std::vector<int64_t> slots,
                  const Tensor& updates, const std::string& who);
  // update_rows' work once the slots are known: host `slots`, filtered of
  // absent keys here. Caller holds mu_.
  void apply_rows(const std::vector<int>& members, std::vector<int64_t> slots, bool all_rows,
                  const RowsFn& fn);
  // The same for keys all present, at `slots` on the table's device
  // (`host_slots` too when needs_host_slots()). Caller holds mu_.
  void apply_found(const std::vector<int>& members, const Tensor& slots,
                   std::span<const int64_t> host_slots, bool all_rows, const RowsFn& fn);
  // The arenas of `members`, in that order.
  std::vector<Tensor> arenas_of(const std::vector<int>& members) const;
  // The bookkeeping after update_rows' kernel: update history, step,
  // dirty marks, versions. Caller holds mu_.
  void rows_updated(const std::vector<int>& members, std::span<const int64_t> host_slots,
                    bool all_rows);
  // Whether a batch of n keys goes to the device index.
  bool finds_on_device(int64_t n) const;
  // The scatter of a batch whose keys are all present, at `slots` (on the
  // device; `host_slots` too when needs_host_slots()). Caller holds mu_.
  void scatter_slots(kernels::ScatterOp op, Member& m, const Tensor& slots,
                     std::span<const int64_t> host_slots, const Tensor& updates,
                     const std::string& who);
  // Whether the rows' slots must be known on the host after an update
  // (for the marks of incremental saves, or the policy's update history).
  bool needs_host_slots() const { return marking_ || tracking_; }
  // The key changes since the last flush, for the device index (in order:
  // a batch of new keys with their slots, or a batch of erased keys).
  void record_inserted(const std::vector<int64_t>& keys, const std::vector<int64_t>& slots);
  void record_erased(int64_t key);
  // Applies the recorded changes to the device index (rebuilding it from
  // the host index when it is not valid); a failure leaves it invalid and
  // the table correct. Caller holds mu_ exclusively.
  void flush_index() noexcept;
  // The exclusive lock of a section that may change the keys: the device
  // index follows the changes before the lock is released.
  class Exclusive {
   public:
    explicit Exclusive(DeviceKeyedTable& t) : t_(t), lock_(t.mu_) {}
    ~Exclusive() { t_.flush_index(); }
    Exclusive(const Exclusive&) = delete;
    Exclusive& operator=(const Exclusive&) = delete;

   private:
    DeviceKeyedTable& t_;
    std::unique_lock<std::shared_mutex> lock_;
  };
  // The export of `entries` ((key, slot), ascending by key). Caller holds
  // mu_.
  Export export_entries(const std::vector<int>& members,
                        const std::vector<std::pair<int64_t, int64_t>>& entries) const;

  Device& device_;
  const std::shared_ptr<KeyedBudget> budget_;

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
  // size_ = live_keys(), the change counted in the budget. Caller holds mu_
  // exclusively.
  void note_size();

  const int64_t num_shards_;
  std::vector<kernels::cpu::HashIndex> shards_;
  std::vector<std::unique_ptr<Member>> members_;
  std::vector<int64_t> free_;  // freed slots
  int64_t next_slot_ = 0;      // slots [next_slot_, capacity) never used
  int64_t capacity_ = 0;
  std::atomic<int64_t> size_{0};

  // Per slot, when tracking (a cap or expiry): the step of its last update
  // and its update count. Written under either lock.
  const bool tracking_;
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

  // GPU tables: the device's mirror of the index, and the key changes not
  // yet applied to it.
  std::unique_ptr<DeviceKeyIndex> device_index_;
  struct IndexChange {
    bool erase = false;
    std::vector<int64_t> keys, slots;
  };
  std::vector<IndexChange> index_changes_;
  bool index_cleared_ = false;  // every key dropped first
};

}  // namespace varstate::internal
