#include "checkpoint/tensor_bundle.h"
#include "checkpoint/tensor_bundle_internal.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "checkpoint/crc32c.h"
#include "checkpoint/file_system.h"
#include "checkpoint/ordered_code_internal.h"
#include "checkpoint/proto_convert_internal.h"
#include "checkpoint/varint_internal.h"
#include "proto/tensor_bundle.pb.h"
#include "varstate/error.h"

namespace varstate {
namespace {

uint32_t get_fixed32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Reverses the bytes of each scalar component (both halves of a complex).
void byte_swap(DType dtype, std::span<std::byte> bytes) {
  size_t unit = dtype_size(dtype);
  if (dtype_is_complex(dtype)) unit /= 2;
  if (unit <= 1) return;
  for (size_t i = 0; i + unit <= bytes.size(); i += unit) {
    std::reverse(bytes.begin() + static_cast<std::ptrdiff_t>(i),
                 bytes.begin() + static_cast<std::ptrdiff_t>(i + unit));
  }
}

// Throws unless [begin, end) lies within a stored slice of `size` bytes.
void check_range(const std::string& where, uint64_t begin, uint64_t end, uint64_t size) {
  if (begin > end || end > size) {
    throw InvalidArgumentError(where + ": bytes [" + std::to_string(begin) + ", " +
                               std::to_string(end) + ") are not in the stored " +
                               std::to_string(size));
  }
}

// How the range readers name stored slice `slice_index` of `info` (-1: the
// tensor stored whole).
std::string range_name(const TensorInfo& info, int slice_index) {
  if (slice_index < 0) return info.name;
  return info.name + " (slice " + info.slices[static_cast<size_t>(slice_index)].to_string() + ")";
}

}  // namespace

// ---------------------------------------------------------------------------
// BundleReader

BundleReader::BundleReader(std::string prefix, FileSystem* fs)
    : CheckpointReader(std::move(prefix)), fs_(fs ? fs : default_file_system()) {
  internal::LoadedIndex index = internal::load_index(*fs_, path());
  num_shards_ = index.header.num_shards();
  if (num_shards_ < 0) {
    throw DataLossError("reading " + quoted(bundle_index_filename(path())) +
                        ": negative shard count " + std::to_string(num_shards_));
  }
  byte_swap_ = index.header.endianness() != internal::kHostEndianness;
  data_files_.resize(static_cast<size_t>(num_shards_));
  const std::string index_path = bundle_index_filename(path());
  for (auto& [key, proto] : index.entries) {
    const std::string what = "reading " + quoted(index_path) + ", key " + quoted(key);
    StoredEntry e;
    e.dtype = proto.dtype();
    e.shape = shape_from_proto(proto.shape(), what);
    e.shard_id = proto.shard_id();
    e.offset = proto.offset();
    e.size = proto.size();
    e.masked_crc32c = proto.crc32c();
    for (const auto& s : proto.slices()) e.slices.push_back(slice_from_proto(s, what));
    if (!entries_.emplace(key, std::move(e)).second) {
      throw DataLossError(what + ": duplicate key");
    }
  }
}

BundleReader::~BundleReader() = default;

std::vector<TensorInfo> BundleReader::list() const {
  std::vector<TensorInfo> out;
  for (const auto& [key, entry] : entries_) {
    if (!key.empty() && key[0] == '\0') continue;  // a slice's own entry
    out.push_back(*find(key));
  }
  return out;
}

std::optional<TensorInfo> BundleReader::find(std::string_view name) const {
  if (name.empty() || name[0] == '\0') return std::nullopt;
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  const StoredEntry& e = it->second;
  TensorInfo info;
  info.name = it->first;
  info.dtype = static_cast<DType>(e.dtype);
  info.shape = e.shape;
  info.slices = e.slices;
  if (e.slices.empty()) {
    info.shard = e.shard_id;
    info.offset = e.offset;
    info.size = e.size;
  }
  return info;
}

const RandomAccessFile& BundleReader::data_file(int shard) const {
  std::lock_guard lock(files_mu_);
  auto& file = data_files_[static_cast<size_t>(shard)];
  if (!file) file = fs_->new_random_access_file(bundle_data_filename(path(), shard, num_shards_));
  return *file;
}

const BundleReader::StoredEntry& BundleReader::slice_entry(const TensorInfo& info, int slice_index,
                                                           std::string* key) const {
  const TensorSlice& slice = info.slices[static_cast<size_t>(slice_index)];
  *key = encode_tensor_name_slice(info.name, slice);
  auto it = entries_.find(*key);
  if (it == entries_.end()) {
    throw DataLossError("reading " + quoted(info.name) + " from checkpoint " + quoted(path()) +
                        ": the entry of its slice " + quoted(slice.to_string()) + " is missing");
  }
  const StoredEntry& e = it->second;
  std::vector<int64_t> expected = slice.slice_shape(info.shape);
  if (e.dtype != static_cast<int>(info.dtype) || e.shape != expected) {
    throw DataLossError("reading " + quoted(info.name) + " from checkpoint " + quoted(path()) +
                        ": slice " + quoted(slice.to_string()) + " is stored as dtype " +
                        std::to_string(e.dtype) + " shape " + shape_string(e.shape) +
                        ", expected dtype " + std::to_string(static_cast<int>(info.dtype)) +
                        " shape " + shape_string(expected));
  }
  return e;
}

void BundleReader::check_stored(const TensorInfo& info, int slice_index) const {
  std::string key = info.name;
  const StoredEntry& e =
      slice_index < 0 ? entries_.find(info.name)->second : slice_entry(info, slice_index, &key);
  std::string where;
  check_entry(key, e, info.name, &where);
}

TensorData BundleReader::read_stored(const TensorInfo& info, int slice_index) const {
  if (slice_index < 0) return read_entry(info.name, entries_.find(info.name)->second, info.name);
  std::string key;
  const StoredEntry& e = slice_entry(info, slice_index, &key);
  return read_entry(key, e, range_name(info, slice_index));
}

const RandomAccessFile& BundleReader::check_entry(const std::string& key, const StoredEntry& e,
                                                  const std::string& tensor_name,
                                                  std::string* where_out) const {
  const DType dtype = static_cast<DType>(e.dtype);
  std::string where = "reading " + quoted(tensor_name) + " from checkpoint " + quoted(path());
  if (!dtype_is_valid(e.dtype)) {
    throw UnimplementedError(where + ": unsupported dtype (enum " + std::to_string(e.dtype) + ")");
  }
  if (e.shard_id < 0 || e.shard_id >= num_shards_) {
    throw DataLossError(where + ": entry names data shard " + std::to_string(e.shard_id) +
                        " but the bundle has " + std::to_string(num_shards_));
  }
  const std::string file_name = bundle_data_filename(path(), e.shard_id, num_shards_);
  where = "reading " + quoted(tensor_name) + " from " + quoted(file_name);
  const int64_t n = num_elements(e.shape);
  if (e.offset < 0 || e.size < 0) {
    throw DataLossError(where + ": invalid offset " + std::to_string(e.offset) + " / size " +
                        std::to_string(e.size));
  }
  if (dtype != DType::kString) {
    uint64_t expected = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(n), dtype_size(dtype), &expected) ||
        expected != static_cast<uint64_t>(e.size)) {
      throw DataLossError(where + ": Invalid size in bundle entry: key " + quoted(key) +
                          "; stored size " + std::to_string(e.size) + "; expected size " +
                          std::to_string(static_cast<uint64_t>(n) * dtype_size(dtype)));
    }
  } else if (e.size < 4 || (e.size - 4) < n) {
    throw DataLossError(where + ": Invalid size in bundle entry: key " + quoted(key) +
                        "; stored size " + std::to_string(e.size) + " is too small for " +
                        std::to_string(n) + " strings");
  }

  const RandomAccessFile* file = nullptr;
  try {
    file = &data_file(e.shard_id);
  } catch (...) {
    rethrow_with_context("reading " + quoted(tensor_name) + " from checkpoint " + quoted(path()));
  }
  const uint64_t file_size = file->size();
  if (static_cast<uint64_t>(e.offset) > file_size ||
      static_cast<uint64_t>(e.size) > file_size - static_cast<uint64_t>(e.offset)) {
    throw DataLossError(where + ": truncated file: the tensor needs bytes [" +
                        std::to_string(e.offset) + ", " + std::to_string(e.offset + e.size) +
                        ") but the file has " + std::to_string(file_size));
  }
  *where_out = std::move(where);
  return *file;
}

