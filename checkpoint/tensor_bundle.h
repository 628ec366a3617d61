// TensorFlow's V2 checkpoint format, the "tensor bundle".
//
// A bundle at prefix P is the file "P.index" -- a LevelDB-format table
// mapping "" to a BundleHeaderProto and each tensor name to a
// BundleEntryProto (dtype, shape, data shard, offset, size, masked CRC32C) --
// and the data shards "P.data-00000-of-0000N" holding the raw tensor bytes.
// Files written here are byte-compatible with TensorFlow's (same table
// layout, header, key order, CRCs, string layout); files TensorFlow wrote,
// Snappy-compressed indexes included, read back here.
//
// BundleWriter writes one bundle with one data shard, as TensorFlow's does.
// A save sharded across devices has one writer per device, each writing
// "<temp prefix>-0000i-of-0000n" (see sharded_prefix / temp_prefix_for),
// then merge_bundles() renames their data files into place and writes the
// final index, the step that commits the checkpoint.
//
// Writes are atomic: every file is written under a temporary name, synced
// and renamed; the index appears only after the data it describes is
// durable. BundleReader checks every tensor's CRC32C on every read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "varstate/checkpoint_reader.h"
#include "varstate/tensor_data.h"
#include "varstate/tensor_slice.h"

namespace varstate {

class FileSystem;
class MappedRegion;
class RandomAccessFile;
class WritableFile;

// "P.index".
std::string bundle_index_filename(std::string_view prefix);
// "P.data-00003-of-00008".
std::string bundle_data_filename(std::string_view prefix, int shard, int num_shards);
// "P-00003-of-00008": the prefix of device shard 3 of 8 in a sharded save.
std::string sharded_prefix(std::string_view prefix, int shard, int num_shards);
// "P_temp_<32 random hex digits>/part": where a sharded save of P writes
// its per-device bundles before merge_bundles (TensorFlow's naming).
std::string temp_prefix_for(std::string_view prefix);

struct BundleWriterOptions {
  FileSystem* file_system = nullptr;  // default_file_system() when null
  // Each tensor's data starts at a multiple of this many bytes (zero padding
  // between tensors). TensorFlow's SaveV2 uses 1.
  size_t data_alignment = 1;
};

// Writes one bundle. Tensors are appended to the data file as they are
// added; finish() writes the index and commits. Destroying an unfinished
// writer deletes its temporary files. Not thread-safe (one writer per
// thread). After any error the writer is failed: later calls throw
// FailedPreconditionError and finish() commits nothing.
class BundleWriter {
 public:
  // Creates the prefix's directory if needed and opens the data file under a
  // temporary name. Throws the file layer's errors.
  explicit BundleWriter(std::string prefix, BundleWriterOptions options = {});
  ~BundleWriter();
  BundleWriter(const BundleWriter&) = delete;
  BundleWriter& operator=(const BundleWriter&) = delete;

  // Adds a whole tensor under `name`. Throws InvalidArgumentError for an
  // empty or duplicate name or an inconsistent view.
  void add(std::string_view name, const TensorView& tensor);

  // Adds slice `slice` (holding `tensor`, of the slice's shape) of the
  // tensor `full_name` of shape `full_shape`. A slice covering the whole
  // tensor is stored as add() would. Throws InvalidArgumentError when the
  // slice does not fit `full_shape`, the data's shape is not the slice's,
  // the slice was already added, or dtype/full shape differ from earlier
  // slices of the same tensor.
  void add_slice(std::string_view full_name, const std::vector<int64_t>& full_shape,
                 const TensorSlice& slice, const TensorView& tensor);

