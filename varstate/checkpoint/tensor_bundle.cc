#include "varstate/checkpoint/tensor_bundle.h"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <utility>

#include "varstate/base/error.h"
#include "varstate/checkpoint/crc32c.h"
#include "varstate/checkpoint/file_system.h"
#include "varstate/checkpoint/ordered_code_internal.h"
#include "varstate/checkpoint/proto_convert_internal.h"
#include "varstate/checkpoint/table_internal.h"
#include "varstate/proto/tensor_bundle.pb.h"

namespace varstate {
namespace {

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08" PRIx32, v);
  return buf;
}

void put_varint64(std::string* dst, uint64_t v) {
  while (v >= 0x80) {
    dst->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  dst->push_back(static_cast<char>(v));
}

bool get_varint64(const std::byte*& p, const std::byte* end, uint64_t* v) {
  uint64_t out = 0;
  for (int shift = 0; shift <= 63 && p < end; shift += 7) {
    uint8_t b = static_cast<uint8_t>(*p++);
    out |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) {
      *v = out;
      return true;
    }
  }
  return false;
}

// Extends `crc` by a string length as TensorFlow checksums it: 4 bytes
// little-endian, or 8 for lengths that do not fit.
uint32_t extend_length(uint32_t crc, uint64_t len) {
  uint8_t buf[8];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<uint8_t>(len >> (8 * i));
  return crc32c::extend(crc, buf, len > 0xffffffffu ? 8 : 4);
}

void put_fixed32(uint8_t* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t get_fixed32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

constexpr tf::BundleHeaderProto::Endianness kHostEndianness =
    std::endian::native == std::endian::little ? tf::BundleHeaderProto::LITTLE
                                               : tf::BundleHeaderProto::BIG;

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

std::string random_hex32() {
  std::random_device rd;
  std::mt19937_64 gen((uint64_t{rd()} << 32) ^ rd());
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64, gen(), gen());
  return buf;
}

void best_effort_delete(FileSystem& fs, const std::string& path) {
  try {
    if (fs.file_exists(path)) fs.delete_file(path);
  } catch (const Error&) {
  }
}

}  // namespace

std::string bundle_index_filename(std::string_view prefix) { return std::string(prefix) + ".index"; }

std::string bundle_data_filename(std::string_view prefix, int shard, int num_shards) {
  char buf[64];
  std::snprintf(buf, sizeof buf, ".data-%05d-of-%05d", shard, num_shards);
  return std::string(prefix) + buf;
}

std::string sharded_prefix(std::string_view prefix, int shard, int num_shards) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "-%05d-of-%05d", shard, num_shards);
  return std::string(prefix) + buf;
}

std::string temp_prefix_for(std::string_view prefix) {
  return std::string(prefix) + "_temp_" + random_hex32() + "/part";
}

// ---------------------------------------------------------------------------
// BundleWriter

struct BundleWriter::Entry {
  tf::BundleEntryProto proto;
};

struct BundleWriter::Streaming {
  std::string key;
  uint64_t expected = 0;
  uint64_t written = 0;
  uint32_t crc = 0;
};

BundleWriter::BundleWriter(std::string prefix, BundleWriterOptions options)
    : prefix_(std::move(prefix)),
      options_(options),
      fs_(options.file_system ? options.file_system : default_file_system()) {
  if (prefix_.empty()) throw InvalidArgumentError("BundleWriter: empty checkpoint prefix");
  if (options_.data_alignment == 0) {
    throw InvalidArgumentError("BundleWriter " + quoted(prefix_) + ": data_alignment must be >= 1");
  }
  data_path_ = bundle_data_filename(prefix_, 0, 1);
  data_tmp_path_ = temp_file_name(data_path_);
  try {
    fs_->create_dir(dirname_of(prefix_));
    data_file_ = fs_->new_writable_file(data_tmp_path_);
  } catch (...) {
    rethrow_with_context("writing checkpoint " + quoted(prefix_));
  }
}

