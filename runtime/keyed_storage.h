// The storage of a hash-keyed (dynamic) variable or of one of its optimizer
// slots (runtime/variable_storage.h's third kind): one member of a
// KeyedTable (runtime/keyed_table.h), whose ids are keys, not positions.
// Runtime-internal.
//
// Its entries take the keyed meanings variable_storage.h marks: shape() is
// [live keys] + the row shape; the reads are the rows in ascending key
// order; scatter and gather take keys and insert absent ones; the training
// ops run in place on the table's rows (KeyedTable::update_rows), a slot's
// rows being the same keys' rows of the slot's member; updates_in_place()
// is false, so that the generic paths never take the buffer for the value. Whole-value
// writes throw UnimplementedError naming the variable.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/dirty_rows.h"
#include "runtime/keyed_table.h"
#include "runtime/variable_storage.h"

namespace varstate::internal {

class KeyedStorage final : public VariableStorage {
 public:
  // Member `member` of `table`; `absent_row` (host: a scalar or a row, or
  // invalid) is what reads without insertion return for absent keys.
  KeyedStorage(std::shared_ptr<KeyedTable> table, int member, Tensor absent_row);

  KeyedTable& table() const { return *table_; }
  const std::shared_ptr<KeyedTable>& shared_table() const { return table_; }
  int member() const { return member_; }
  const Tensor& absent_row() const { return absent_row_; }
  // Whether `keys` may be resolved where they are (KeyedTable::
  // gather_device_keys): int64 keys of an int64 table, in the memory of its
  // (GPU) device.
  bool on_table_device(const Tensor& keys) const;

  const std::string& holder() const override;
  bool updates_in_place() const override { return false; }

  // Initialized here, or (a table held by cluster tasks) by any task.
  bool is_initialized() override;
  uint64_t version() override { return table_->version(member_); }
  uint64_t cache_copies() const override { return cache_copies_.load(); }
  TensorShape shape() const override;

  Tensor read_live(const Variable& self) override;
  Tensor read_copy(const Variable& self) override { return read_live(self); }
  Tensor read_cached(const Variable& self, Device* caching_device) override;
  std::optional<Tensor> read_if_initialized(const Variable& self) override;
  // The rows of every key (rows == nullptr) or of the keys `rows`.
  Tensor copy_for_save(const Variable& self, const std::vector<int64_t>* rows) override;

  Tensor assign_value(Variable& self, const Tensor& value, bool validate_shape) override;
  // An initializer's value, [0] + the row shape: the variable's empties the
  // table, a slot's resets its rows of every key to its initial value.
  void replace_value(Variable& self, const Tensor& value) override;
  void replace_rows(Variable& self, const std::vector<RowBytes>& runs) override;
  Tensor add_value(Variable& self, const Tensor& delta, bool negate) override;
  Tensor assign_slice(Variable& self, const std::vector<SliceSpec>& specs,
                      const Tensor& value) override;
  Tensor count_up(Variable& self, int64_t limit) override;
  void note_write(bool) override {}

  Tensor scatter(kernels::ScatterOp op, Variable& self, const Tensor& indices,
                 const Tensor& updates, const UpdateOptions& options, const std::string& who,
                 bool read_back) override;
  Tensor gather(const Variable& self, const std::vector<int64_t>& rows) override;
  void scatter_parts(kernels::ScatterOp op, std::vector<StoragePart>& parts, bool updates_scalar,
                     const UpdateOptions& options) override;
  void gather_parts(std::vector<StoragePart>& parts) override;
  // Not used: the training ops run in place on a dynamic variable's rows
  // (KeyedTable::update_rows); InternalError.
  void modify_rows(std::vector<RowsUpdate>& updates) override;

  DirtyRows& dirty_rows() override { return unmarked_; }
  void start_marking() override { table_->start_marking(); }
  // Not used: a dynamic variable's changes are keys written and keys
  // erased, which the saver takes from its table (KeyedTable::take_changes,
  // checkpoint/keyed_checkpoint.h); InternalError.
  std::vector<int64_t> take_marked_rows() override;

  // Marks it initialized (a restore of its table by checkpoint/).
  void mark_initialized();

 private:
  [[noreturn]] void throw_whole_value(const Variable& self, const char* op) const;

  std::shared_ptr<KeyedTable> table_;
  const int member_;
  const Tensor absent_row_;
  std::atomic<bool> initialized_{false};
  std::atomic<uint64_t> cache_copies_{0};
  DirtyRows unmarked_;
};

// The keyed storage of `v`, or nullptr when it has another kind.
KeyedStorage* keyed_storage(const Variable& v);

// The keys of a keyed op: int64 (or the table's key dtype, int32),
// validated (TypeError naming `who`, the expected and the actual dtype),
// as int64 on the host.
std::vector<int64_t> checked_keys(const Tensor& keys, DType key_dtype, const std::string& who);
// The checks of checked_keys alone: keys of the key dtype are not read,
// wherever they are.
void check_keys(const Tensor& keys, DType key_dtype, const std::string& who);

}  // namespace varstate::internal
