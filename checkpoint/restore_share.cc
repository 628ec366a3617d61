#include "checkpoint/restore_share.h"

#include <algorithm>
#include <functional>
#include <mutex>
#include <span>
#include <thread>

#include "checkpoint/crc32c.h"
#include "checkpoint/file_system.h"
#include "checkpoint/keyed_checkpoint.h"
#include "checkpoint/saver_io_internal.h"
#include "checkpoint/saver_restore_internal.h"
#include "checkpoint/tensor_bundle.h"
#include "runtime/variable_access.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

namespace varstate::internal {
namespace {

// Whether `slice` holds whole rows of a tensor of `shape`: every dimension
// but the first in full.
bool whole_rows(const TensorSlice& slice, const std::vector<int64_t>& shape) {
  for (int d = 1; d < static_cast<int>(shape.size()); ++d) {
    if (slice.start_at(d) != 0 || slice.length_at(d, shape) != shape[static_cast<size_t>(d)]) {
      return false;
    }
  }
  return !shape.empty();
}

// The rows [r0, r1) an item restores when it holds whole rows of the stored
// tensor `info`; nothing otherwise.
std::optional<std::pair<int64_t, int64_t>> item_rows(const Saver::Item& item,
                                                     const TensorInfo& info) {
  if (!item.slice) {
    if (item.variable.shape().dims() != info.shape) return std::nullopt;
    return std::pair<int64_t, int64_t>{0, info.shape[0]};
  }
  const SaveSliceInfo& s = *item.slice;
  const size_t rank = info.shape.size();
  if (s.full_shape != info.shape || s.var_offset.size() != rank || s.var_shape.size() != rank) {
    return std::nullopt;
  }
  for (size_t d = 1; d < rank; ++d) {
    if (s.var_offset[d] != 0 || s.var_shape[d] != info.shape[d]) return std::nullopt;
  }
  const int64_t r0 = s.var_offset[0], r1 = r0 + s.var_shape[0];
  if (r0 < 0 || r1 < r0 || r1 > info.shape[0]) return std::nullopt;
  return std::pair<int64_t, int64_t>{r0, r1};
}

// A value read and verified by this task alone, on its variable's device: a
// tensor stored whole straight into a host buffer, another slice cut from
// the stored pieces that overlap it, one at a time.
Tensor read_verified(const RestoreStep& step, const CheckpointReader& reader) {
  const Saver::Item& item = *step.item;
  Device& device = item.variable.device();
  if (!step.region && item.variable.dtype() != DType::kString) {
    if (const auto* bundle = dynamic_cast<const BundleReader*>(&reader)) {
      Tensor host(item.variable.dtype(), step.shape, DeviceManager::instance().cpu());
      std::span<std::byte> dst(static_cast<std::byte*>(host.raw_data()), host.nbytes());
      if (bundle->read_into(item.key, dst)) return host.on(device);
    }
  }
  TensorData data = step.region ? reader.read_slice(item.key, *step.region) : reader.read(item.key);
  return tensor_from_data(data, step.shape, device);
}

}  // namespace

// A stored piece wanted by one or more tasks, cut into segments at every
// task's range boundaries: bounds[s], bounds[s + 1] delimit segment s,
// readers[s] are the ranks that checksum it (the verifier for a gap).
struct RestoreShare::Piece {
  const TensorInfo* info = nullptr;
  int index = 0;
  uint64_t size = 0;
  std::vector<std::pair<int, std::pair<uint64_t, uint64_t>>> reads;  // rank, [begin, end)
  std::vector<uint64_t> bounds;
  std::vector<std::vector<int>> readers;
  std::vector<bool> gap;
  int verifier = 0;
};

// An item of whole rows [r0, r1) and the stored pieces that hold them.
struct RestoreShare::RowPlan {
  TensorInfo info;
  int64_t r0 = 0, r1 = 0, row_bytes = 0;
  struct Part {
    int index;
    int64_t begin, end;  // the rows it holds
    int64_t start;       // the piece's first row
  };
  std::vector<Part> parts;
};

RestoreShare::RestoreShare(std::vector<ShareItem> all, int rank, std::string save_path,
                           FileSystem* fs, int threads)
    : all_(std::move(all)),
      rank_(rank),
      save_path_(std::move(save_path)),
      fs_(fs),
      threads_(std::max(1, threads)) {
  for (const ShareItem& s : all_) {
    if (std::find(s.ranks.begin(), s.ranks.end(), rank_) == s.ranks.end()) continue;
    if (s.item.part == Saver::Part::kValue) {
      my_items_.push_back(&s.item);
    } else {
      my_keyed_items_.push_back(s.item);
    }
  }
}

RestoreShare::~RestoreShare() = default;

// The stored pieces of whole rows that cover `item`'s rows exactly, without
// overlaps; nothing for another layout.
std::optional<RestoreShare::RowPlan> RestoreShare::row_plan(const Saver::Item& item) const {
  if (!bundle_) return std::nullopt;
  std::optional<TensorInfo> info = bundle_->find(item.key);
  if (!info || info->slices.empty() || info->dtype != item.variable.dtype() ||
      info->dtype == DType::kString || info->shape.empty()) {
    return std::nullopt;
  }
  const auto rows = item_rows(item, *info);
  if (!rows) return std::nullopt;
  RowPlan plan{*info, rows->first, rows->second, 0, {}};
  int64_t covered = 0;
  for (size_t i = 0; i < info->slices.size(); ++i) {
    const TensorSlice& s = info->slices[i];
    if (!whole_rows(s, info->shape)) return std::nullopt;
    const int64_t s0 = s.start_at(0), s1 = s0 + s.length_at(0, info->shape);
    const int64_t lo = std::max(s0, plan.r0), hi = std::min(s1, plan.r1);
    if (lo >= hi) continue;
    plan.parts.push_back({static_cast<int>(i), lo, hi, s0});
    covered += hi - lo;
  }
  std::sort(plan.parts.begin(), plan.parts.end(),
            [](const RowPlan::Part& a, const RowPlan::Part& b) { return a.begin < b.begin; });
  for (size_t k = 1; k < plan.parts.size(); ++k) {
    if (plan.parts[k].begin < plan.parts[k - 1].end) return std::nullopt;  // overlapping pieces
  }
  if (covered != plan.r1 - plan.r0) return std::nullopt;
  plan.row_bytes = static_cast<int64_t>(dtype_size(info->dtype));
  for (size_t d = 1; d < info->shape.size(); ++d) plan.row_bytes *= info->shape[d];
  return plan;
}

// Every task's ranges of every shared piece, computed alike on every task.
void RestoreShare::plan_layout() {
  for (const ShareItem& s : all_) {
    const std::optional<RowPlan> plan = row_plan(s.item);
    if (!plan) continue;
    for (const RowPlan::Part& p : plan->parts) {
      Piece& piece = pieces_[{plan->info.name, p.index}];
      if (!piece.info) {
        piece.info = &infos_.try_emplace(plan->info.name, plan->info).first->second;
        piece.index = p.index;
        const TensorSlice& stored = plan->info.slices[static_cast<size_t>(p.index)];
        piece.size = static_cast<uint64_t>(stored.length_at(0, plan->info.shape) * plan->row_bytes);
      }
      const auto b = static_cast<uint64_t>((p.begin - p.start) * plan->row_bytes);
      const auto e = static_cast<uint64_t>((p.end - p.start) * plan->row_bytes);
      for (int r : s.ranks) piece.reads.push_back({r, {b, e}});
    }
  }
  for (auto& [id, piece] : pieces_) {
    piece.bounds = {0, piece.size};
    piece.verifier = piece.reads.front().first;
    for (const auto& [r, range] : piece.reads) {
      piece.bounds.push_back(range.first);
      piece.bounds.push_back(range.second);
      piece.verifier = std::min(piece.verifier, r);
    }
    std::sort(piece.bounds.begin(), piece.bounds.end());
    piece.bounds.erase(std::unique(piece.bounds.begin(), piece.bounds.end()), piece.bounds.end());
    for (size_t s = 0; s + 1 < piece.bounds.size(); ++s) {
      std::vector<int> readers;
      for (const auto& [r, range] : piece.reads) {
        if (range.first <= piece.bounds[s] && piece.bounds[s + 1] <= range.second) {
          readers.push_back(r);
        }
      }
      std::sort(readers.begin(), readers.end());
      readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
      piece.gap.push_back(readers.empty());
      if (readers.empty()) readers.push_back(piece.verifier);
      piece.readers.push_back(std::move(readers));
    }
  }
}

// One read of a chunk of a segment: into `dst`, or checksummed only (a
// gap) when it is null; or, with `src`, the chunk's mapped bytes
// checksummed in place.
struct RestoreShare::RangeRead {
  const Piece* piece;
  std::pair<PieceId, size_t> segment;
  uint64_t begin, end;
  std::byte* dst;
  const std::byte* src = nullptr;
  uint32_t crc = 0;
};

// Queues the reads of `plan`'s rows into `host`: each segment of each piece
// in chunks, so that the reader threads share even a single large piece.
void RestoreShare::queue_rows(const RowPlan& plan, Tensor& host, std::vector<RangeRead>& reads) {
  auto* base = static_cast<std::byte*>(host.raw_data());
  for (const RowPlan::Part& p : plan.parts) {
    const PieceId id{plan.info.name, p.index};
    const Piece& piece = pieces_.at(id);
    const auto b = static_cast<uint64_t>((p.begin - p.start) * plan.row_bytes);
    const auto e = static_cast<uint64_t>((p.end - p.start) * plan.row_bytes);
    std::byte* dst = base + (p.begin - plan.r0) * plan.row_bytes;
    for (size_t s = 0; s + 1 < piece.bounds.size(); ++s) {
      const uint64_t sb = piece.bounds[s], se = piece.bounds[s + 1];
      if (sb < b || se > e) continue;
      for (uint64_t at = sb; at < se; at += kChunkBytes) {
        reads.push_back({&piece, {id, s}, at, std::min(se, at + kChunkBytes), dst + (at - b)});
      }
    }
  }
}

// Maps each part of `plan`'s rows and queues the checksums of its segments
// in place, in chunks; `runs` gets the mapped rows for assign(). False,
// queueing and keeping nothing, where a part cannot be mapped.
bool RestoreShare::queue_mapped_rows(const RowPlan& plan, std::vector<RowBytes>& runs,
                                     std::vector<RangeRead>& reads) {
  const size_t queued = reads.size(), mapped = mappings_.size();
  for (const RowPlan::Part& p : plan.parts) {
    const PieceId id{plan.info.name, p.index};
    const Piece& piece = pieces_.at(id);
    const auto b = static_cast<uint64_t>((p.begin - p.start) * plan.row_bytes);
    const auto e = static_cast<uint64_t>((p.end - p.start) * plan.row_bytes);
    std::unique_ptr<MappedRegion> region = bundle_->map_slice_range(plan.info, p.index, b, e);
    if (!region) {
      reads.resize(queued);
      mappings_.resize(mapped);
      runs.clear();
      return false;
    }
    const std::byte* src = region->data();
    runs.push_back({p.begin - plan.r0, src, static_cast<size_t>(e - b)});
    mappings_.push_back(std::move(region));
    for (size_t s = 0; s + 1 < piece.bounds.size(); ++s) {
      const uint64_t sb = piece.bounds[s], se = piece.bounds[s + 1];
      if (sb < b || se > e) continue;
      for (uint64_t at = sb; at < se; at += kChunkBytes) {
        reads.push_back(
            {&piece, {id, s}, at, std::min(se, at + kChunkBytes), nullptr, src + (at - b)});
      }
    }
  }
  return true;
}

// The verifier checksums the bytes of its pieces that no task restores.
void RestoreShare::queue_gaps(std::vector<RangeRead>& reads) const {
  for (const auto& [id, piece] : pieces_) {
    if (piece.verifier != rank_) continue;
    for (size_t s = 0; s + 1 < piece.bounds.size(); ++s) {
      if (!piece.gap[s]) continue;
      reads.push_back({&piece, {id, s}, piece.bounds[s], piece.bounds[s + 1], nullptr});
    }
  }
}

// Runs `reads` on up to threads_ threads, each a contiguous run of about
// the same bytes (moving forward through the file), then joins each
// segment's chunk checksums into mine_.
void RestoreShare::run_reads(std::vector<RangeRead>& reads) {
  uint64_t total = 0;
  for (const RangeRead& r : reads) total += r.end - r.begin;
  const size_t n =
      std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(threads_), reads.size()));
  std::vector<std::exception_ptr> errors(n);
  auto run = [&](size_t t, size_t from, size_t to) {
    try {
      for (size_t i = from; i < to; ++i) {
        RangeRead& r = reads[i];
        r.crc = r.src != nullptr ? crc32c::value(r.src, static_cast<size_t>(r.end - r.begin))
                                 : bundle_->read_slice_range_crc(*r.piece->info, r.piece->index,
                                                                 r.begin, r.end, r.dst);
      }
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  size_t from = 0;
  uint64_t done = 0;
  for (size_t t = 0; t < n; ++t) {
    size_t to = from;
    const uint64_t share = total * (t + 1) / n;
    while (to < reads.size() && (t + 1 == n || done < share)) {
      done += reads[to].end - reads[to].begin;
      ++to;
    }
    if (t + 1 == n) {
      run(t, from, to);
    } else {
      threads.emplace_back(run, t, from, to);
    }
    from = to;
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  std::map<std::pair<PieceId, size_t>, uint32_t> joined;
  for (const RangeRead& r : reads) {
    const auto [it, first] = joined.try_emplace(r.segment, r.crc);
    if (!first) it->second = crc32c::combine(it->second, r.crc, r.end - r.begin);
  }
  for (const auto& [segment, crc] : joined) {
    const auto [it, fresh] = mine_.try_emplace(segment, crc);
    if (!fresh && it->second != crc) {
      const Piece& piece = pieces_.at(segment.first);
      std::string where;
      bundle_->stored_slice_crc32c(*piece.info, piece.index, &where);
      throw DataLossError(where + ": bytes [" + std::to_string(piece.bounds[segment.second]) +
                          ", " + std::to_string(piece.bounds[segment.second + 1]) +
                          ") read twice differ (crc32c " + crc32c::hex(it->second) + ", then " +
                          crc32c::hex(crc) + ")");
    }
  }
}

std::vector<uint32_t> RestoreShare::my_checksums() const {
  std::vector<uint32_t> out;
  for (const auto& [id, piece] : pieces_) {
    for (size_t s = 0; s < piece.readers.size(); ++s) {
      const std::vector<int>& readers = piece.readers[s];
      if (std::binary_search(readers.begin(), readers.end(), rank_))
        out.push_back(mine_.at({id, s}));
    }
  }
  return out;
}

std::vector<uint32_t> RestoreShare::read() {
  reader_ = open_for_restore(save_path_, fs_);
  bundle_ = dynamic_cast<const BundleReader*>(reader_.get());
  // Dynamic variables: every tensor read whole and checked now.
  keyed_.reset();
  if (!my_keyed_items_.empty()) keyed_ = std::make_unique<KeyedRestore>(my_keyed_items_, *reader_);
  if (my_items_.empty()) {
    plan_layout();  // no value to read, but the same verdict to reach
    return {};
  }
  // Every key, dtype and shape checked before any data is read.
  std::vector<RestoreStep> steps;
  steps.reserve(my_items_.size());
  for (const Saver::Item* item : my_items_) {
    steps.push_back(plan_restore(*item, *reader_, /*reshape=*/false));
  }
  plan_layout();
  values_.clear();
  values_.reserve(steps.size());
  mapped_runs_.assign(steps.size(), {});
  mappings_.clear();
  std::vector<RangeRead> reads;
  std::vector<size_t> to_device;
  for (const RestoreStep& step : steps) {
    const Saver::Item& item = *step.item;
    const size_t i = values_.size();
    if (const std::optional<RowPlan> plan = row_plan(item)) {
      // Rows that move to where they live (this task's window, for a
      // remote variable): checksummed where they are mapped (a table of no
      // rows takes the buffered path, an empty value).
      if (!storage(item.variable).updates_in_place() && !plan->parts.empty() &&
          queue_mapped_rows(*plan, mapped_runs_[i], reads)) {
        values_.emplace_back();
        continue;
      }
      Tensor host(item.variable.dtype(), item.variable.shape(), DeviceManager::instance().cpu());
      queue_rows(*plan, host, reads);
      if (!item.variable.device().is_cpu()) to_device.push_back(values_.size());
      values_.push_back(std::move(host));
    } else {
      values_.push_back(read_verified(step, *reader_));
    }
  }
  queue_gaps(reads);
  run_reads(reads);
  for (size_t i : to_device) values_[i] = values_[i].to(my_items_[i]->variable.device());
  return my_checksums();
}

std::optional<RestoreShare::Failure> RestoreShare::verify(
    const std::vector<std::vector<uint32_t>>& by_rank) const {
  std::vector<size_t> next(by_rank.size(), 0);
  for (const auto& [id, piece] : pieces_) {
    std::string where;
    const uint32_t stored = bundle_->stored_slice_crc32c(*piece.info, piece.index, &where);
    uint32_t crc = 0;
    for (size_t s = 0; s < piece.readers.size(); ++s) {
      const uint64_t sb = piece.bounds[s], se = piece.bounds[s + 1];
      std::vector<uint32_t> got;
      for (int r : piece.readers[s]) {
        const auto k = static_cast<size_t>(r);
        if (k >= by_rank.size() || next[k] >= by_rank[k].size()) {
          return Failure{{r},
                         where + ": rank " + std::to_string(r) +
                             " sent fewer range checksums than its ranges"};
        }
        got.push_back(by_rank[k][next[k]++]);
      }
      if (std::adjacent_find(got.begin(), got.end(), std::not_equal_to<>()) != got.end()) {
        std::string values;
        for (uint32_t v : got) values += (values.empty() ? "" : ", ") + crc32c::hex(v);
        return Failure{piece.readers[s], where + ": the tasks reading its bytes [" +
                                             std::to_string(sb) + ", " + std::to_string(se) +
                                             ") read different bytes (crc32c " + values + ")"};
      }
      crc = crc32c::combine(crc, got.front(), se - sb);
    }
    if (crc != stored) {
      return Failure{{piece.verifier},
                     where + ": crc32c mismatch (expected " + crc32c::hex(stored) + ", got " +
                         crc32c::hex(crc) + ")"};
    }
  }
  return std::nullopt;
}

void RestoreShare::assign() {
  for (size_t i = 0; i < my_items_.size(); ++i) {
    std::lock_guard lock(update_mutex(my_items_[i]->variable));
    Variable variable = my_items_[i]->variable;
    if (!mapped_runs_[i].empty()) {
      storage(variable).replace_rows(variable, mapped_runs_[i]);
    } else {
      set_value(variable, values_[i]);
    }
  }
  if (keyed_) keyed_->apply();
}

}  // namespace varstate::internal