BundleWriter::~BundleWriter() {
  if (!finished_) abandon();
}

void BundleWriter::abandon() noexcept {
  failed_ = true;
  if (data_file_) {
    try {
      data_file_->close();
    } catch (const Error&) {
    }
    data_file_.reset();
  }
  best_effort_delete(*fs_, data_tmp_path_);
}

void BundleWriter::check_usable(const char* what) const {
  if (finished_) {
    throw FailedPreconditionError(std::string(what) + " on checkpoint " + quoted(prefix_) +
                                  ": the writer has already finished");
  }
  if (failed_) {
    throw FailedPreconditionError(std::string(what) + " on checkpoint " + quoted(prefix_) +
                                  ": an earlier write failed");
  }
}

void BundleWriter::check_new_key(const std::string& key) const {
  if (entries_.count(key) != 0) {
    throw InvalidArgumentError("writing checkpoint " + quoted(prefix_) + ": Adding duplicate key: " +
                               quoted(key));
  }
}

void BundleWriter::write_bytes(const void* data, size_t n) {
  if (n == 0) return;
  try {
    data_file_->append(data, n);
  } catch (...) {
    failed_ = true;
    rethrow_with_context("writing checkpoint " + quoted(prefix_));
  }
  data_size_ += n;
}

void BundleWriter::pad_to_alignment() {
  size_t a = options_.data_alignment;
  if (a <= 1 || data_size_ % a == 0) return;
  std::string zeros(a - data_size_ % a, '\0');
  write_bytes(zeros.data(), zeros.size());
}

void BundleWriter::start_entry(const std::string& key, DType dtype, std::vector<int64_t> shape) {
  auto entry = std::make_unique<Entry>();
  entry->proto.set_dtype(static_cast<tf::DataType>(dtype));
  shape_to_proto(shape, entry->proto.mutable_shape());
  entry->proto.set_shard_id(0);
  entry->proto.set_offset(static_cast<int64_t>(data_size_));
  entries_[key] = std::move(entry);
}

void BundleWriter::write_tensor(const std::string& key, const TensorView& tensor) {
  start_entry(key, tensor.dtype, tensor.shape);
  tf::BundleEntryProto& proto = entries_[key]->proto;
  const uint64_t start = data_size_;
  uint32_t crc = 0;
  if (tensor.dtype == DType::kString) {
    std::string lengths;
    for (const std::string& s : tensor.strings) {
      put_varint64(&lengths, s.size());
      crc = extend_length(crc, s.size());
    }
    uint8_t length_checksum[4];
    put_fixed32(length_checksum, crc32c::mask(crc));
    crc = crc32c::extend(crc, length_checksum, 4);
    write_bytes(lengths.data(), lengths.size());
    write_bytes(length_checksum, 4);
    for (const std::string& s : tensor.strings) {
      crc = crc32c::extend(crc, s.data(), s.size());
      write_bytes(s.data(), s.size());
    }
  } else {
    // Chunk by chunk: copy into the staging buffer, then checksum and write
    // that copy. The source may be a variable that other threads update
    // without its lock; its values may then be torn, but the checksum always
    // describes exactly the bytes in the file.
    if (!staging_) staging_ = std::make_unique_for_overwrite<std::byte[]>(kStagingBytes);
    const std::byte* src = tensor.bytes.data();
    for (size_t left = tensor.bytes.size(); left > 0;) {
      const size_t n = std::min(left, kStagingBytes);
      std::memcpy(staging_.get(), src, n);
      crc = crc32c::extend(crc, staging_.get(), n);
      write_bytes(staging_.get(), n);
      src += n;
      left -= n;
    }
  }
  proto.set_size(static_cast<int64_t>(data_size_ - start));
  proto.set_crc32c(crc32c::mask(crc));
  pad_to_alignment();
}

