#include "checkpoint/checkpoint_chain.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "checkpoint/checkpoint_files.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/file_system.h"
#include "varstate/checkpoint_chain.h"
#include "varstate/checkpoint_state.h"
#include "varstate/error.h"

namespace varstate {
namespace {

constexpr const char* kIdsSuffix = "/.delta_ids";
constexpr const char* kRowsSuffix = "/.delta_rows";

std::string part_suffix(std::optional<int64_t> part_offset) {
  return part_offset ? "@" + std::to_string(*part_offset) : "";
}

std::string hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

std::string in_chain(const std::string& head) { return "checkpoint chain of " + quoted(head); }

// The shape of a row entry holding n rows of a tensor of `full` shape.
std::vector<int64_t> rows_shape(int64_t n, const std::vector<int64_t>& full) {
  std::vector<int64_t> shape{n};
  shape.insert(shape.end(), full.begin() + 1, full.end());
  return shape;
}

TensorInfo as_whole(TensorInfo info) {
  info.slices.clear();
  info.shard = -1;
  info.offset = -1;
  info.size = -1;
  return info;
}

int64_t stored_bytes(const TensorInfo& info) {
  if (info.size >= 0) return info.size;
  const int64_t elem =
      info.dtype == DType::kString ? 8 : static_cast<int64_t>(dtype_size(info.dtype));
  int64_t n = 0;
  for (const TensorSlice& s : info.slices) n += num_elements(s.slice_shape(info.shape));
  return n * elem;
}

// Per key: the rows a delta holds and their bytes, or the whole tensor's.
std::vector<DeltaEntry> delta_entries(const BundleReader& delta) {
  std::map<std::string, DeltaEntry> by_key;
  for (const TensorInfo& info : delta.list()) {
    if (info.name == kChainKey) continue;
    std::string key = info.name;
    bool rows = false;
    for (const char* suffix : {kIdsSuffix, kRowsSuffix}) {
      const auto at = info.name.rfind(suffix);
      if (at != std::string::npos) {
        key = info.name.substr(0, at);
        rows = true;
      }
    }
    DeltaEntry& e = by_key[key];
    e.key = key;
    e.bytes += stored_bytes(info);
    if (rows && info.name.find(kIdsSuffix) != std::string::npos) {
      e.rows = std::max<int64_t>(e.rows, 0) + info.shape.at(0);
    }
  }
  std::vector<DeltaEntry> out;
  for (auto& [key, e] : by_key) out.push_back(std::move(e));
  return out;
}

}  // namespace

std::string delta_ids_key(const std::string& key, std::optional<int64_t> part_offset) {
  return key + kIdsSuffix + part_suffix(part_offset);
}

std::string delta_rows_key(const std::string& key, std::optional<int64_t> part_offset) {
  return key + kRowsSuffix + part_suffix(part_offset);
}

uint32_t index_checksum(FileSystem& fs, const std::string& prefix) {
  const std::string bytes = read_file_to_string(fs, bundle_index_filename(prefix));
  return crc32c::extend(0, bytes.data(), bytes.size());
}

std::vector<std::string> chain_record_strings(const std::vector<ChainRecordLink>& links) {
  std::vector<std::string> out{kChainMagic};
  for (const ChainRecordLink& l : links) out.push_back(l.name + "\t" + hex32(l.index_crc32c));
  return out;
}

std::optional<std::vector<ChainRecordLink>> read_chain_record(const BundleReader& bundle) {
  if (!bundle.contains(kChainKey)) return std::nullopt;
  const std::vector<std::string> lines = bundle.read(kChainKey).values<std::string>();
  auto bad = [&](const std::string& why) {
    return DataLossError("checkpoint " + quoted(bundle.path()) + ": its chain record " +
                         quoted(kChainKey) + " " + why);
  };
  if (lines.empty() || lines[0] != kChainMagic)
    throw bad("does not start with " + quoted(kChainMagic));
  if (lines.size() < 2) throw bad("names no base");
  std::vector<ChainRecordLink> links;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto tab = lines[i].rfind('\t');
    if (tab == std::string::npos || tab == 0 || lines[i].size() - tab != 9 ||
        lines[i].find('/') != std::string::npos) {
      throw bad("has a malformed link " + quoted(lines[i]));
    }
    ChainRecordLink link{lines[i].substr(0, tab), 0};
    link.index_crc32c = static_cast<uint32_t>(std::stoul(lines[i].substr(tab + 1), nullptr, 16));
    links.push_back(std::move(link));
  }
  return links;
}

