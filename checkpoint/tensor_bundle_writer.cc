#include "checkpoint/tensor_bundle.h"
#include "checkpoint/tensor_bundle_internal.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "checkpoint/crc32c.h"
#include "checkpoint/file_system.h"
#include "checkpoint/ordered_code_internal.h"
#include "checkpoint/proto_convert_internal.h"
#include "checkpoint/table_internal.h"
#include "checkpoint/varint_internal.h"
#include "proto/tensor_bundle.pb.h"
#include "varstate/error.h"

namespace varstate {
namespace {

using internal::extend_length;
using internal::kHostEndianness;
using internal::load_index;
using internal::LoadedIndex;
using internal::put_varint64;

void put_fixed32(uint8_t* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

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
  enum class Checksum {
    kNotYet,
    kHere,
    kByCaller
  } checksum = Checksum::kNotYet;
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
    throw InvalidArgumentError("writing checkpoint " + quoted(prefix_) +
                               ": Adding duplicate key: " + quoted(key));
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
  if (streaming_)
    throw FailedPreconditionError("add " + quoted(name) + ": a streamed tensor is open");
  std::string key(name);
  if (key.empty())
    throw InvalidArgumentError("writing checkpoint " + quoted(prefix_) + ": empty tensor name");
  validate_tensor_view(tensor, "writing " + quoted(name) + " to checkpoint " + quoted(prefix_));
  check_new_key(key);
  write_tensor(key, tensor);
}

void BundleWriter::add_slice(std::string_view full_name, const std::vector<int64_t>& full_shape,
                             const TensorSlice& slice, const TensorView& tensor) {
  check_usable("add_slice");
  if (streaming_)
    throw FailedPreconditionError("add_slice " + quoted(full_name) + ": a streamed tensor is open");
  const std::string what = "writing slice " + quoted(shape_and_slice_string(full_shape, slice)) +
                           " of " + quoted(full_name) + " to checkpoint " + quoted(prefix_);
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
      throw InvalidArgumentError(what + ": earlier slices have dtype " +
                                 std::string(dtype_name(static_cast<DType>(full.dtype()))) +
                                 " and full shape " + shape_string(stored_shape) + ", this one " +
                                 std::string(dtype_name(tensor.dtype)) + " and " +
                                 shape_string(full_shape));
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
  if (streaming_)
    throw FailedPreconditionError("begin_tensor " + quoted(name) + ": a streamed tensor is open");
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
  append_streamed(bytes, true);
}

void BundleWriter::append_unchecksummed_tensor_bytes(std::span<const std::byte> bytes) {
  append_streamed(bytes, false);
}

void BundleWriter::append_streamed(std::span<const std::byte> bytes, bool checksum_here) {
  check_usable("append_tensor_bytes");
  if (!streaming_) throw FailedPreconditionError("append_tensor_bytes: no streamed tensor is open");
  Streaming& s = *streaming_;
  const auto mode = checksum_here ? Streaming::Checksum::kHere : Streaming::Checksum::kByCaller;
  if (s.checksum != Streaming::Checksum::kNotYet && s.checksum != mode) {
    throw FailedPreconditionError(streamed_what() +
                                  ": checksummed and unchecksummed appends mixed");
  }
  if (bytes.size() > s.expected - s.written) {
    throw InvalidArgumentError(streamed_what() + ": more bytes than its shape holds (" +
                               std::to_string(s.expected) + ")");
  }
  s.checksum = mode;
  if (checksum_here) s.crc = crc32c::extend(s.crc, bytes.data(), bytes.size());
  write_bytes(bytes.data(), bytes.size());
  s.written += bytes.size();
}

void BundleWriter::end_tensor() { end_streamed(std::nullopt); }

std::string BundleWriter::streamed_what() const {
  return "writing " + quoted(streaming_->key) + " to checkpoint " + quoted(prefix_);
}

void BundleWriter::end_tensor(uint32_t crc32c) { end_streamed(crc32c); }

void BundleWriter::end_streamed(std::optional<uint32_t> given_crc32c) {
  check_usable("end_tensor");
  if (!streaming_) throw FailedPreconditionError("end_tensor: no streamed tensor is open");
  Streaming& s = *streaming_;
  if (s.written != s.expected) {
    throw InvalidArgumentError(streamed_what() + ": got " + std::to_string(s.written) +
                               " bytes, expected " + std::to_string(s.expected));
  }
  if (given_crc32c.has_value() == (s.checksum == Streaming::Checksum::kHere)) {
    throw FailedPreconditionError(
        streamed_what() + (given_crc32c
                               ? ": a checksum given for checksummed appends"
                               : ": its appends were not checksummed and no checksum was given"));
  }
  tf::BundleEntryProto& proto = entries_[s.key]->proto;
  proto.set_size(static_cast<int64_t>(s.written));
  proto.set_crc32c(crc32c::mask(given_crc32c.value_or(s.crc)));
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
    for (const auto& [key, entry] : entries_)
      table.emplace_back(key, entry->proto.SerializeAsString());
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

struct MergeInput {
  std::string prefix;
  LoadedIndex index;
};

// The inputs' indexes (those that exist, with allow_missing_files), checked
// to share endianness and format version.
std::vector<MergeInput> load_merge_inputs(FileSystem& fs,
                                          const std::vector<std::string>& input_prefixes,
                                          const MergeBundlesOptions& options) {
  std::vector<MergeInput> inputs;
  for (const std::string& prefix : input_prefixes) {
    if (options.allow_missing_files && !fs.file_exists(bundle_index_filename(prefix))) continue;
    inputs.push_back(MergeInput{prefix, load_index(fs, prefix)});
  }
  if (inputs.empty()) {
    throw InvalidArgumentError("At least one prefix checkpoint file must exist, but none existed.");
  }
  const tf::BundleHeaderProto& first = inputs.front().index.header;
  for (const MergeInput& in : inputs) {
    if (in.index.header.endianness() != first.endianness()) {
      throw InvalidArgumentError(
          "Merging bundles with conflicting endianness; inputs corrupted? (" + quoted(in.prefix) +
          ")");
    }
    if (in.index.header.version().SerializeAsString() != first.version().SerializeAsString()) {
      throw InvalidArgumentError("Merging bundles with different format versions: " +
                                 quoted(inputs.front().prefix) + " vs " + quoted(in.prefix));
    }
  }
  return inputs;
}

// The merged entries, and the data file each output shard id comes from.
struct MergedIndex {
  std::map<std::string, tf::BundleEntryProto> entries;
  std::vector<std::string> sources;  // new shard id -> source data file
};

// Merges the inputs' entries: slices of one tensor join, anything else
// keyed twice is an error; output shard ids go by first use of each
// input data file.
MergedIndex merge_entries(const std::vector<MergeInput>& inputs) {
  MergedIndex out;
  std::map<std::pair<size_t, int>, int> new_shard;  // (input, old shard) -> new id
  for (size_t i = 0; i < inputs.size(); ++i) {
    const MergeInput& in = inputs[i];
    for (const auto& [key, entry] : in.index.entries) {
      auto found = out.entries.find(key);
      if (found != out.entries.end()) {
        tf::BundleEntryProto& prev = found->second;
        if (prev.slices_size() == 0 || entry.slices_size() == 0 || prev.dtype() != entry.dtype() ||
            prev.shape().SerializeAsString() != entry.shape().SerializeAsString()) {
          throw InvalidArgumentError("Duplicate tensor keyed by " + quoted(key) +
                                     " encountered, when merging prefix: " + quoted(in.prefix));
        }
        for (const auto& s : entry.slices()) *prev.add_slices() = s;
        continue;
      }
      tf::BundleEntryProto merged = entry;
      if (entry.slices_size() == 0) {
        const int num_shards = in.index.header.num_shards();
        if (entry.shard_id() < 0 || entry.shard_id() >= num_shards) {
          throw DataLossError("entry " + quoted(key) + " of " + quoted(in.prefix) +
                              " names shard " + std::to_string(entry.shard_id()) + " of " +
                              std::to_string(num_shards));
        }
        auto k = std::make_pair(i, entry.shard_id());
        auto it = new_shard.find(k);
        if (it == new_shard.end()) {
          it = new_shard.emplace(k, static_cast<int>(out.sources.size())).first;
          out.sources.push_back(bundle_data_filename(in.prefix, entry.shard_id(), num_shards));
        }
        merged.set_shard_id(it->second);
      }
      out.entries.emplace(key, std::move(merged));
    }
  }
  return out;
}

// Renames the data files into place, then writes the index.
void write_merged(FileSystem& fs, const MergedIndex& merged, const tf::BundleHeaderProto& first,
                  const std::string& output_prefix) {
  const int num_files = static_cast<int>(merged.sources.size());
  const std::string out_dir = dirname_of(output_prefix);
  fs.create_dir(out_dir);
  for (int id = 0; id < num_files; ++id) {
    fs.rename_file(merged.sources[static_cast<size_t>(id)],
                   bundle_data_filename(output_prefix, id, std::max(num_files, 1)));
  }
  fs.sync_dir(out_dir);

  tf::BundleHeaderProto header = first;
  // TensorFlow sums the inputs' shard counts; counting the files actually
  // present keeps the index consistent when an input had no entries.
  header.set_num_shards(std::max(num_files, 1));
  std::vector<std::pair<std::string, std::string>> table;
  table.emplace_back("", header.SerializeAsString());
  for (const auto& [key, entry] : merged.entries)
    table.emplace_back(key, entry.SerializeAsString());
  write_table_atomically(fs, bundle_index_filename(output_prefix), table);
}

// Cleans up the inputs (best effort): indexes, data files of empty inputs,
// and their directories.
void delete_merge_inputs(FileSystem& fs, const std::vector<MergeInput>& inputs,
                         const std::string& output_prefix, const MergeBundlesOptions& options) {
  const std::string out_dir = dirname_of(output_prefix);
  std::set<std::string> dirs;
  for (const MergeInput& in : inputs) {
    best_effort_delete(fs, bundle_index_filename(in.prefix));
    for (int s = 0; s < in.index.header.num_shards(); ++s) {
      best_effort_delete(fs, bundle_data_filename(in.prefix, s, in.index.header.num_shards()));
    }
    if (options.delete_old_dirs && dirname_of(in.prefix) != out_dir)
      dirs.insert(dirname_of(in.prefix));
  }
  for (const std::string& dir : dirs) {
    try {
      fs.delete_dir(dir);
    } catch (const Error&) {
    }
  }
}

}  // namespace

void merge_bundles(const std::vector<std::string>& input_prefixes, const std::string& output_prefix,
                   const MergeBundlesOptions& options) {
  FileSystem& fs = options.file_system ? *options.file_system : *default_file_system();
  try {
    const std::vector<MergeInput> inputs = load_merge_inputs(fs, input_prefixes, options);
    const MergedIndex merged = merge_entries(inputs);
    write_merged(fs, merged, inputs.front().index.header, output_prefix);
    delete_merge_inputs(fs, inputs, output_prefix, options);
  } catch (...) {
    rethrow_with_context("merging bundles into " + quoted(output_prefix));
  }
}

}  // namespace varstate