void BundleWriter::add(std::string_view name, const TensorView& tensor) {
  check_usable("add");
  if (streaming_) throw FailedPreconditionError("add " + quoted(name) + ": a streamed tensor is open");
  std::string key(name);
  if (key.empty()) throw InvalidArgumentError("writing checkpoint " + quoted(prefix_) + ": empty tensor name");
  validate_tensor_view(tensor, "writing " + quoted(name) + " to checkpoint " + quoted(prefix_));
  check_new_key(key);
  write_tensor(key, tensor);
}

void BundleWriter::add_slice(std::string_view full_name, const std::vector<int64_t>& full_shape,
                             const TensorSlice& slice, const TensorView& tensor) {
  check_usable("add_slice");
  if (streaming_) throw FailedPreconditionError("add_slice " + quoted(full_name) + ": a streamed tensor is open");
  const std::string what = "writing slice " + quoted(shape_and_slice_string(full_shape, slice)) + " of " +
                           quoted(full_name) + " to checkpoint " + quoted(prefix_);
  std::string full_key(full_name);
  if (full_key.empty()) throw InvalidArgumentError(what + ": empty tensor name");
  validate_tensor_view(tensor, what);
  check_slice_to_write(slice, full_shape, tensor.shape, what);
  if (slice.is_full() || slice.covers(full_shape)) {
    check_new_key(full_key);
    write_tensor(full_key, tensor);
    return;
  }
  const std::string slice_key = encode_tensor_name_slice(full_name, slice);
  check_new_key(slice_key);
  auto it = entries_.find(full_key);
  if (it != entries_.end()) {
    const tf::BundleEntryProto& full = it->second->proto;
    std::vector<int64_t> stored_shape;
    for (const auto& d : full.shape().dim()) stored_shape.push_back(d.size());
    if (full.slices_size() == 0) {
      throw InvalidArgumentError(what + ": the tensor was already added whole");
    }
    if (static_cast<DType>(full.dtype()) != tensor.dtype || stored_shape != full_shape) {
      throw InvalidArgumentError(
          what + ": earlier slices have dtype " + std::string(dtype_name(static_cast<DType>(full.dtype()))) +
          " and full shape " + shape_string(stored_shape) + ", this one " +
          std::string(dtype_name(tensor.dtype)) + " and " + shape_string(full_shape));
    }
  }
  write_tensor(slice_key, tensor);
  if (it == entries_.end()) {
    auto entry = std::make_unique<Entry>();
    entry->proto.set_dtype(static_cast<tf::DataType>(tensor.dtype));
    shape_to_proto(full_shape, entry->proto.mutable_shape());
    it = entries_.emplace(full_key, std::move(entry)).first;
  }
  slice_to_proto(slice, it->second->proto.add_slices());
}

void BundleWriter::begin_tensor(std::string_view name, DType dtype, std::vector<int64_t> shape) {
  check_usable("begin_tensor");
  if (streaming_) throw FailedPreconditionError("begin_tensor " + quoted(name) + ": a streamed tensor is open");
  std::string key(name);
  const std::string what = "writing " + quoted(name) + " to checkpoint " + quoted(prefix_);
  if (key.empty()) throw InvalidArgumentError(what + ": empty tensor name");
  if (!dtype_is_valid(static_cast<int>(dtype)) || dtype == DType::kString) {
    throw InvalidArgumentError(what + ": streaming needs a fixed-width dtype, got " +
                               std::string(dtype_name(dtype)));
  }
  int64_t n = 0;
  try {
    n = num_elements(shape);
  } catch (...) {
    rethrow_with_context(what);
  }
  check_new_key(key);
  streaming_ = std::make_unique<Streaming>();
  streaming_->key = key;
  streaming_->expected = static_cast<uint64_t>(n) * dtype_size(dtype);
  start_entry(key, dtype, std::move(shape));
}

