#include "checkpoint/checkpoint_chain.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "checkpoint/checkpoint_files.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/file_system.h"
#include "checkpoint/keyed_checkpoint.h"
#include "varstate/checkpoint_chain.h"
#include "varstate/checkpoint_state.h"
#include "varstate/error.h"

namespace varstate {
namespace {

constexpr const char* kIdsSuffix = "/.delta_ids";
constexpr const char* kRowsSuffix = "/.delta_rows";
constexpr const char* kKeysDeltaSuffix = "/.delta_keys";
constexpr const char* kErasedSuffix = "/.delta_erased";
constexpr const char* kKeyRowsSuffix = "/.delta_key_rows";
constexpr const char* kDeltaEntry = "/.delta_";

// The keys tensor whose keys index the rows of `rows_tensor`
// ("emb-values" -> "emb-keys"), or "" for a tensor of no dynamic variable.
std::string keys_tensor_of(std::string_view rows_tensor) {
  for (const char* suffix :
       {internal::kValuesSuffix, internal::kVersionsSuffix, internal::kCountsSuffix}) {
    if (rows_tensor.ends_with(suffix)) {
      return std::string(rows_tensor.substr(0, rows_tensor.size() - std::strlen(suffix))) +
             internal::kKeysSuffix;
    }
  }
  return "";
}

// The tensor a delta entry ("<key>/.delta_<what>[@<offset>]") belongs to.
std::string entry_tensor(const std::string& name) {
  const auto at = name.rfind(kDeltaEntry);
  return at == std::string::npos ? name : name.substr(0, at);
}

// Throws `bad(why)` unless `keys` ascend strictly.
template <typename Bad>
void check_ascending(const std::vector<int64_t>& keys, const Bad& bad) {
  for (size_t i = 1; i < keys.size(); ++i) {
    if (keys[i] <= keys[i - 1]) {
      throw bad("the keys are not ascending and distinct: key " + std::to_string(i) + " (" +
                std::to_string(keys[i]) + ") follows " + std::to_string(keys[i - 1]));
    }
  }
}

// The box `region` of `whole`, a tensor's full value.
TensorData cut(TensorData whole, const TensorSlice& region) {
  if (region.covers(whole.shape)) return whole;
  TensorData out;
  out.dtype = whole.dtype;
  out.shape = region.slice_shape(whole.shape);
  if (whole.dtype == DType::kString) {
    out.strings.resize(static_cast<size_t>(out.num_elements()));
  } else {
    out.bytes.resize(static_cast<size_t>(out.num_elements()) * dtype_size(whole.dtype));
  }
  copy_slice_region(whole, TensorSlice::full(static_cast<int>(whole.shape.size())), out, region,
                    region, whole.shape);
  return out;
}

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
    const std::string key = entry_tensor(info.name);
    DeltaEntry& e = by_key[key];
    e.key = key;
    e.bytes += stored_bytes(info);
    // Rows: the ids of a variable's rows, the keys of a dynamic variable's
    // (its erasures count none), each rows tensor's rows by key.
    for (const char* suffix : {kIdsSuffix, kKeysDeltaSuffix, kKeyRowsSuffix}) {
      if (info.name.find(suffix) != std::string::npos) {
        e.rows = std::max<int64_t>(e.rows, 0) + info.shape.at(0);
      }
    }
    if (info.name.find(kErasedSuffix) != std::string::npos) e.rows = std::max<int64_t>(e.rows, 0);
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

std::string delta_keys_key(const std::string& keys_tensor) {
  return keys_tensor + kKeysDeltaSuffix;
}

std::string delta_erased_key(const std::string& keys_tensor) { return keys_tensor + kErasedSuffix; }

std::string delta_key_rows_key(const std::string& rows_tensor) {
  return rows_tensor + kKeyRowsSuffix;
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
  // The dynamic variables some delta changes by key, merged now: their
  // shapes are the merged key counts.
  std::set<std::string> keyed;
  for (size_t i = 1; i < links_.size(); ++i) {
    for (const TensorInfo& info : links_[i]->list()) {
      if (info.name.ends_with(kKeysDeltaSuffix)) keyed.insert(entry_tensor(info.name));
    }
  }
  for (const std::string& keys_tensor : keyed) merge_keys(keys_tensor);
}

void ChainReader::merge_keys(const std::string& keys_tensor) {
  const BundleReader& base = *links_[0];
  auto bad_in = [this](const BundleReader& link, const std::string& key) {
    return [&link, key, this](const std::string& why) {
      return DataLossError(in_chain(path()) + ": " + quoted(link.path()) + ", " + quoted(key) +
                           ": " + why);
    };
  };
  auto int64_vector = [](const TensorInfo& info) {
    return info.dtype == DType::kInt64 && info.shape.size() == 1;
  };
  auto described = [](const TensorInfo& info) {
    return std::string(dtype_name(info.dtype)) + shape_string(info.shape);
  };
  const std::optional<TensorInfo> b = base.find(keys_tensor);
  if (!b || !int64_vector(*b)) {
    throw bad_in(base, keys_tensor)(
        "the deltas change these keys; the base must hold them as an int64 vector, " +
        (b ? "holds " + described(*b) : std::string("lacks them")));
  }
  // The tensors of rows by these keys: each must have a row per key, and
  // each delta that changes the keys their rows.
  std::vector<TensorInfo> rows_tensors;
  for (const TensorInfo& info : base.list()) {
    if (keys_tensor_of(info.name) != keys_tensor) continue;
    if (info.dtype == DType::kString || info.shape.empty() || info.shape[0] != b->shape[0]) {
      throw bad_in(base, info.name)("must hold a fixed-width row per key of " +
                                    quoted(keys_tensor) + " (" + std::to_string(b->shape[0]) +
                                    "), holds " + described(info));
    }
    rows_tensors.push_back(info);
  }
  KeyedMerge merge;
  merge.keys = base.read(keys_tensor).values<int64_t>();
  check_ascending(merge.keys, bad_in(base, keys_tensor));
  merge.from.reserve(merge.keys.size());
  for (size_t r = 0; r < merge.keys.size(); ++r) merge.from.emplace_back(0, r);
  for (size_t i = 1; i < links_.size(); ++i) {
    const BundleReader& delta = *links_[i];
    const std::string upserts_key = delta_keys_key(keys_tensor);
    const std::string erased_key = delta_erased_key(keys_tensor);
    if (!delta.contains(upserts_key)) {
      for (const std::string& key : {keys_tensor, erased_key}) {
        if (delta.contains(key)) {
          throw bad_in(delta, key)("in a delta without " + quoted(upserts_key) +
                                   ", in a chain that changes these keys by key");
        }
      }
      continue;
    }
    // The keys written, and those erased.
    std::vector<int64_t> upserts;
    std::vector<int64_t> erased;
    for (const std::string& key : {upserts_key, erased_key}) {
      const std::optional<TensorInfo> info = delta.find(key);
      if (!info) continue;
      if (!int64_vector(*info)) {
        throw bad_in(delta, key)("must be a vector of int64, is " + described(*info));
      }
      (key == upserts_key ? upserts : erased) = delta.read(key).values<int64_t>();
      check_ascending(key == upserts_key ? upserts : erased, bad_in(delta, key));
    }
    for (const TensorInfo& rows : rows_tensors) {
      const std::string key = delta_key_rows_key(rows.name);
      const std::optional<TensorInfo> info = delta.find(key);
      const std::vector<int64_t> want =
          rows_shape(static_cast<int64_t>(upserts.size()), rows.shape);
      if (!info || info->dtype != rows.dtype || info->shape != want) {
        throw bad_in(delta, key)("must hold the rows of the " + std::to_string(upserts.size()) +
                                 " keys of " + quoted(upserts_key) + " as " +
                                 std::string(dtype_name(rows.dtype)) + shape_string(want) +
                                 (info ? ", holds " + described(*info) : ", is missing"));
      }
    }
    // Erasures first, then the rows written (which win over the old ones).
    KeyedMerge next;
    next.keys.reserve(merge.keys.size() + upserts.size());
    next.from.reserve(merge.keys.size() + upserts.size());
    size_t old = 0;
    size_t gone = 0;
    size_t up = 0;
    while (old < merge.keys.size() || up < upserts.size()) {
      if (up == upserts.size() || (old < merge.keys.size() && merge.keys[old] < upserts[up])) {
        const int64_t key = merge.keys[old];
        while (gone < erased.size() && erased[gone] < key) ++gone;
        if (gone == erased.size() || erased[gone] != key) {
          next.keys.push_back(key);
          next.from.push_back(merge.from[old]);
        }
        ++old;
        continue;
      }
      if (old < merge.keys.size() && merge.keys[old] == upserts[up]) ++old;
      next.keys.push_back(upserts[up]);
      next.from.emplace_back(static_cast<uint32_t>(i), static_cast<int64_t>(up));
      ++up;
    }
    merge = std::move(next);
  }
  for (const TensorInfo& rows : rows_tensors) keyed_rows_[rows.name] = keys_tensor;
  keyed_[keys_tensor] = std::move(merge);
}

const ChainReader::KeyedMerge* ChainReader::keyed_merge(std::string_view name) const {
  if (const auto it = keyed_.find(name); it != keyed_.end()) return &it->second;
  if (const auto it = keyed_rows_.find(name); it != keyed_rows_.end()) {
    return &keyed_.find(it->second)->second;
  }
  return nullptr;
}

bool ChainReader::merges_keys(std::string_view name) const { return keyed_merge(name) != nullptr; }

TensorData ChainReader::read_merged(const std::string& name, const KeyedMerge& merge) const {
  const auto n = static_cast<int64_t>(merge.keys.size());
  if (keyed_.contains(name)) return TensorData::from_values({n}, merge.keys);
  const TensorInfo info = links_[0]->info(name);
  TensorData out;
  out.dtype = info.dtype;
  out.shape = info.shape;
  out.shape[0] = n;
  const size_t row =
      static_cast<size_t>(num_elements(std::span<const int64_t>(out.shape).subspan(1))) *
      dtype_size(out.dtype);
  out.bytes.resize(static_cast<size_t>(n) * row);
  // Each link's rows, read when a key first needs them.
  std::vector<std::optional<TensorData>> sources(links_.size());
  for (size_t r = 0; r < merge.keys.size(); ++r) {
    const auto [link, at] = merge.from[r];
    std::optional<TensorData>& source = sources[link];
    if (!source) {
      source = link == 0 ? links_[0]->read(name) : links_[link]->read(delta_key_rows_key(name));
    }
    std::memcpy(out.bytes.data() + r * row, source->bytes.data() + static_cast<size_t>(at) * row,
                row);
  }
  return out;
}

void ChainReader::check_delta(size_t link) const {
  const BundleReader& delta = *links_[link];
  const BundleReader& base = *links_[0];
  auto bad = [&](const std::string& key, const std::string& why) {
    return DataLossError(in_chain(path()) + ": delta " + quoted(delta.path()) + ", " + quoted(key) +
                         ": " + why);
  };
  for (const TensorInfo& info : delta.list()) {
    // A dynamic variable's entries come with its keys' (merge_keys checks
    // them).
    if (info.name.ends_with(kErasedSuffix) || info.name.ends_with(kKeyRowsSuffix)) {
      const std::string tensor = entry_tensor(info.name);
      const std::string keys =
          delta_keys_key(info.name.ends_with(kErasedSuffix) ? tensor : keys_tensor_of(tensor));
      if (!delta.contains(keys)) throw bad(info.name, "the delta lacks " + quoted(keys));
    }
    if (info.name == kChainKey || info.name.find(kDeltaEntry) != std::string::npos) continue;
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

TensorInfo ChainReader::as_read(TensorInfo info) const {
  info = as_whole(std::move(info));
  if (const KeyedMerge* merge = keyed_merge(info.name)) {
    info.shape[0] = static_cast<int64_t>(merge->keys.size());
  }
  return info;
}

std::vector<TensorInfo> ChainReader::list() const {
  std::vector<TensorInfo> out;
  for (TensorInfo& info : links_[0]->list()) out.push_back(as_read(std::move(info)));
  return out;
}

std::optional<TensorInfo> ChainReader::find(std::string_view name) const {
  std::optional<TensorInfo> info = links_[0]->find(name);
  if (!info) return std::nullopt;
  return as_read(std::move(*info));
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
  if (const KeyedMerge* merge = keyed_merge(key)) return cut(read_merged(key, *merge), region);
  const TensorInfo info = links_[0]->info(key);
  const int rank = static_cast<int>(info.shape.size());
  bool whole_rows = rank > 0;
  for (int d = 1; d < rank; ++d) {
    whole_rows = whole_rows && region.start_at(d) == 0 &&
                 region.length_at(d, info.shape) == info.shape[static_cast<size_t>(d)];
  }
  if (!whole_rows && !region.covers(info.shape)) {
    // Rows only partly inside the region: merge the whole tensor, then cut.
    return cut(read_region(name, TensorSlice::full(rank)), region);
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
  if (pieces || info.shape.empty() || keyed_merge(key) || !links_[0]->read_into(key, dst)) {
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