  // Streams a fixed-width tensor in pieces (e.g. through a bounded staging
  // buffer): begin_tensor, append_tensor_bytes until num_elements(shape) *
  // dtype_size(dtype) bytes are given, end_tensor. append_tensor_bytes
  // checksums and writes `bytes` in place: they must not change during the
  // call (add() instead copies the tensor chunk by chunk before checksumming).
  void begin_tensor(std::string_view name, DType dtype, std::vector<int64_t> shape);
  void append_tensor_bytes(std::span<const std::byte> bytes);
  void end_tensor();
  // For a caller that knows the CRC-32C of what it streams (compaction
  // derives it from the base's, crc32c::RecordPatch): appends written
  // without a checksum pass, then end_tensor(crc32c) stores the caller's.
  // A stream's appends are all checksummed or all not
  // (FailedPreconditionError otherwise).
  void append_unchecksummed_tensor_bytes(std::span<const std::byte> bytes);
  void end_tensor(uint32_t crc32c);

  // Syncs and renames the data file, then writes the index atomically.
  void finish();

  const std::string& prefix() const { return prefix_; }

 private:
  struct Entry;
  struct Streaming;

  void check_usable(const char* what) const;
  void check_new_key(const std::string& key) const;
  void write_tensor(const std::string& key, const TensorView& tensor);
  void write_bytes(const void* data, size_t n);
  void append_streamed(std::span<const std::byte> bytes, bool checksum_here);
  void end_streamed(std::optional<uint32_t> given_crc32c);
  std::string streamed_what() const;  // "writing <streamed tensor> to checkpoint <prefix>"
  void start_entry(const std::string& key, DType dtype, std::vector<int64_t> shape);
  void pad_to_alignment();
  void abandon() noexcept;

  std::string prefix_;
  BundleWriterOptions options_;
  FileSystem* fs_;
  std::string data_path_;
  std::string data_tmp_path_;
  std::unique_ptr<WritableFile> data_file_;
  uint64_t data_size_ = 0;
  std::map<std::string, std::unique_ptr<Entry>> entries_;
  std::unique_ptr<Streaming> streaming_;
  // add()/add_slice() copy a tensor through this buffer (allocated on first
  // use) and checksum the copy, never the caller's live buffer.
  static constexpr size_t kStagingBytes = size_t{1} << 20;
  std::unique_ptr<std::byte[]> staging_;
  bool failed_ = false;
  bool finished_ = false;
};

struct MergeBundlesOptions {
  FileSystem* file_system = nullptr;  // default_file_system() when null
  // Remove each input's directory when it differs from the output's (only
  // succeeds once empty).
  bool delete_old_dirs = true;
  // Skip inputs whose index is missing instead of failing.
  bool allow_missing_files = false;
};

// Merges the bundles at `input_prefixes` (in shard order) into one bundle at
// `output_prefix`, as TensorFlow's MergeV2Checkpoints: data files are renamed
// to "<output>.data-<k>-of-<n>" (k in order of first use), entries get their
// new shard ids, the slice lists of a partitioned tensor's entries are
// concatenated, and the merged index is written last, atomically. Input
// indexes are deleted. Throws InvalidArgumentError for conflicting headers or
// a duplicate key, NotFoundError for a missing input.
void merge_bundles(const std::vector<std::string>& input_prefixes, const std::string& output_prefix,
                   const MergeBundlesOptions& options = {});

// Reads a bundle. Opening loads and validates the index (header versions,
// every entry parseable); data shards are opened on first use.
class BundleReader : public CheckpointReader {
 public:
  // Throws NotFoundError when "<prefix>.index" is missing, DataLossError
  // when it is corrupt, InvalidArgumentError for an unsupported version.
  explicit BundleReader(std::string prefix, FileSystem* fs = nullptr);
  ~BundleReader() override;

  std::vector<TensorInfo> list() const override;
  std::optional<TensorInfo> find(std::string_view name) const override;

  int num_shards() const { return num_shards_; }
  // Whether the bundle was written on a host of the other endianness: its
  // values are byte-swapped after their checksums are checked.
  bool byte_swapped() const { return byte_swap_; }

  // Reads the fixed-width tensor `name`, stored whole, straight into `dst`
  // (which must hold exactly its bytes), checking its CRC32C: the restore
  // path that makes no intermediate copy. Returns false, reading nothing,
  // for a string tensor or one saved as slices (use read()). Throws as
  // read(); on a throw `dst` holds unspecified bytes.
  bool read_into(std::string_view name, std::span<std::byte> dst) const;