std::vector<std::unique_ptr<BundleReader>> open_chain(std::unique_ptr<BundleReader> head,
                                                      FileSystem& fs) {
  std::vector<std::unique_ptr<BundleReader>> out;
  const std::optional<std::vector<ChainRecordLink>> record = read_chain_record(*head);
  if (!record) {
    out.push_back(std::move(head));
    return out;
  }
  const std::string dir = dirname_of(head->path());
  for (size_t i = 0; i < record->size(); ++i) {
    const ChainRecordLink& link = (*record)[i];
    const std::string path = join_path(dir, link.name);
    const std::string index = bundle_index_filename(path);
    const std::string what = in_chain(head->path()) + ": " + (i == 0 ? "base " : "delta ");
    if (!fs.file_exists(index)) {
      throw NotFoundError(what + quoted(path) + " is missing (no file " + quoted(index) + ")");
    }
    const uint32_t crc = index_checksum(fs, path);
    if (crc != link.index_crc32c) {
      throw DataLossError(what + quoted(index) +
                          " is not the file the delta was saved on, or is corrupt: crc32c "
                          "expected 0x" +
                          hex32(link.index_crc32c) + ", got 0x" + hex32(crc));
    }
    auto reader = std::make_unique<BundleReader>(path, &fs);
    const auto own = read_chain_record(*reader);
    const std::vector<ChainRecordLink> expected(record->begin(),
                                                record->begin() + static_cast<ptrdiff_t>(i));
    if ((i == 0 && own) || (i > 0 && (!own || *own != expected))) {
      throw DataLossError(what + quoted(path) + " belongs to another chain" +
                          (i == 0 ? " (it is a delta, not a full checkpoint)" : ""));
    }
    out.push_back(std::move(reader));
  }
  out.push_back(std::move(head));
  return out;
}

// ---------------------------------------------------------------------------
// ChainReader

ChainReader::ChainReader(std::vector<std::unique_ptr<BundleReader>> links)
    : CheckpointReader(links.back()->path()), links_(std::move(links)) {
  rows_.resize(links_.size());
  for (size_t i = 1; i < links_.size(); ++i) {
    for (const TensorInfo& info : links_[i]->list()) {
      const auto at = info.name.rfind(kIdsSuffix);
      if (at == std::string::npos) continue;
      rows_[i][info.name.substr(0, at)].push_back(info.name.substr(at + std::strlen(kIdsSuffix)));
    }
    check_delta(i);
  }
}

void ChainReader::check_delta(size_t link) const {
  const BundleReader& delta = *links_[link];
  const BundleReader& base = *links_[0];
  auto bad = [&](const std::string& key, const std::string& why) {
    return DataLossError(in_chain(path()) + ": delta " + quoted(delta.path()) + ", " + quoted(key) +
                         ": " + why);
  };
  for (const TensorInfo& info : delta.list()) {
    if (info.name == kChainKey || info.name.find("/.delta_") != std::string::npos) continue;
    const std::optional<TensorInfo> b = base.find(info.name);
    if (!b) throw bad(info.name, "not in the base " + quoted(base.path()));
    if (b->dtype != info.dtype || b->shape != info.shape) {
      throw bad(info.name, "dtype/shape " + std::string(dtype_name(info.dtype)) +
                               shape_string(info.shape) + " differ from the base's " +
                               std::string(dtype_name(b->dtype)) + shape_string(b->shape));
    }
  }
  for (const auto& [key, suffixes] : rows_[link]) {
    const std::optional<TensorInfo> b = base.find(key);
    if (!b || b->shape.empty()) throw bad(key, "row entries for a tensor the base has no rows of");
    for (const std::string& suffix : suffixes) {
      const std::string ids = key + kIdsSuffix + suffix;
      const std::string rows = key + kRowsSuffix + suffix;
      const TensorInfo i = delta.info(ids);
      const std::optional<TensorInfo> r = delta.find(rows);
      if (i.dtype != DType::kInt64 || i.shape.size() != 1) {
        throw bad(ids, "must be a vector of int64, is " + std::string(dtype_name(i.dtype)) +
                           shape_string(i.shape));
      }
      if (!r) throw bad(rows, "missing (its ids are there)");
      const std::vector<int64_t> want = rows_shape(i.shape[0], b->shape);
      if (r->dtype != b->dtype || r->shape != want) {
        throw bad(rows, "must be " + std::string(dtype_name(b->dtype)) + shape_string(want) +
                            ", is " + std::string(dtype_name(r->dtype)) + shape_string(r->shape));
      }
    }
  }
}

