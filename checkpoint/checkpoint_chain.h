// Incremental checkpoint chains (varstate/checkpoint_chain.h): the key names
// of a delta, its chain record, and ChainReader, the CheckpointReader that
// presents a base and its deltas as one checkpoint. Internal.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/tensor_bundle.h"
#include "varstate/checkpoint_reader.h"

namespace varstate {

// The key of a delta's chain record and the record's first element.
inline constexpr const char* kChainKey = ".varstate_chain";
inline constexpr const char* kChainMagic = "varstate-delta-1";

// "w/.delta_ids", or for the part at row offset 4096 of a partitioned
// tensor "w/.delta_ids@4096"; the same for ".delta_rows".
std::string delta_ids_key(const std::string& key, std::optional<int64_t> part_offset);
std::string delta_rows_key(const std::string& key, std::optional<int64_t> part_offset);

// The entries of a dynamic variable's table in a delta
// (checkpoint/keyed_checkpoint.h): for its keys tensor "emb-keys",
// "emb-keys/.delta_keys" (the keys inserted or written since the parent,
// int64, ascending) and "emb-keys/.delta_erased" (the keys erased since,
// int64, ascending; a key erased and then inserted again is in both); for
// each tensor of rows by those keys ("emb-values", a slot's values, the
// update history), "emb-values/.delta_key_rows": the rows of the
// ".delta_keys" keys, in their order. A reader applies the erasures, then
// the rows.
std::string delta_keys_key(const std::string& keys_tensor);
std::string delta_erased_key(const std::string& keys_tensor);
std::string delta_key_rows_key(const std::string& rows_tensor);

// A checkpoint a delta applies to: its file name (in the delta's directory)
// and the crc32c of its ".index" file.
struct ChainRecordLink {
  std::string name;
  uint32_t index_crc32c = 0;
  bool operator==(const ChainRecordLink&) const = default;
};

// The crc32c of "<prefix>.index". Throws the file layer's errors.
uint32_t index_checksum(FileSystem& fs, const std::string& prefix);
// The record's string tensor elements (kChainMagic, then one per link).
std::vector<std::string> chain_record_strings(const std::vector<ChainRecordLink>& links);
// The links a delta applies to, base first; nullopt for a full checkpoint.
// Throws DataLossError naming the checkpoint for a malformed record.
std::optional<std::vector<ChainRecordLink>> read_chain_record(const BundleReader& bundle);

// The links of the chain ending at `head` (base first, head last), each
// opened and checked against the head's record: NotFoundError for a
// missing link, DataLossError for one whose index changed or whose own
// record disagrees with the head's.
std::vector<std::unique_ptr<BundleReader>> open_chain(std::unique_ptr<BundleReader> head,
                                                      FileSystem& fs);

// A base and its deltas read as one checkpoint: every tensor of the base,
// listed as stored whole, read as the base's value with each delta's whole
// tensors, slices and rows applied in order; a dynamic variable's keys and
// rows by key (delta_keys_key above) as the keys the chain leaves, with
// their newest rows, in ascending key order. The constructor checks every
// delta entry against the base (keys, dtypes, shapes) and merges the
// dynamic variables' keys, so that reads fail only on corrupt data
// (DataLossError naming the file).
class ChainReader final : public CheckpointReader {
 public:
  explicit ChainReader(std::vector<std::unique_ptr<BundleReader>> links);

  std::vector<TensorInfo> list() const override;
  std::optional<TensorInfo> find(std::string_view name) const override;

  // The opened links, base first.
  const std::vector<std::unique_ptr<BundleReader>>& links() const { return links_; }

  // Reads the fixed-width tensor `name`, base and deltas applied, straight
  // into `dst` (exactly its bytes): the restore path with no intermediate
  // copy of the base when the deltas hold its rows. False, reading nothing,
  // for a string tensor. Throws as read().
  bool read_into(std::string_view name, std::span<std::byte> dst) const;
  // The box `region` of `name`, base and deltas applied, reading only the
  // pieces of the base and the delta rows inside it (a partition's restore).
  TensorData read_region(std::string_view name, const TensorSlice& region) const;

  // The row entries of `key` in delta `link`, in the order they apply: the
  // keys of each entry's ids and rows ("w/.delta_ids@4096", "w/.delta_rows@4096").
  struct RowEntry {
    std::string ids, rows;
  };
  std::vector<RowEntry> row_entries(size_t link, std::string_view key) const;
  // The ids of row entry `ids_key` of delta `link`, each checked to be a row
  // of a tensor of `num_rows` rows (DataLossError naming the delta file
  // otherwise). Throws as read().
  std::vector<int64_t> read_row_ids(size_t link, const std::string& ids_key,
                                    int64_t num_rows) const;
  // Whether `name` is a dynamic variable's keys or rows that some delta
  // changes by key (its value is then merged whole on every read).
  bool merges_keys(std::string_view name) const;

 protected:
  TensorData read_stored(const TensorInfo& info, int slice_index) const override;
  void check_stored(const TensorInfo& info, int slice_index) const override;

 private:
  // Per link, per key: the suffixes ("" or "@<offset>") of its row entries.
  using RowEntries = std::map<std::string, std::vector<std::string>, std::less<>>;

  // Where delta rows go: rows [begin, end) of a tensor of `shape`, held
  // from `bytes` (or `strings`), whole in every other dimension.
  struct RowTarget {
    DType dtype;
    std::vector<int64_t> shape;
    int64_t begin, end;
    std::byte* bytes;
    std::string* strings;
  };
  void check_delta(size_t link) const;
  // `info` of the base as this reader lists it: whole, of the merged
  // shape.
  TensorInfo as_read(TensorInfo info) const;
  // Applies the row entries of `key` in every delta.
  void apply_all_rows(const std::string& key, const RowTarget& target) const;
  void apply_rows(size_t link, const std::string& key, const std::string& suffix,
                  const RowTarget& target) const;
  // Copies the whole or sliced entries of `key` in delta `link` that meet
  // `region` into `out` (which holds `region`).
  void apply_pieces(size_t link, const std::string& key, const TensorSlice& region,
                    TensorData& out) const;

  // A dynamic variable's keys merged over the chain: the keys the chain
  // leaves (ascending) and where each one's newest row is (link 0: the
  // base's row; link i > 0: the row of delta i's ".delta_keys").
  struct KeyedMerge {
    std::vector<int64_t> keys;
    std::vector<std::pair<uint32_t, int64_t>> from;
  };
  void merge_keys(const std::string& keys_tensor);
  // The merge `name` (a keys or rows tensor) is read by, or null.
  const KeyedMerge* keyed_merge(std::string_view name) const;
  // The merged value of `name` (keyed_merge(name) non-null).
  TensorData read_merged(const std::string& name, const KeyedMerge& merge) const;

  std::vector<std::unique_ptr<BundleReader>> links_;
  std::vector<RowEntries> rows_;
  // By keys tensor; and each rows tensor's keys tensor.
  std::map<std::string, KeyedMerge, std::less<>> keyed_;
  std::map<std::string, std::string, std::less<>> keyed_rows_;
};

}  // namespace varstate