bool BundleReader::read_into(std::string_view name, std::span<std::byte> dst) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    throw NotFoundError("Key " + quoted(name) + " not found in checkpoint " + quoted(path()));
  }
  const StoredEntry& e = it->second;
  if (!e.slices.empty() || e.dtype == static_cast<int>(DType::kString)) return false;
  const std::string key(name);
  std::string where;
  const RandomAccessFile& file = check_entry(key, e, key, &where);
  if (dst.size() != static_cast<size_t>(e.size)) {
    throw InvalidArgumentError(where + ": the destination holds " + std::to_string(dst.size()) +
                               " bytes, the tensor " + std::to_string(e.size));
  }
  size_t got = 0;
  try {
    got = file.read(static_cast<uint64_t>(e.offset), dst.size(), dst.data());
  } catch (...) {
    rethrow_with_context(where);
  }
  if (got != dst.size()) {
    throw DataLossError(where + ": truncated read: got " + std::to_string(got) + " of " +
                        std::to_string(dst.size()) + " bytes");
  }
  const uint32_t stored_crc = crc32c::unmask(e.masked_crc32c);
  const uint32_t actual = crc32c::value(dst.data(), dst.size());
  if (actual != stored_crc) {
    throw DataLossError(where + ": crc32c mismatch (expected " + crc32c::hex(stored_crc) +
                        ", got " + crc32c::hex(actual) + ")");
  }
  if (byte_swap_) byte_swap(static_cast<DType>(e.dtype), dst);
  return true;
}

