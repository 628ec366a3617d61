#include "checkpoint/delta_save_internal.h"

#include <cstring>
#include <mutex>

#include "runtime/variable_access.h"
#include "runtime/variable_storage.h"

namespace varstate::internal {
namespace {

// True when the item's rows are whole rows of the full tensor.
bool rows_are_whole(const Saver::Item& item) {
  if (!item.slice) return true;
  const SaveSliceInfo& s = *item.slice;
  for (size_t d = 1; d < s.full_shape.size(); ++d) {
    if (s.var_offset[d] != 0 || s.var_shape[d] != s.full_shape[d]) return false;
  }
  return true;
}

int64_t element_bytes(DType dtype) {
  return dtype == DType::kString ? 8 : static_cast<int64_t>(dtype_size(dtype));
}

}  // namespace

ItemDelta plan_item_delta(const Saver::Item& item, const TensorShape& shape, DirtyRows::Taken taken,
                          bool owner_marks) {
  ItemDelta d;
  const Variable& v = item.variable;
  if (taken.all || shape.rank() == 0 || v.dtype() == DType::kString ||
      (!storage(v).updates_in_place() && !owner_marks) || !rows_are_whole(item) ||
      full_bytes(item, shape) < kSmallBytes ||
      static_cast<int64_t>(taken.rows.size()) * 2 > shape.dim(0)) {
    return d;
  }
  d.whole = false;
  d.rows = std::move(taken.rows);
  return d;
}

int64_t full_bytes(const Saver::Item& item, const TensorShape& shape) {
  return shape.num_elements() * element_bytes(item.variable.dtype());
}

int64_t delta_bytes(const Saver::Item& item, const TensorShape& shape, const ItemDelta& delta) {
  if (delta.whole) return full_bytes(item, shape);
  const int64_t row = shape.dim(0) == 0 ? 0 : full_bytes(item, shape) / shape.dim(0);
  return static_cast<int64_t>(delta.rows.size()) * (row + 8);
}

void start_marking(const std::vector<Saver::Item>& items) {
  for (const Saver::Item& item : items) {
    storage(item.variable).start_marking();
  }
}

std::vector<DirtyRows::Taken> take_changed_rows(const std::vector<Saver::Item>& items,
                                                bool owner_marks,
                                                std::vector<uint64_t>& generations,
                                                std::vector<TensorShape>& shapes) {
  generations.resize(items.size(), 0);
  std::vector<DirtyRows::Taken> taken;
  for (size_t i = 0; i < items.size(); ++i) {
    const Variable& v = items[i].variable;
    VariableStorage& held = storage(v);
    if (items[i].part != Saver::Part::kValue) {
      taken.emplace_back();
      shapes.emplace_back();
      continue;
    }
    if (owner_marks && !held.updates_in_place()) {
      // Marked where the rows live.
      DirtyRows::Taken t;
      t.all = false;
      t.rows = held.take_marked_rows();
      taken.push_back(std::move(t));
      shapes.push_back(v.shape());
      continue;
    }
    std::lock_guard lock(update_mutex(v));
    shapes.push_back(v.shape());
    const int64_t rows = shapes.back().rank() > 0 ? shapes.back().dim(0) : 1;
    taken.push_back(dirty_rows(v).take(rows, generations[i]));
    generations[i] = taken.back().generation;
  }
  return taken;
}

Tensor copy_value(const Saver::Item& item, const ItemDelta* delta) {
  return storage(item.variable).copy_for_save(item.variable, delta ? &delta->rows : nullptr);
}

void write_item_rows(CheckpointWriter::Shard& shard, const Saver::Item& item,
                     const ItemDelta& delta, const Tensor& rows) {
  const std::optional<int64_t> part =
      item.slice ? std::optional<int64_t>(item.slice->var_offset[0]) : std::nullopt;
  std::vector<int64_t> ids = delta.rows;
  if (part) {
    for (int64_t& id : ids) id += *part;
  }
  const auto n = static_cast<int64_t>(ids.size());
  shard.add(delta_ids_key(item.key, part),
            TensorView{DType::kInt64,
                       {n},
                       std::span<const std::byte>(reinterpret_cast<const std::byte*>(ids.data()),
                                                  ids.size() * sizeof(int64_t)),
                       {}});
  shard.add_tensor(delta_rows_key(item.key, part), std::nullopt, rows);
}

}  // namespace varstate::internal