std::vector<TensorInfo> ChainReader::list() const {
  std::vector<TensorInfo> out;
  for (TensorInfo& info : links_[0]->list()) out.push_back(as_whole(std::move(info)));
  return out;
}

std::optional<TensorInfo> ChainReader::find(std::string_view name) const {
  std::optional<TensorInfo> info = links_[0]->find(name);
  if (!info) return std::nullopt;
  return as_whole(std::move(*info));
}

void ChainReader::check_stored(const TensorInfo& /*info*/, int /*slice_index*/) const {}

std::vector<ChainReader::RowEntry> ChainReader::row_entries(size_t link,
                                                            std::string_view key) const {
  std::vector<RowEntry> out;
  const auto it = rows_.at(link).find(key);
  if (it == rows_[link].end()) return out;
  for (const std::string& suffix : it->second) {
    const std::string k(key);
    out.push_back({k + kIdsSuffix + suffix, k + kRowsSuffix + suffix});
  }
  return out;
}

std::vector<int64_t> ChainReader::read_row_ids(size_t link, const std::string& ids_key,
                                               int64_t num_rows) const {
  const BundleReader& delta = *links_.at(link);
  std::vector<int64_t> ids = delta.read(ids_key).values<int64_t>();
  for (const int64_t id : ids) {
    if (id < 0 || id >= num_rows) {
      throw DataLossError(in_chain(path()) + ": delta " + quoted(delta.path()) + ", " +
                          quoted(ids_key) + ": row " + std::to_string(id) + " is not in [0, " +
                          std::to_string(num_rows) + ")");
    }
  }
  return ids;
}

void ChainReader::apply_rows(size_t link, const std::string& key, const std::string& suffix,
                             const RowTarget& t) const {
  const std::vector<int64_t> ids = read_row_ids(link, key + kIdsSuffix + suffix, t.shape[0]);
  const TensorData rows = links_[link]->read(key + kRowsSuffix + suffix);
  const int64_t width = num_elements(std::span<const int64_t>(t.shape).subspan(1));
  const size_t elem = t.dtype == DType::kString ? 1 : dtype_size(t.dtype);
  const auto n = static_cast<size_t>(width);
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < t.begin || ids[k] >= t.end || n == 0) continue;
    const size_t src = k * n;
    const auto dst = static_cast<size_t>(ids[k] - t.begin) * n;
    if (t.dtype == DType::kString) {
      std::copy_n(rows.strings.begin() + static_cast<ptrdiff_t>(src), n,
                  t.strings + static_cast<ptrdiff_t>(dst));
    } else {
      std::memcpy(t.bytes + dst * elem, rows.bytes.data() + src * elem, n * elem);
    }
  }
}

void ChainReader::apply_all_rows(const std::string& key, const RowTarget& target) const {
  for (size_t i = 1; i < links_.size(); ++i) {
    const auto rows = rows_[i].find(key);
    if (rows == rows_[i].end()) continue;
    for (const std::string& suffix : rows->second) apply_rows(i, key, suffix, target);
  }
}