void BundleWriter::append_tensor_bytes(std::span<const std::byte> bytes) {
  check_usable("append_tensor_bytes");
  if (!streaming_) throw FailedPreconditionError("append_tensor_bytes: no streamed tensor is open");
  if (bytes.size() > streaming_->expected - streaming_->written) {
    throw InvalidArgumentError("writing " + quoted(streaming_->key) + " to checkpoint " +
                               quoted(prefix_) + ": more bytes than its shape holds (" +
                               std::to_string(streaming_->expected) + ")");
  }
  streaming_->crc = crc32c::extend(streaming_->crc, bytes.data(), bytes.size());
  write_bytes(bytes.data(), bytes.size());
  streaming_->written += bytes.size();
}

void BundleWriter::end_tensor() {
  check_usable("end_tensor");
  if (!streaming_) throw FailedPreconditionError("end_tensor: no streamed tensor is open");
  if (streaming_->written != streaming_->expected) {
    throw InvalidArgumentError("writing " + quoted(streaming_->key) + " to checkpoint " +
                               quoted(prefix_) + ": got " + std::to_string(streaming_->written) +
                               " bytes, expected " + std::to_string(streaming_->expected));
  }
  tf::BundleEntryProto& proto = entries_[streaming_->key]->proto;
  proto.set_size(static_cast<int64_t>(streaming_->written));
  proto.set_crc32c(crc32c::mask(streaming_->crc));
  streaming_.reset();
  pad_to_alignment();
}

void BundleWriter::finish() {
  check_usable("finish");
  if (streaming_) {
    throw FailedPreconditionError("finish on checkpoint " + quoted(prefix_) + ": streamed tensor " +
                                  quoted(streaming_->key) + " was not ended");
  }
  const std::string index_path = bundle_index_filename(prefix_);
  try {
    commit_temp_file(*fs_, std::move(data_file_), data_tmp_path_, data_path_);
    fs_->sync_dir(dirname_of(data_path_));

    tf::BundleHeaderProto header;
    header.set_num_shards(1);
    header.set_endianness(kHostEndianness);
    header.mutable_version()->set_producer(kCheckpointVersion);
    std::vector<std::pair<std::string, std::string>> table;
    table.reserve(entries_.size() + 1);
    table.emplace_back("", header.SerializeAsString());
    for (const auto& [key, entry] : entries_) table.emplace_back(key, entry->proto.SerializeAsString());
    write_table_atomically(*fs_, index_path, table);
  } catch (...) {
    abandon();
    rethrow_with_context("writing checkpoint " + quoted(prefix_));
  }
  finished_ = true;
}

// ---------------------------------------------------------------------------
// merge_bundles

namespace {

struct LoadedIndex {
  tf::BundleHeaderProto header;
  std::vector<std::pair<std::string, tf::BundleEntryProto>> entries;
};

LoadedIndex load_index(FileSystem& fs, const std::string& prefix) {
  const std::string path = bundle_index_filename(prefix);
  LoadedIndex out;
  TableReader table(fs, path);
  bool first = true;
  table.for_each([&](std::string_view key, std::string_view value) {
    if (first) {
      first = false;
      if (!key.empty() || !out.header.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
        throw DataLossError("Unable to read file (" + path +
                            "). Perhaps the file is corrupt or was produced by a newer version of "
                            "TensorFlow with format changes (" +
                            (key.empty() ? "unable to parse header" : "failed to seek to header entry") + ")");
      }
      return;
    }
    tf::BundleEntryProto entry;
    if (!entry.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      throw DataLossError("reading " + quoted(path) + ": Entry for key " + quoted(key) + " not parseable.");
    }
    out.entries.emplace_back(std::string(key), std::move(entry));
  });
  if (first) {
    throw DataLossError("Unable to read file (" + path +
                        "). Perhaps the file is corrupt or was produced by a newer version of "
                        "TensorFlow with format changes (failed to seek to header entry)");
  }
  check_checkpoint_version(out.header.version(), "reading " + quoted(path));
  if (out.header.endianness() != tf::BundleHeaderProto::LITTLE &&
      out.header.endianness() != tf::BundleHeaderProto::BIG) {
    throw DataLossError("reading " + quoted(path) + ": unknown endianness " +
                        std::to_string(out.header.endianness()));
  }
  return out;
}

}  // namespace