bool BundleReader::read_slice_range_into(const TensorInfo& info, int slice_index, uint64_t begin,
                                         std::span<std::byte> dst) const {
  std::string where;
  const uint32_t stored_crc = stored_slice_crc32c(info, slice_index, &where);
  std::string key;
  const uint64_t size = static_cast<uint64_t>(range_slice_entry(info, slice_index, &key).size);
  if (begin > size || dst.size() > size - begin) {
    throw InvalidArgumentError(where + ": bytes [" + std::to_string(begin) + ", " +
                               std::to_string(begin + dst.size()) + ") are not in the stored " +
                               std::to_string(size));
  }
  const uint64_t end = begin + dst.size();
  uint32_t crc = read_slice_range_crc(info, slice_index, 0, begin, nullptr);
  crc = crc32c::combine(crc, read_slice_range_crc(info, slice_index, begin, end, dst.data()),
                        dst.size());
  crc =
      crc32c::combine(crc, read_slice_range_crc(info, slice_index, end, size, nullptr), size - end);
  if (crc != stored_crc) {
    throw DataLossError(where + ": crc32c mismatch (expected " + crc32c::hex(stored_crc) +
                        ", got " + crc32c::hex(crc) + ")");
  }
  return true;
}

const BundleReader::StoredEntry& BundleReader::range_slice_entry(const TensorInfo& info,
                                                                 int slice_index,
                                                                 std::string* key) const {
  if (slice_index < 0) {
    const auto it = entries_.find(info.name);
    if (it == entries_.end() || !it->second.slices.empty()) {
      throw InvalidArgumentError("reading " + quoted(info.name) + " from checkpoint " +
                                 quoted(path()) + " in ranges: it is not stored whole");
    }
    *key = info.name;
  }
  const StoredEntry& e =
      slice_index < 0 ? entries_.find(info.name)->second : slice_entry(info, slice_index, key);
  if (e.dtype == static_cast<int>(DType::kString)) {
    throw UnimplementedError("reading " + quoted(info.name) + " from checkpoint " + quoted(path()) +
                             ": string slices are not read in ranges");
  }
  return e;
}

uint32_t BundleReader::stored_slice_crc32c(const TensorInfo& info, int slice_index,
                                           std::string* where) const {
  std::string key;
  const StoredEntry& e = range_slice_entry(info, slice_index, &key);
  *where = "reading " + quoted(range_name(info, slice_index)) + " from " +
           quoted(bundle_data_filename(path(), e.shard_id, num_shards_));
  return crc32c::unmask(e.masked_crc32c);
}

std::unique_ptr<MappedRegion> BundleReader::map_slice_range(const TensorInfo& info, int slice_index,
                                                            uint64_t begin, uint64_t end) const {
  std::string key;
  const StoredEntry& e = range_slice_entry(info, slice_index, &key);
  std::string where;
  const RandomAccessFile& file = check_entry(key, e, range_name(info, slice_index), &where);
  check_range(where, begin, end, static_cast<uint64_t>(e.size));
  if (byte_swap_ || begin == end) return nullptr;
  return file.map(static_cast<uint64_t>(e.offset) + begin, static_cast<size_t>(end - begin));
}

