// Dynamic variables in checkpoints (varstate/dynamic_variable.h). Internal.
//
// A dynamic variable, or an optimizer slot of one, is saved as two plain
// tensors TensorFlow reads: "<key>-keys" (int64 [n], ascending) and
// "<key>-values" ([n] + the row shape, the rows in that order), two
// Saver::Items (Part kKeys and kRows). Every member of a table (variable
// and slots) that a save writes comes from one export taken under the
// table's lock, so keys and rows agree. A delta holds each table's changes
// since the parent, by key: the keys written with their rows, and the keys
// erased (checkpoint/checkpoint_chain.h's delta_keys_key; ChainReader
// merges them). A restore replaces the table: the
// variable's keys and rows, and each restored slot's rows of those keys
// (a key the slot's tensors lack starts at the slot's initial value);
// slots restored without their variable only overwrite the rows of keys
// the table holds.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "checkpoint/checkpoint_writer.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/saver.h"
#include "varstate/tensor.h"

namespace varstate::internal {

class KeyedTable;

inline constexpr const char* kKeysSuffix = "-keys";
inline constexpr const char* kValuesSuffix = "-values";
inline constexpr const char* kVersionsSuffix = "-versions";
inline constexpr const char* kCountsSuffix = "-counts";

// What a save writes of every table whose members `items` save, each
// table's taken at once: all of it, or for a delta its changes.
class KeyedExports {
 public:
  // Every key and row, taken now (nothing when no item is a dynamic
  // variable's).
  explicit KeyedExports(const std::vector<Saver::Item>& items);
  // The changes of each table since this saver's last take, taken now
  // (KeyedTable::take_changes). `generations`: per table, the generation
  // of that take; updated. A base takes them too: the next delta holds what
  // changed since.
  static std::shared_ptr<KeyedExports> changes(const std::vector<Saver::Item>& items,
                                               std::map<const KeyedTable*, uint64_t>& generations);

  bool empty() const { return tables_.empty(); }
  // Whether every table's changes are known (changes() only): when not,
  // the save must be a base.
  bool complete() const { return complete_; }
  // The bytes the items' tensors take in a delta of these changes, and in
  // a full save (changes() only).
  int64_t delta_bytes() const { return delta_bytes_; }
  int64_t full_bytes() const { return full_bytes_; }
  // Writes what the save holds of `item` (a kKeys, kRows, kVersions or
  // kCounts item): its tensor whole, or a delta's entries for it
  // (checkpoint/checkpoint_chain.h's delta_keys_key).
  void write(CheckpointWriter::Shard& shard, const Saver::Item& item) const;

 private:
  KeyedExports() = default;
  // The tensor a full save writes for `item`, or a delta's rows of it.
  const Tensor& rows(const Saver::Item& item) const;

  struct Table {
    Tensor keys;                 // all, or those written since the last take
    std::map<int, Tensor> rows;  // member -> rows of `keys`
    Tensor versions, counts;     // a tracking table's
    Tensor erased;               // a delta's: the keys erased since
  };
  std::map<const KeyedTable*, Table> tables_;
  bool delta_ = false;
  bool complete_ = true;
  int64_t delta_bytes_ = 0;
  int64_t full_bytes_ = 0;
};

// A restore of the dynamic variables among a saver's items: constructed
// from the checkpoint (every tensor read and checked: dtypes, shapes, keys
// ascending and distinct), then apply() changes the tables. Throws
// NotFoundError / InvalidArgumentError naming the variable, key and
// checkpoint, before anything changes.
class KeyedRestore {
 public:
  KeyedRestore(const std::vector<Saver::Item>& items, const CheckpointReader& reader);
  void apply();

 private:
  struct Member {
    Variable variable;
    Tensor keys;
    Tensor rows;
    Tensor versions, counts;  // the variable's, when saved (else invalid)
  };
  std::map<KeyedTable*, std::vector<Member>> tables_;
};

}  // namespace varstate::internal