  // In the range readers below, slice_index -1 names the tensor `info`
  // stored whole (InvalidArgumentError when it is stored as slices): the
  // same ranged reads for compaction's streamed copy of a base tensor.
  //
  // Bytes [begin, begin + dst.size()) of stored slice `slice_index` of
  // `info` straight into `dst`, the rest of the slice read through a fixed
  // 8 MiB buffer so that its whole crc32c is verified (DataLossError
  // otherwise): peak memory the buffer, not the slice. False (nothing read)
  // for strings.
  bool read_slice_range_into(const TensorInfo& info, int slice_index, uint64_t begin,
                             std::span<std::byte> dst) const;

  // Reading one stored slice in ranges, each range by whoever needs it (the
  // tasks of a distributed restore): the crc32c of the slice's bytes [begin,
  // end), read into `dst` (null: only checksummed, through an 8 MiB buffer;
  // else it holds end - begin bytes, byte-swapped after checksumming when
  // the bundle's endianness differs). Nothing is verified here: the caller
  // joins the ranges' checksums with crc32c::combine and compares the whole
  // with stored_slice_crc32c. Throws NotFoundError for a missing data file,
  // DataLossError for a truncated one, InvalidArgumentError for a range
  // outside the slice; UnimplementedError for strings.
  uint32_t read_slice_range_crc(const TensorInfo& info, int slice_index, uint64_t begin,
                                uint64_t end, std::byte* dst) const;
  // The slice's bytes [begin, end) mapped read-only (RandomAccessFile::map),
  // for a reader that checksums them in place and copies them once, after
  // the checksums are verified; nullptr where they cannot be mapped (the
  // file system does not map, or the bundle's endianness differs). Nothing
  // is verified here. Throws as read_slice_range_crc for a missing or
  // truncated file, a range outside the slice, or strings.
  std::unique_ptr<MappedRegion> map_slice_range(const TensorInfo& info, int slice_index,
                                                uint64_t begin, uint64_t end) const;
  // The crc32c stored for slice `slice_index` of `info` (unmasked), and in
  // `where` how errors name it: `reading "emb (slice 0,5:0,3)" from "P.data-00001-of-00002"`.
  uint32_t stored_slice_crc32c(const TensorInfo& info, int slice_index, std::string* where) const;

 protected:
  TensorData read_stored(const TensorInfo& info, int slice_index) const override;
  void check_stored(const TensorInfo& info, int slice_index) const override;

 private:
  // A parsed BundleEntryProto.
  struct StoredEntry {
    int dtype = 0;
    std::vector<int64_t> shape;
    int shard_id = 0;
    int64_t offset = 0;
    int64_t size = 0;
    uint32_t masked_crc32c = 0;
    std::vector<TensorSlice> slices;
  };

  const RandomAccessFile& data_file(int shard) const;
  const StoredEntry& slice_entry(const TensorInfo& info, int slice_index, std::string* key) const;
  // slice_entry for the range readers: UnimplementedError for a string
  // slice (its elements have no fixed width).
  const StoredEntry& range_slice_entry(const TensorInfo& info, int slice_index,
                                       std::string* key) const;
  // Validates an entry against its data file, without reading the data.
  const RandomAccessFile& check_entry(const std::string& key, const StoredEntry& e,
                                      const std::string& tensor_name, std::string* where) const;
  TensorData read_entry(const std::string& key, const StoredEntry& entry,
                        const std::string& tensor_name) const;

  FileSystem* fs_;
  int num_shards_ = 0;
  bool byte_swap_ = false;
  std::map<std::string, StoredEntry, std::less<>> entries_;  // slice keys included
  mutable std::mutex files_mu_;
  mutable std::vector<std::unique_ptr<RandomAccessFile>> data_files_;
};

}  // namespace varstate