void ChainReader::apply_pieces(size_t link, const std::string& key, const TensorSlice& region,
                               TensorData& out) const {
  const std::optional<TensorInfo> stored = links_[link]->find(key);
  if (!stored) return;
  std::vector<TensorSlice> pieces = stored->slices;
  if (pieces.empty()) pieces.push_back(TensorSlice::full(static_cast<int>(stored->shape.size())));
  for (const TensorSlice& piece : pieces) {
    const std::optional<TensorSlice> meet = piece.intersect(region, stored->shape);
    if (!meet || num_elements(meet->slice_shape(stored->shape)) == 0) continue;
    copy_slice_region(links_[link]->read_slice(key, *meet), *meet, out, region, *meet,
                      stored->shape);
  }
}

TensorData ChainReader::read_region(std::string_view name, const TensorSlice& region) const {
  const std::string key(name);
  const TensorInfo info = links_[0]->info(key);
  const int rank = static_cast<int>(info.shape.size());
  bool whole_rows = rank > 0;
  for (int d = 1; d < rank; ++d) {
    whole_rows = whole_rows && region.start_at(d) == 0 &&
                 region.length_at(d, info.shape) == info.shape[static_cast<size_t>(d)];
  }
  if (!whole_rows && !region.covers(info.shape)) {
    // Rows only partly inside the region: merge the whole tensor, then cut.
    const TensorSlice full = TensorSlice::full(rank);
    const TensorData whole = read_region(name, full);
    TensorData out;
    out.dtype = info.dtype;
    out.shape = region.slice_shape(info.shape);
    if (info.dtype == DType::kString) {
      out.strings.resize(static_cast<size_t>(out.num_elements()));
    } else {
      out.bytes.resize(static_cast<size_t>(out.num_elements()) * dtype_size(info.dtype));
    }
    copy_slice_region(whole, full, out, region, region, info.shape);
    return out;
  }
  TensorData out = links_[0]->read_slice(key, region);
  for (size_t i = 1; i < links_.size(); ++i) {
    apply_pieces(i, key, region, out);
    const auto rows = rows_[i].find(key);
    if (rows == rows_[i].end() || rank == 0) continue;
    const int64_t begin = region.start_at(0);
    const RowTarget target{
        info.dtype,       info.shape,        begin, begin + region.length_at(0, info.shape),
        out.bytes.data(), out.strings.data()};
    for (const std::string& suffix : rows->second) apply_rows(i, key, suffix, target);
  }
  return out;
}

bool ChainReader::read_into(std::string_view name, std::span<std::byte> dst) const {
  const std::string key(name);
  const TensorInfo info = links_[0]->info(key);
  if (info.dtype == DType::kString) return false;
  bool pieces = false;
  for (size_t i = 1; i < links_.size(); ++i) pieces = pieces || links_[i]->contains(key);
  if (pieces || info.shape.empty() || !links_[0]->read_into(key, dst)) {
    const TensorData value =
        read_region(name, TensorSlice::full(static_cast<int>(info.shape.size())));
    if (value.bytes.size() != dst.size()) {
      throw InvalidArgumentError("reading " + quoted(key) + " into a buffer of " +
                                 std::to_string(dst.size()) + " bytes: it has " +
                                 std::to_string(value.bytes.size()));
    }
    std::copy(value.bytes.begin(), value.bytes.end(), dst.begin());
    return true;
  }
  apply_all_rows(key, {info.dtype, info.shape, 0, info.shape[0], dst.data(), nullptr});
  return true;
}

TensorData ChainReader::read_stored(const TensorInfo& info, int /*slice_index*/) const {
  return read_region(info.name, TensorSlice::full(static_cast<int>(info.shape.size())));
}

// ---------------------------------------------------------------------------
// Public API

std::vector<ChainLink> checkpoint_chain(const std::string& checkpoint, FileSystem* fs) {
  FileSystem& files = fs ? *fs : *default_file_system();
  if (!files.file_exists(bundle_index_filename(checkpoint))) {
    if (checkpoint_exists(checkpoint, &files)) return {{checkpoint, false}};  // V1
    throw ValueError("The passed save_path is not a valid checkpoint: " + checkpoint);
  }
  std::vector<ChainLink> out;
  for (const auto& link : open_chain(std::make_unique<BundleReader>(checkpoint, &files), files)) {
    out.push_back({link->path(), !out.empty(), {}});
    if (out.back().is_delta) out.back().entries = delta_entries(*link);
  }
  return out;
}

}  // namespace varstate
