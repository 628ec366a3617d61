#include "runtime/keyed_table.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <numeric>
#include <utility>

#include "kernels/cpu/random.h"
#include "runtime/row_gather.h"
#include "runtime/scatter_by_op.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/slice.h"

namespace varstate::internal {
namespace {

using kernels::cpu::HashIndex;

Device& host() { return DeviceManager::instance().cpu(); }

// Calls fn(T{}) with T the storage type of a float dtype.
template <typename Fn>
void dispatch_float(DType dtype, const std::string& who, Fn&& fn) {
  switch (dtype) {
    case DType::kHalf:
      return fn(half{});
    case DType::kBFloat16:
      return fn(bfloat16{});
    case DType::kFloat:
      return fn(float{});
    case DType::kDouble:
      return fn(double{});
    default:
      throw InternalError(who + ": a keyed table of " + std::string(dtype_name(dtype)));
  }
}

int64_t row_elements(const TensorShape& row_shape) { return row_shape.num_elements(); }

TensorShape rows_shape(int64_t n, const TensorShape& row_shape) {
  return TensorShape({n}).concatenate(row_shape);
}

}  // namespace

KeyedTable::KeyedTable(std::string name, DType key_dtype, Device& device)
    : name_(std::move(name)), key_dtype_(key_dtype), device_(device) {}

int KeyedTable::add_member(std::string op_name, DType dtype, TensorShape row_shape,
                           KeyedRowInit init) {
  auto m = std::make_unique<Member>();
  m->op_name = std::move(op_name);
  m->dtype = dtype;
  m->row_shape = std::move(row_shape);
  m->init = std::move(init);
  std::unique_lock lock(mu_);
  m->arena = Tensor(dtype, rows_shape(capacity_, m->row_shape), device_);
  members_.push_back(std::move(m));
  const int member = static_cast<int>(members_.size()) - 1;
  lock.unlock();
  reset_member(member);
  return member;
}

DType KeyedTable::dtype(int member) const {
  std::shared_lock lock(mu_);
  return members_.at(static_cast<size_t>(member))->dtype;
}

const TensorShape& KeyedTable::row_shape(int member) const {
  std::shared_lock lock(mu_);
  return members_.at(static_cast<size_t>(member))->row_shape;
}

const std::string& KeyedTable::member_name(int member) const {
  std::shared_lock lock(mu_);
  return members_.at(static_cast<size_t>(member))->op_name;
}

uint64_t KeyedTable::version(int member) const {
  std::shared_lock lock(mu_);
  return members_.at(static_cast<size_t>(member))->version.load();
}

// ---------------------------------------------------------------------------
// Rows

Tensor KeyedTable::initial_rows(int member, std::span<const int64_t> keys) const {
  const Member& m = *members_.at(static_cast<size_t>(member));
  const int64_t n = static_cast<int64_t>(keys.size());
  const int64_t width = row_elements(m.row_shape);
  const KeyedRowInit& init = m.init;
  if (init.kind == KeyedRowInit::Kind::kConstant) {
    return Tensor::filled(m.dtype, rows_shape(n, m.row_shape), init.a, host());
  }
  Tensor out(m.dtype, rows_shape(n, m.row_shape), host());
  dispatch_float(m.dtype, m.op_name, [&](auto tag) {
    using T = decltype(tag);
    T* rows = static_cast<T*>(out.raw_data());
    const T a = init.a.scalar<T>();
    const T b = init.b.scalar<T>();
    for (int64_t i = 0; i < n; ++i) {
      // The op's stream with the key added to its counter's high words.
      const uint64_t seed2 = init.seed2 + static_cast<uint64_t>(keys[i]);
      T* row = rows + i * width;
      switch (init.kind) {
        case KeyedRowInit::Kind::kUniform:
          kernels::cpu::random_uniform<T>(row, width, 0, init.seed, seed2, a, b);
          break;
        case KeyedRowInit::Kind::kNormal:
          kernels::cpu::random_normal<T>(row, width, 0, init.seed, seed2, a, b);
          break;
        case KeyedRowInit::Kind::kTruncatedNormal:
          kernels::cpu::truncated_normal<T>(row, width, 0, init.seed, seed2, a, b);
          break;
        case KeyedRowInit::Kind::kConstant:
          break;
      }
    }
  });
  return out;
}

Tensor KeyedTable::slot_tensor(std::span<const int64_t> slots) const {
  return Tensor::from_vector(std::vector<int64_t>(slots.begin(), slots.end())).on(device_);
}

void KeyedTable::write_rows(Member& m, std::span<const int64_t> slots, const Tensor& rows) {
  if (slots.empty() || row_elements(m.row_shape) == 0) return;
  if (device_.is_cpu()) {
    const size_t row_bytes = static_cast<size_t>(row_elements(m.row_shape)) * dtype_size(m.dtype);
    auto* dst = static_cast<std::byte*>(m.arena.raw_data());
    const auto* src = static_cast<const std::byte*>(rows.raw_data());
    for (size_t i = 0; i < slots.size(); ++i) {
      std::memcpy(dst + static_cast<size_t>(slots[i]) * row_bytes, src + i * row_bytes, row_bytes);
    }
    return;
  }
  Tensor arena = m.arena;
  scatter_tensor(kernels::ScatterOp::kUpdate, arena, slot_tensor(slots), rows.on(device_), {});
}

Tensor KeyedTable::read_rows(const Member& m, std::span<const int64_t> slots) const {
  return gather_rows(m.arena, slots);
}

void KeyedTable::mark(std::span<const int64_t> slots) {
  if (!marking_) return;
  for (int64_t s : slots) marks_[static_cast<size_t>(s)].store(1, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------
// Keys

std::vector<int64_t> KeyedTable::find(std::span<const int64_t> keys) const {
  std::vector<int64_t> slots(keys.size());
  index_.find(keys.data(), static_cast<int64_t>(keys.size()), slots.data());
  return slots;
}

void KeyedTable::reserve_rows(int64_t more) {
  const int64_t room = static_cast<int64_t>(free_.size()) + (capacity_ - next_slot_);
  if (more <= room) return;
  int64_t capacity = std::max<int64_t>(capacity_ * 2, 64);
  while (capacity - next_slot_ + static_cast<int64_t>(free_.size()) < more) capacity *= 2;
  // Every arena first, then the bookkeeping: a failed allocation leaves
  // the table as it was.
  std::vector<Tensor> arenas;
  for (const auto& m : members_) {
    Tensor grown(m->dtype, rows_shape(capacity, m->row_shape), device_);
    if (capacity_ > 0 && row_elements(m->row_shape) > 0) {
      strided_slice_assign(grown, {Slice::range(0, capacity_)}, m->arena, m->op_name);
    }
    arenas.push_back(std::move(grown));
  }
  auto marks = std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(capacity));
  for (int64_t s = 0; s < capacity_; ++s) {
    marks[static_cast<size_t>(s)].store(marks_ ? marks_[static_cast<size_t>(s)].load() : 0);
  }
  for (size_t k = 0; k < members_.size(); ++k) members_[k]->arena = std::move(arenas[k]);
  marks_ = std::move(marks);
  slot_keys_.resize(static_cast<size_t>(capacity));
  capacity_ = capacity;
}

std::vector<int64_t> KeyedTable::find_or_insert(std::span<const int64_t> keys) {
  const int64_t n = static_cast<int64_t>(keys.size());
  std::vector<int64_t> slots = find(keys);
  int64_t absent = std::count(slots.begin(), slots.end(), HashIndex::kAbsent);
  if (absent == 0) return slots;
  reserve_rows(absent);
  index_.reserve(index_.size() + absent);
  // Candidates: freed slots first, then fresh ones; the index hands them
  // to the new keys in the order the keys first appear.
  std::vector<int64_t> candidates;
  candidates.reserve(static_cast<size_t>(absent));
  const size_t from_free = std::min(free_.size(), static_cast<size_t>(absent));
  candidates.assign(free_.end() - static_cast<std::ptrdiff_t>(from_free), free_.end());
  for (int64_t s = next_slot_; static_cast<int64_t>(candidates.size()) < absent; ++s) {
    candidates.push_back(s);
  }
  std::vector<int64_t> absent_keys;
  absent_keys.reserve(static_cast<size_t>(absent));
  for (int64_t i = 0; i < n; ++i) {
    if (slots[static_cast<size_t>(i)] == HashIndex::kAbsent) absent_keys.push_back(keys[i]);
  }
  std::vector<int64_t> absent_slots(absent_keys.size());
  const int64_t used = index_.insert(absent_keys.data(), absent, candidates.data(),
                                     absent_slots.data());
  // Used candidates are a prefix: give back the rest.
  const int64_t used_free = std::min<int64_t>(used, static_cast<int64_t>(from_free));
  free_.resize(free_.size() - from_free);
  for (size_t j = static_cast<size_t>(used); j < from_free; ++j) free_.push_back(candidates[j]);
  next_slot_ += used - used_free;
  std::vector<int64_t> new_keys;
  std::vector<int64_t> new_slots;
  new_keys.reserve(static_cast<size_t>(used));
  for (size_t i = 0, j = 0; i < absent_keys.size() && static_cast<int64_t>(j) < used; ++i) {
    if (absent_slots[i] == candidates[j]) {
      new_keys.push_back(absent_keys[i]);
      new_slots.push_back(candidates[j]);
      slot_keys_[static_cast<size_t>(candidates[j])] = absent_keys[i];
      ++j;
    }
  }
  for (size_t k = 0; k < members_.size(); ++k) {
    write_rows(*members_[k], new_slots, initial_rows(static_cast<int>(k), new_keys));
  }
  mark(new_slots);
  size_.store(index_.size(), std::memory_order_relaxed);
  for (size_t i = 0, j = 0; i < slots.size(); ++i) {
    if (slots[i] == HashIndex::kAbsent) slots[i] = absent_slots[j++];
  }
  return slots;
}

// ---------------------------------------------------------------------------
// Operations

Tensor KeyedTable::gather(int member, std::span<const int64_t> keys, bool insert,
                          const Tensor& absent_row) {
  const int64_t n = static_cast<int64_t>(keys.size());
  {
    std::shared_lock lock(mu_);
    const Member& m = *members_.at(static_cast<size_t>(member));
    std::vector<int64_t> slots = find(keys);
    const auto absent = std::count(slots.begin(), slots.end(), HashIndex::kAbsent);
    if (absent == 0) return read_rows(m, slots);
    if (!insert) {
      // Present rows from the arena, absent ones made here.
      std::vector<int64_t> present_slots;
      std::vector<int64_t> absent_keys;
      for (int64_t i = 0; i < n; ++i) {
        if (slots[static_cast<size_t>(i)] == HashIndex::kAbsent) {
          absent_keys.push_back(keys[i]);
        } else {
          present_slots.push_back(slots[static_cast<size_t>(i)]);
        }
      }
      const Tensor present = read_rows(m, present_slots).to_host();
      const Tensor made = absent_row.valid() ? Tensor() : initial_rows(member, absent_keys);
      Tensor out(m.dtype, rows_shape(n, m.row_shape), host());
      const size_t row_bytes = static_cast<size_t>(row_elements(m.row_shape)) * dtype_size(m.dtype);
      auto* dst = static_cast<std::byte*>(out.raw_data());
      const auto* from_present = static_cast<const std::byte*>(present.raw_data());
      const auto* from_made = made.valid() ? static_cast<const std::byte*>(made.raw_data()) : nullptr;
      const Tensor fill = absent_row.valid() ? absent_row.to_host() : Tensor();
      size_t p = 0;
      size_t a = 0;
      for (int64_t i = 0; i < n; ++i) {
        std::byte* row = dst + static_cast<size_t>(i) * row_bytes;
        if (slots[static_cast<size_t>(i)] != HashIndex::kAbsent) {
          std::memcpy(row, from_present + p++ * row_bytes, row_bytes);
        } else if (fill.valid()) {
          // A scalar default repeats; a row default is copied whole.
          const size_t fill_bytes = fill.nbytes();
          for (size_t off = 0; off < row_bytes; off += fill_bytes) {
            std::memcpy(row + off, fill.raw_data(), fill_bytes);
          }
          ++a;
        } else {
          std::memcpy(row, from_made + a++ * row_bytes, row_bytes);
        }
      }
      return out.on(device_);
    }
  }
  std::unique_lock lock(mu_);
  const std::vector<int64_t> slots = find_or_insert(keys);
  return read_rows(*members_.at(static_cast<size_t>(member)), slots);
}

void KeyedTable::scatter(kernels::ScatterOp op, int member, std::span<const int64_t> keys,
                         const Tensor& updates, const std::string& who) {
  auto run = [&](Member& m, const std::vector<int64_t>& slots) {
    Tensor arena = m.arena;
    scatter_tensor(op, arena, slot_tensor(slots), updates, {.name = who});
    mark(slots);
    m.version.fetch_add(1);
  };
  {
    std::shared_lock lock(mu_);
    Member& m = *members_.at(static_cast<size_t>(member));
    std::vector<int64_t> slots = find(keys);
    if (std::find(slots.begin(), slots.end(), HashIndex::kAbsent) == slots.end()) {
      run(m, slots);
      return;
    }
  }
  std::unique_lock lock(mu_);
  const std::vector<int64_t> slots = find_or_insert(keys);
  run(*members_.at(static_cast<size_t>(member)), slots);
}

void KeyedTable::insert(std::span<const int64_t> keys, const Tensor& values) {
  std::unique_lock lock(mu_);
  const std::vector<int64_t> slots = find_or_insert(keys);
  Member& m = *members_.front();
  write_rows(m, slots, values);
  mark(slots);
  m.version.fetch_add(1);
}

int64_t KeyedTable::erase(std::span<const int64_t> keys) {
  std::unique_lock lock(mu_);
  int64_t erased = 0;
  for (int64_t key : keys) {
    const int64_t slot = index_.erase(key);
    if (slot == HashIndex::kAbsent) continue;
    free_.push_back(slot);
    if (marking_) {
      marks_[static_cast<size_t>(slot)].store(0, std::memory_order_relaxed);
      erased_.push_back(key);
    }
    ++erased;
  }
  if (erased > 0) {
    size_.store(index_.size(), std::memory_order_relaxed);
    for (const auto& m : members_) m->version.fetch_add(1);
  }
  return erased;
}

void KeyedTable::clear() {
  std::unique_lock lock(mu_);
  if (marking_) {
    index_.for_each([&](int64_t key, int64_t) { erased_.push_back(key); });
    for (int64_t s = 0; s < capacity_; ++s) marks_[static_cast<size_t>(s)].store(0);
  }
  index_.clear();
  free_.clear();
  next_slot_ = 0;
  size_.store(0, std::memory_order_relaxed);
  for (const auto& m : members_) m->version.fetch_add(1);
}

void KeyedTable::reset_member(int member) {
  std::unique_lock lock(mu_);
  Member& m = *members_.at(static_cast<size_t>(member));
  std::vector<int64_t> keys;
  std::vector<int64_t> slots;
  index_.for_each([&](int64_t key, int64_t slot) {
    keys.push_back(key);
    slots.push_back(slot);
  });
  write_rows(m, slots, initial_rows(member, keys));
  mark(slots);
  m.version.fetch_add(1);
}

void KeyedTable::modify(std::vector<RowsChange>& changes) {
  std::vector<KeyedTable*> tables;
  for (const RowsChange& c : changes) tables.push_back(c.table);
  std::sort(tables.begin(), tables.end());
  tables.erase(std::unique(tables.begin(), tables.end()), tables.end());
  std::vector<std::unique_lock<std::shared_mutex>> locks;
  for (KeyedTable* t : tables) locks.emplace_back(t->mu_);
  // Slots first (inserting absent keys changes nothing a fn could undo:
  // the new rows hold their initial values), then every fn, then the
  // writes.
  std::vector<std::vector<int64_t>> slots;
  std::vector<std::vector<Tensor>> rows;
  for (RowsChange& c : changes) {
    slots.push_back(c.table->find_or_insert(c.keys));
    std::vector<Tensor> values;
    for (int member : c.members) {
      values.push_back(
          c.table->read_rows(*c.table->members_.at(static_cast<size_t>(member)), slots.back())
              .to_host());
    }
    rows.push_back(std::move(values));
  }
  for (size_t i = 0; i < changes.size(); ++i) changes[i].fn(rows[i]);
  for (size_t i = 0; i < changes.size(); ++i) {
    RowsChange& c = changes[i];
    for (size_t k = 0; k < c.members.size(); ++k) {
      Member& m = *c.table->members_.at(static_cast<size_t>(c.members[k]));
      c.table->write_rows(m, slots[i], rows[i][k]);
      m.version.fetch_add(1);
    }
    c.table->mark(slots[i]);
  }
}

KeyedTable::Export KeyedTable::export_rows(const std::vector<int>& members) const {
  std::shared_lock lock(mu_);
  std::vector<std::pair<int64_t, int64_t>> entries;
  entries.reserve(static_cast<size_t>(index_.size()));
  index_.for_each([&](int64_t key, int64_t slot) { entries.emplace_back(key, slot); });
  std::sort(entries.begin(), entries.end());
  std::vector<int64_t> keys(entries.size());
  std::vector<int64_t> slots(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) std::tie(keys[i], slots[i]) = entries[i];
  Export out;
  out.keys = Tensor::from_vector(keys);
  for (int member : members) {
    out.values.push_back(read_rows(*members_.at(static_cast<size_t>(member)), slots).to_host());
  }
  return out;
}

void KeyedTable::replace(const Tensor& keys, const std::vector<int>& members,
                         const std::vector<Tensor>& values) {
  const std::vector<int64_t> k = keys.to_vector<int64_t>();
  std::unique_lock lock(mu_);
  if (marking_) {
    index_.for_each([&](int64_t key, int64_t) { erased_.push_back(key); });
    for (int64_t s = 0; s < capacity_; ++s) marks_[static_cast<size_t>(s)].store(0);
  }
  index_.clear();
  free_.clear();
  next_slot_ = 0;
  size_.store(0, std::memory_order_relaxed);
  const std::vector<int64_t> slots = find_or_insert(k);
  for (size_t j = 0; j < members.size(); ++j) {
    write_rows(*members_.at(static_cast<size_t>(members[j])), slots, values[j]);
  }
  for (const auto& m : members_) m->version.fetch_add(1);
}

void KeyedTable::write_present(int member, std::span<const int64_t> keys, const Tensor& rows) {
  std::unique_lock lock(mu_);
  Member& m = *members_.at(static_cast<size_t>(member));
  const std::vector<int64_t> slots = find(keys);
  std::vector<int64_t> present_slots;
  std::vector<int64_t> positions;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] == HashIndex::kAbsent) continue;
    present_slots.push_back(slots[i]);
    positions.push_back(static_cast<int64_t>(i));
  }
  write_rows(m, present_slots, gather_rows(rows, positions));
  mark(present_slots);
  m.version.fetch_add(1);
}

void KeyedTable::start_marking() {
  std::unique_lock lock(mu_);
  if (marking_) return;
  marking_ = true;
  if (!marks_ && capacity_ > 0) {
    marks_ = std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(capacity_));
  }
}

KeyedTable::Marked KeyedTable::take_marked(bool take_erased) {
  std::unique_lock lock(mu_);
  Marked out;
  if (take_erased) {
    out.erased = std::move(erased_);
    erased_.clear();
  }
  if (!marking_) return out;
  index_.for_each([&](int64_t key, int64_t slot) {
    if (marks_[static_cast<size_t>(slot)].exchange(0, std::memory_order_relaxed) != 0) {
      out.changed.push_back(key);
    }
  });
  std::sort(out.changed.begin(), out.changed.end());
  std::sort(out.erased.begin(), out.erased.end());
  return out;
}

}  // namespace varstate::internal
