#include "checkpoint/keyed_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "checkpoint/checkpoint_chain.h"
#include "checkpoint/saver_io_internal.h"
#include "runtime/keyed_storage.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

namespace varstate::internal {
namespace {

using Part = Saver::Part;

bool is_keyed(const Saver::Item& item) { return item.part != Part::kValue; }

// The checkpoint key of the other tensor of an item's pair.
std::string base_key(const Saver::Item& item) {
  const std::string suffix = item.part == Part::kKeys       ? kKeysSuffix
                             : item.part == Part::kRows     ? kValuesSuffix
                             : item.part == Part::kVersions ? kVersionsSuffix
                                                            : kCountsSuffix;
  return item.key.substr(0, item.key.size() - suffix.size());
}

}  // namespace

namespace {

// The members of each table that `items` save.
std::map<KeyedTable*, std::vector<int>> members_saved(const std::vector<Saver::Item>& items) {
  std::map<KeyedTable*, std::vector<int>> members;
  for (const Saver::Item& item : items) {
    if (!is_keyed(item)) continue;
    const KeyedStorage* k = keyed_storage(item.variable);
    std::vector<int>& m = members[&k->table()];
    if (std::find(m.begin(), m.end(), k->member()) == m.end()) m.push_back(k->member());
  }
  return members;
}

// The bytes of one element of the tensor `item` saves, times a row's
// elements.
int64_t row_bytes(const Saver::Item& item) {
  if (item.part != Part::kRows) return sizeof(int64_t);
  const KeyedStorage* k = keyed_storage(item.variable);
  return k->table().row_shape(k->member()).num_elements() *
         static_cast<int64_t>(dtype_size(item.variable.dtype()));
}

}  // namespace

KeyedExports::KeyedExports(const std::vector<Saver::Item>& items) {
  for (auto& [table, which] : members_saved(items)) {
    KeyedTable::Export e = table->export_rows(which);
    Table& t = tables_[table];
    t.keys = std::move(e.keys);
    for (size_t j = 0; j < which.size(); ++j) t.rows[which[j]] = std::move(e.values[j]);
    t.versions = std::move(e.versions);
    t.counts = std::move(e.counts);
  }
}

std::shared_ptr<KeyedExports> KeyedExports::changes(
    const std::vector<Saver::Item>& items, std::map<const KeyedTable*, uint64_t>& generations) {
  std::shared_ptr<KeyedExports> out(new KeyedExports());
  out->delta_ = true;
  std::map<const KeyedTable*, int64_t> live;
  for (auto& [table, which] : members_saved(items)) {
    KeyedTable::Changes c = table->take_changes(which, generations[table]);
    generations[table] = c.generation;
    live[table] = table->size();
    if (!c.complete) {
      out->complete_ = false;
      continue;
    }
    Table& t = out->tables_[table];
    t.keys = std::move(c.written.keys);
    for (size_t j = 0; j < which.size(); ++j) t.rows[which[j]] = std::move(c.written.values[j]);
    t.versions = std::move(c.written.versions);
    t.counts = std::move(c.written.counts);
    t.erased = Tensor::from_vector(c.erased);
  }
  if (!out->complete_) return out;
  for (const Saver::Item& item : items) {
    if (!is_keyed(item)) continue;
    const KeyedTable* table = &keyed_storage(item.variable)->table();
    const Table& t = out->tables_.at(table);
    int64_t delta = t.keys.num_elements() * row_bytes(item);
    if (item.part == Part::kKeys) delta += t.erased.num_elements() * sizeof(int64_t);
    out->delta_bytes_ += delta;
    out->full_bytes_ += live.at(table) * row_bytes(item);
  }
  return out;
}

const Tensor& KeyedExports::rows(const Saver::Item& item) const {
  const KeyedStorage* k = keyed_storage(item.variable);
  const Table& t = tables_.at(&k->table());
  switch (item.part) {
    case Part::kKeys:
      return t.keys;
    case Part::kVersions:
      return t.versions;
    case Part::kCounts:
      return t.counts;
    default:
      return t.rows.at(k->member());
  }
}

void KeyedExports::write(CheckpointWriter::Shard& shard, const Saver::Item& item) const {
  if (!delta_) {
    shard.add_tensor(item.key, std::nullopt, rows(item));
  } else if (item.part == Part::kKeys) {
    shard.add_tensor(delta_keys_key(item.key), std::nullopt, rows(item));
    shard.add_tensor(delta_erased_key(item.key), std::nullopt,
                     tables_.at(&keyed_storage(item.variable)->table()).erased);
  } else {
    shard.add_tensor(delta_key_rows_key(item.key), std::nullopt, rows(item));
  }
}

// ---------------------------------------------------------------------------
// Restore

KeyedRestore::KeyedRestore(const std::vector<Saver::Item>& items, const CheckpointReader& reader) {
  Device& host = DeviceManager::instance().cpu();
  for (const Saver::Item& item : items) {
    if (item.part != Part::kKeys) continue;
    const Variable& var = item.variable;
    KeyedStorage* k = keyed_storage(var);
    const std::string base = base_key(item);
    const std::string keys_key = base + kKeysSuffix;
    const std::string rows_key = base + kValuesSuffix;
    const std::string where =
        "restoring " + quoted(var.op_name()) + " from checkpoint " + quoted(reader.path());
    for (const std::string& key : {keys_key, rows_key}) {
      if (!reader.contains(key)) {
        throw NotFoundError("Key " + quoted(key) + " not found in checkpoint " +
                            quoted(reader.path()) + " (restoring dynamic variable " +
                            quoted(var.op_name()) + ")");
      }
    }
    const TensorInfo keys_info = reader.info(keys_key);
    const TensorInfo rows_info = reader.info(rows_key);
    if ((keys_info.dtype != DType::kInt64 && keys_info.dtype != DType::kInt32) ||
        keys_info.shape.size() != 1) {
      throw InvalidArgumentError(
          where + ": key " + quoted(keys_key) + " must hold an int64 vector, got " +
          std::string(dtype_name(keys_info.dtype)) + " " + shape_string(keys_info.shape));
    }
    const int64_t n = keys_info.shape[0];
    const TensorShape expected = TensorShape({n}).concatenate(k->table().row_shape(k->member()));
    if (rows_info.dtype != var.dtype()) {
      throw InvalidArgumentError(where + ": key " + quoted(rows_key) + " holds dtype " +
                                 std::string(dtype_name(rows_info.dtype)) +
                                 ", the variable has dtype " +
                                 std::string(dtype_name(var.dtype())));
    }
    if (rows_info.shape != expected.dims()) {
      throw InvalidArgumentError(where + ": key " + quoted(rows_key) + " has shape " +
                                 shape_string(rows_info.shape) + ", expected " +
                                 expected.to_string() + " (one row of the variable per key of " +
                                 quoted(keys_key) + ")");
    }
    const int64_t cap = k->table().policy().max_rows;
    if (cap > 0 && n > cap) {
      throw ResourceExhaustedError(where + ": " + quoted(keys_key) + " holds " + std::to_string(n) +
                                   " keys, the table is capped at max_rows " + std::to_string(cap));
    }
    Tensor keys = tensor_from_data(reader.read(keys_key), TensorShape({n}), host);
    if (keys.dtype() != DType::kInt64) keys = keys.cast(DType::kInt64);
    const std::vector<int64_t> ids = keys.to_vector<int64_t>();
    for (int64_t i = 1; i < n; ++i) {
      if (ids[static_cast<size_t>(i)] <= ids[static_cast<size_t>(i - 1)]) {
        throw InvalidArgumentError(where + ": the keys of " + quoted(keys_key) +
                                   " are not ascending and distinct: key " + std::to_string(i) +
                                   " (" + std::to_string(ids[static_cast<size_t>(i)]) +
                                   ") follows " + std::to_string(ids[static_cast<size_t>(i - 1)]));
      }
    }
    Tensor rows = tensor_from_data(reader.read(rows_key), expected, host);
    Member member{var, std::move(keys), std::move(rows), Tensor(), Tensor()};
    // The update history, when the saver holds it and the checkpoint has it.
    const bool history = std::any_of(items.begin(), items.end(), [&](const Saver::Item& i) {
      return i.part == Part::kVersions && i.variable.same_as(var);
    });
    if (history && reader.contains(base + kVersionsSuffix) &&
        reader.contains(base + kCountsSuffix)) {
      for (const char* suffix : {kVersionsSuffix, kCountsSuffix}) {
        const std::string key = base + suffix;
        const TensorInfo info = reader.info(key);
        if (info.dtype != DType::kInt64 || info.shape != std::vector<int64_t>{n}) {
          throw InvalidArgumentError(where + ": key " + quoted(key) + " must hold int64 [" +
                                     std::to_string(n) + "] (one per key), got " +
                                     std::string(dtype_name(info.dtype)) + " " +
                                     shape_string(info.shape));
        }
        (suffix == kVersionsSuffix ? member.versions : member.counts) =
            tensor_from_data(reader.read(key), TensorShape({n}), host);
      }
    }
    tables_[&k->table()].push_back(std::move(member));
  }
}

namespace {

// `rows` of `from_keys` (ascending) laid out for `to_keys` (ascending):
// the rows of keys `from_keys` lacks are `fill`'s.
Tensor align_rows(const Tensor& from_keys, const Tensor& rows, const Tensor& to_keys,
                  const std::function<Tensor()>& fill) {
  const std::vector<int64_t> from = from_keys.to_vector<int64_t>();
  const std::vector<int64_t> to = to_keys.to_vector<int64_t>();
  if (from == to) return rows;
  Tensor out = fill();
  const size_t row_bytes = to.empty() ? 0 : out.nbytes() / to.size();
  auto* dst = static_cast<std::byte*>(out.raw_data());
  const auto* src = static_cast<const std::byte*>(rows.raw_data());
  size_t j = 0;
  for (size_t i = 0; i < to.size(); ++i) {
    while (j < from.size() && from[j] < to[i]) ++j;
    if (j < from.size() && from[j] == to[i]) {
      std::memcpy(dst + i * row_bytes, src + j * row_bytes, row_bytes);
    }
  }
  return out;
}

}  // namespace

void KeyedRestore::apply() {
  for (auto& [table, members] : tables_) {
    const auto primary = std::find_if(members.begin(), members.end(), [](const Member& m) {
      return keyed_storage(m.variable)->member() == 0;
    });
    if (primary == members.end()) {
      // Slots alone: their rows of the keys the table holds.
      for (const Member& m : members) {
        KeyedStorage* k = keyed_storage(m.variable);
        table->write_present(k->member(), m.keys.to_vector<int64_t>(), m.rows);
        k->mark_initialized();
      }
      continue;
    }
    const Tensor keys = primary->keys;
    std::vector<int> which;
    std::vector<Tensor> values;
    for (const Member& m : members) {
      const int member = keyed_storage(m.variable)->member();
      which.push_back(member);
      KeyedTable* t = table;  // (a lambda may not capture a structured binding in C++17)
      values.push_back(align_rows(m.keys, m.rows, keys, [t, member, &keys] {
        return t->initial_rows(member, keys.to_vector<int64_t>());
      }));
    }
    table->replace(keys, which, values);
    if (primary->versions.valid()) {
      table->set_update_history(keys, primary->versions, primary->counts);
    }
    for (const Member& m : members) keyed_storage(m.variable)->mark_initialized();
  }
}

}  // namespace varstate::internal