void merge_bundles(const std::vector<std::string>& input_prefixes, const std::string& output_prefix,
                   const MergeBundlesOptions& options) {
  FileSystem& fs = options.file_system ? *options.file_system : *default_file_system();
  const std::string what = "merging bundles into " + quoted(output_prefix);
  try {
    struct Input {
      std::string prefix;
      LoadedIndex index;
    };
    std::vector<Input> inputs;
    for (const std::string& prefix : input_prefixes) {
      if (options.allow_missing_files && !fs.file_exists(bundle_index_filename(prefix))) continue;
      inputs.push_back(Input{prefix, load_index(fs, prefix)});
    }
    if (inputs.empty()) {
      throw InvalidArgumentError("At least one prefix checkpoint file must exist, but none existed.");
    }
    const tf::BundleHeaderProto& first = inputs.front().index.header;
    for (const Input& in : inputs) {
      if (in.index.header.endianness() != first.endianness()) {
        throw InvalidArgumentError("Merging bundles with conflicting endianness; inputs corrupted? (" +
                                   quoted(in.prefix) + ")");
      }
      if (in.index.header.version().SerializeAsString() != first.version().SerializeAsString()) {
        throw InvalidArgumentError("Merging bundles with different format versions: " +
                                   quoted(inputs.front().prefix) + " vs " + quoted(in.prefix));
      }
    }

    // Assign output shard ids by first use of each input data file.
    std::map<std::pair<size_t, int>, int> new_shard;  // (input, old shard) -> new id
    std::vector<std::string> sources;                 // new id -> source data file
    std::map<std::string, tf::BundleEntryProto> merged;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Input& in = inputs[i];
      for (const auto& [key, entry] : in.index.entries) {
        auto found = merged.find(key);
        if (found != merged.end()) {
          tf::BundleEntryProto& prev = found->second;
          if (prev.slices_size() == 0 || entry.slices_size() == 0 || prev.dtype() != entry.dtype() ||
              prev.shape().SerializeAsString() != entry.shape().SerializeAsString()) {
            throw InvalidArgumentError("Duplicate tensor keyed by " + quoted(key) +
                                       " encountered, when merging prefix: " + quoted(in.prefix));
          }
          for (const auto& s : entry.slices()) *prev.add_slices() = s;
          continue;
        }
        tf::BundleEntryProto out = entry;
        if (entry.slices_size() == 0) {
          if (entry.shard_id() < 0 || entry.shard_id() >= in.index.header.num_shards()) {
            throw DataLossError("entry " + quoted(key) + " of " + quoted(in.prefix) + " names shard " +
                                std::to_string(entry.shard_id()) + " of " +
                                std::to_string(in.index.header.num_shards()));
          }
          auto k = std::make_pair(i, entry.shard_id());
          auto it = new_shard.find(k);
          if (it == new_shard.end()) {
            it = new_shard.emplace(k, static_cast<int>(sources.size())).first;
            sources.push_back(
                bundle_data_filename(in.prefix, entry.shard_id(), in.index.header.num_shards()));
          }
          out.set_shard_id(it->second);
        }
        merged.emplace(key, std::move(out));
      }
    }

    const int num_files = static_cast<int>(sources.size());
    const std::string out_dir = dirname_of(output_prefix);
    fs.create_dir(out_dir);
    for (int id = 0; id < num_files; ++id) {
      fs.rename_file(sources[static_cast<size_t>(id)], bundle_data_filename(output_prefix, id, std::max(num_files, 1)));
    }
    fs.sync_dir(out_dir);

    tf::BundleHeaderProto header = first;
    // TensorFlow sums the inputs' shard counts; counting the files actually
    // present keeps the index consistent when an input had no entries.
    header.set_num_shards(std::max(num_files, 1));
    std::vector<std::pair<std::string, std::string>> table;
    table.emplace_back("", header.SerializeAsString());
    for (const auto& [key, entry] : merged) table.emplace_back(key, entry.SerializeAsString());
    write_table_atomically(fs, bundle_index_filename(output_prefix), table);

    // Clean up the inputs (best effort): indexes, data files of empty
    // inputs, and their directories.
    std::set<std::string> dirs;
    for (const Input& in : inputs) {
      best_effort_delete(fs, bundle_index_filename(in.prefix));
      for (int s = 0; s < in.index.header.num_shards(); ++s) {
        best_effort_delete(fs, bundle_data_filename(in.prefix, s, in.index.header.num_shards()));
      }
      if (options.delete_old_dirs && dirname_of(in.prefix) != out_dir) dirs.insert(dirname_of(in.prefix));
    }
    for (const std::string& dir : dirs) {
      try {
        fs.delete_dir(dir);
      } catch (const Error&) {
      }
    }
  } catch (...) {
    rethrow_with_context(what);
  }
}