uint32_t BundleReader::read_slice_range_crc(const TensorInfo& info, int slice_index, uint64_t begin,
                                            uint64_t end, std::byte* dst) const {
  std::string key;
  const StoredEntry& e = range_slice_entry(info, slice_index, &key);
  std::string where;
  const RandomAccessFile& file = check_entry(key, e, range_name(info, slice_index), &where);
  const uint64_t size = static_cast<uint64_t>(e.size);
  check_range(where, begin, end, size);
  uint32_t crc = 0;
  auto read = [&](uint64_t from, size_t n, std::byte* into) {
    size_t got = 0;
    try {
      got = file.read(static_cast<uint64_t>(e.offset) + from, n, into);
    } catch (...) {
      rethrow_with_context(where);
    }
    if (got != n) {
      throw DataLossError(where + ": truncated read: got " + std::to_string(got) + " of " +
                          std::to_string(n) + " bytes at " + std::to_string(from));
    }
    crc = crc32c::extend(crc, into, n);
  };
  if (dst != nullptr) {
    // In 1 MiB reads, each checksummed while it is still in the cache.
    constexpr uint64_t kStep = uint64_t{1} << 20;
    for (uint64_t at = begin; at < end; at += kStep) {
      read(at, static_cast<size_t>(std::min(kStep, end - at)), dst + (at - begin));
    }
    if (byte_swap_) {
      byte_swap(static_cast<DType>(e.dtype),
                std::span<std::byte>(dst, static_cast<size_t>(end - begin)));
    }
    return crc;
  }
  std::vector<std::byte> scratch(static_cast<size_t>(std::min<uint64_t>(end - begin, 8 << 20)));
  for (uint64_t at = begin; at < end; at += scratch.size()) {
    read(at, static_cast<size_t>(std::min<uint64_t>(scratch.size(), end - at)), scratch.data());
  }
  return crc;
}

TensorData BundleReader::read_entry(const std::string& key, const StoredEntry& e,
                                    const std::string& tensor_name) const {
  std::string where;
  const RandomAccessFile* file = &check_entry(key, e, tensor_name, &where);
  const DType dtype = static_cast<DType>(e.dtype);
  const int64_t n = num_elements(e.shape);
  std::vector<std::byte> buf(static_cast<size_t>(e.size));
  size_t got = 0;
  try {
    got = file->read(static_cast<uint64_t>(e.offset), buf.size(), buf.data());
  } catch (...) {
    rethrow_with_context(where);
  }
  if (got != buf.size()) {
    throw DataLossError(where + ": truncated read: got " + std::to_string(got) + " of " +
                        std::to_string(buf.size()) + " bytes");
  }
  const uint32_t stored_crc = crc32c::unmask(e.masked_crc32c);
  auto check_crc = [&](uint32_t actual) {
    if (actual != stored_crc) {
      throw DataLossError(where + ": crc32c mismatch (expected " + crc32c::hex(stored_crc) +
                          ", got " + crc32c::hex(actual) + ")");
    }
  };

  TensorData out;
  out.dtype = dtype;
  out.shape = e.shape;
  if (dtype != DType::kString) {
    check_crc(crc32c::value(buf.data(), buf.size()));
    if (byte_swap_) byte_swap(dtype, buf);
    out.bytes = std::move(buf);
    return out;
  }

  const std::byte* p = buf.data();
  const std::byte* end = p + buf.size();
  std::vector<uint64_t> lengths(static_cast<size_t>(n));
  uint32_t crc = 0;
  uint64_t total = 0;
  for (uint64_t& len : lengths) {
    if (!internal::get_varint64(p, end, &len) || len > static_cast<uint64_t>(end - p)) {
      throw DataLossError(where + ": corrupt string lengths");
    }
    crc = internal::extend_length(crc, len);
    total += len;
  }
  if (end - p < 4) throw DataLossError(where + ": truncated string length checksum");
  const uint32_t stored_length_checksum = get_fixed32(p);
  if (stored_length_checksum != crc32c::mask(crc)) {
    throw DataLossError(where + ": The length checksum does not match (expected " +
                        crc32c::hex(crc32c::unmask(stored_length_checksum)) + ", got " +
                        crc32c::hex(crc) + ")");
  }
  crc = crc32c::extend(crc, p, 4);
  p += 4;
  if (total != static_cast<uint64_t>(end - p)) {
    throw DataLossError(where + ": string bytes take " + std::to_string(end - p) +
                        " bytes but the lengths add up to " + std::to_string(total));
  }
  check_crc(crc32c::extend(crc, p, static_cast<size_t>(end - p)));
  out.strings.reserve(lengths.size());
  for (uint64_t len : lengths) {
    out.strings.emplace_back(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
    p += len;
  }
  return out;
}

}  // namespace varstate
