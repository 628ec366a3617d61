// Dynamic variables in checkpoints (varstate/dynamic_variable.h). Internal.
//
// A dynamic variable, or an optimizer slot of one, is saved as two plain
// tensors TensorFlow reads: "<key>-keys" (int64 [n], ascending) and
// "<key>-values" ([n] + the row shape, the rows in that order), two
// Saver::Items (Part kKeys and kRows). Every member of a table (variable
// and slots) that a save writes comes from one export taken under the
// table's lock, so keys and rows agree. A restore replaces the table: the
// variable's keys and rows, and each restored slot's rows of those keys
// (a key the slot's tensors lack starts at the slot's initial value);
// slots restored without their variable only overwrite the rows of keys
// the table holds.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "varstate/checkpoint_reader.h"
#include "varstate/saver.h"
#include "varstate/tensor.h"

namespace varstate::internal {

class KeyedTable;

inline constexpr const char* kKeysSuffix = "-keys";
inline constexpr const char* kValuesSuffix = "-values";
inline constexpr const char* kVersionsSuffix = "-versions";
inline constexpr const char* kCountsSuffix = "-counts";

// The exports of every table whose members `items` save, one per table.
class KeyedExports {
 public:
  // Takes them now (nothing when no item is a dynamic variable's).
  explicit KeyedExports(const std::vector<Saver::Item>& items);
  bool empty() const { return tables_.empty(); }
  // The tensor a kKeys or kRows item saves (host).
  Tensor value(const Saver::Item& item) const;

 private:
  struct Table {
    Tensor keys;
    std::map<int, Tensor> rows;  // member -> rows
    Tensor versions, counts;     // a tracking table's
  };
  std::map<const KeyedTable*, Table> tables_;
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