// ---------------------------------------------------------------------------
// BundleReader

BundleReader::BundleReader(std::string prefix, FileSystem* fs)
    : CheckpointReader(std::move(prefix)), fs_(fs ? fs : default_file_system()) {
  LoadedIndex index = load_index(*fs_, path());
  num_shards_ = index.header.num_shards();
  if (num_shards_ < 0) {
    throw DataLossError("reading " + quoted(bundle_index_filename(path())) + ": negative shard count " +
                        std::to_string(num_shards_));
  }
  byte_swap_ = index.header.endianness() != kHostEndianness;
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
  const StoredEntry& e = slice_index < 0 ? entries_.find(info.name)->second
                                         : slice_entry(info, slice_index, &key);
  std::string where;
  check_entry(key, e, info.name, &where);
}

TensorData BundleReader::read_stored(const TensorInfo& info, int slice_index) const {
  if (slice_index < 0) return read_entry(info.name, entries_.find(info.name)->second, info.name);
  std::string key;
  const StoredEntry& e = slice_entry(info, slice_index, &key);
  return read_entry(key, e, info.name + " (slice " + info.slices[static_cast<size_t>(slice_index)].to_string() + ")");
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
    throw DataLossError(where + ": Invalid size in bundle entry: key " + quoted(key) + "; stored size " +
                        std::to_string(e.size) + " is too small for " + std::to_string(n) + " strings");
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
    throw DataLossError(where + ": truncated file: the tensor needs bytes [" + std::to_string(e.offset) +
                        ", " + std::to_string(e.offset + e.size) + ") but the file has " +
                        std::to_string(file_size));
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
    throw DataLossError(where + ": crc32c mismatch (expected " + hex32(stored_crc) + ", got " + hex32(actual) + ")");
  }
  if (byte_swap_) byte_swap(static_cast<DType>(e.dtype), dst);
  return true;
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
      throw DataLossError(where + ": crc32c mismatch (expected " + hex32(stored_crc) + ", got " +
                          hex32(actual) + ")");
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
    if (!get_varint64(p, end, &len) || len > static_cast<uint64_t>(end - p)) {
      throw DataLossError(where + ": corrupt string lengths");
    }
    crc = extend_length(crc, len);
    total += len;
  }
  if (end - p < 4) throw DataLossError(where + ": truncated string length checksum");
  const uint32_t stored_length_checksum = get_fixed32(p);
  if (stored_length_checksum != crc32c::mask(crc)) {
    throw DataLossError(where + ": The length checksum does not match (expected " +
                        hex32(crc32c::unmask(stored_length_checksum)) + ", got " + hex32(crc) + ")");
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
