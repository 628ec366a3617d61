// compact_checkpoint (varstate/checkpoint_chain.h): the values a checkpoint
// restores, written as one full checkpoint.
//
// A fixed-width tensor that the chain's base stores whole and its deltas
// change only by rows is streamed: read from the base's data file in chunks,
// each chunk checksummed as it is read (the base's crc32c is checked once the
// tensor is through), the deltas' rows copied in (the newest value of each
// row, once), then written while the chunk is still in the cache. So the
// base is read and checksummed once and the output written once, through one
// small buffer. Where few rows are patched the output takes no checksum
// pass: its crc32c is the base's changed by the patched rows alone
// (crc32c::RecordPatch; crc32c is affine).
// Everything else (strings, scalars, a base stored as slices, a tensor a
// delta holds whole or in slices, deltas holding more row bytes than the
// tensor) is read whole through the ChainReader and written.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "checkpoint/checkpoint_chain.h"
#include "checkpoint/checkpoint_files.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/file_system.h"
#include "checkpoint/live_save_internal.h"
#include "checkpoint/tensor_bundle.h"
#include "varstate/checkpoint_chain.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/error.h"

namespace varstate {
namespace {

// Inside a core's L2 cache, where the read, its checksum, the patches and
// the write's copy into the page cache all find it (with 4 MiB chunks, in
// L3, the writes of 256 MiB took 72-100 ms against 61-65 ms), and a
// multiple of every dtype's size.
constexpr uint64_t kChunkBytes = uint64_t{1} << 20;

// A row the deltas change, and its newest value.
struct Patch {
  int64_t row;
  const std::byte* bytes;  // row_bytes of them
};

bool fixed_width(const TensorInfo& info) {
  return info.dtype != DType::kString && dtype_is_valid(static_cast<int>(info.dtype));
}

// The bytes of the deltas' row entries of `key`.
uint64_t delta_row_bytes(const ChainReader& chain, const std::string& key) {
  uint64_t n = 0;
  for (size_t i = 1; i < chain.links().size(); ++i) {
    for (const ChainReader::RowEntry& e : chain.row_entries(i, key)) {
      n += static_cast<uint64_t>(std::max<int64_t>(chain.links()[i]->info(e.rows).size, 0));
    }
  }
  return n;
}

// True when `info` streams: the base holds it whole and the deltas only by
// rows (not by key: a dynamic variable's rows are merged whole), and those
// rows hold no more bytes than the tensor.
bool streams(const ChainReader& chain, const TensorInfo& info, uint64_t tensor_bytes) {
  const auto& links = chain.links();
  if (!fixed_width(info) || info.shape.empty() || !links[0]->info(info.name).slices.empty() ||
      chain.merges_keys(info.name)) {
    return false;
  }
  for (size_t i = 1; i < links.size(); ++i) {
    if (links[i]->contains(info.name)) return false;
  }
  return delta_row_bytes(chain, info.name) <= tensor_bytes;
}

// Reads the deltas' rows of `info` into `arena` (grown as needed, reused
// from tensor to tensor: no fresh pages to fault in each time) and returns
// them by row, the newest value of each row once.
std::vector<Patch> read_row_patches(const ChainReader& chain, const TensorInfo& info,
                                    uint64_t row_bytes, std::vector<std::byte>& arena) {
  const uint64_t total = delta_row_bytes(chain, info.name);
  if (arena.size() < total) arena.resize(total);
  std::vector<Patch> p;
  std::byte* at = arena.data();
  for (size_t i = 1; i < chain.links().size(); ++i) {
    const BundleReader& delta = *chain.links()[i];
    for (const ChainReader::RowEntry& e : chain.row_entries(i, info.name)) {
      const std::vector<int64_t> ids = chain.read_row_ids(i, e.ids, info.shape[0]);
      const std::span<std::byte> rows(at, ids.size() * row_bytes);
      if (rows.size() > total - static_cast<uint64_t>(at - arena.data()) ||
          !delta.read_into(e.rows, rows)) {
        throw DataLossError("reading " + varstate::quoted(e.rows) + " from checkpoint " +
                            varstate::quoted(delta.path()) + ": not stored whole as " +
                            std::to_string(rows.size()) + " bytes");
      }
      for (size_t k = 0; k < ids.size(); ++k) p.push_back({ids[k], at + k * row_bytes});
      at += rows.size();
    }
  }
  // Stable: of equal rows the newest delta's comes last, and is kept.
  std::stable_sort(p.begin(), p.end(),
                   [](const Patch& a, const Patch& b) { return a.row < b.row; });
  size_t kept = 0;
  for (size_t k = 0; k < p.size(); ++k) {
    if (k + 1 < p.size() && p[k + 1].row == p[k].row) continue;
    p[kept++] = p[k];
  }
  p.resize(kept);
  return p;
}

// Whether the checksum of a tensor of `total` bytes with `patches` rows of
// `row_bytes` replaced is cheaper derived from the base's than computed
// over the output. RecordPatch costs about 20 ns a row and 0.12 ns a byte
// (of old xor new), a checksum pass 0.07 ns a byte (64 MiB: 12-byte rows
// at 10 % 12.6 ms against 9.2 ms; 64-byte rows at 10 % 4.0 against 5.3;
// 256-byte rows at 10 % 2.0 against 4.4, at 100 % 9.1 against 4.7).
bool derive_checksum(uint64_t patches, uint64_t row_bytes, uint64_t total) {
  return 256 * patches + 2 * patches * row_bytes <= total;
}

// Writes the base's `info` with `rows` applied, chunk by chunk through
// `chunk`. The output's checksum comes from the base's and the patched rows
// (crc32c::RecordPatch) where that is cheaper (derive_checksum), and the
// output then takes no checksum pass of its own; the writer checksums it
// otherwise, and for a base of the other endianness, whose checksum is of
// its bytes before their swap.
// DataLossError naming the base's data file when its bytes do not match
// their crc32c (the writer then holds a tensor it must not finish).
void stream_tensor(const ChainReader& chain, const TensorInfo& info, uint64_t row_bytes,
                   const std::vector<Patch>& rows, std::vector<std::byte>& chunk,
                   BundleWriter& writer) {
  const BundleReader& base = *chain.links()[0];
  const TensorInfo stored = base.info(info.name);
  std::string where;
  const uint32_t expected = base.stored_slice_crc32c(stored, -1, &where);
  const auto row_count = static_cast<uint64_t>(info.shape[0]);
  const uint64_t total = row_bytes * row_count;
  crc32c::RecordPatch patched(row_bytes, row_count);
  const bool derive_crc = !base.byte_swapped() && derive_checksum(rows.size(), row_bytes, total);
  writer.begin_tensor(info.name, info.dtype, info.shape);
  uint32_t crc = 0;
  auto next = rows.begin();
  for (uint64_t at = 0; at < total;) {
    const uint64_t n = std::min<uint64_t>(chunk.size(), total - at);
    crc = crc32c::combine(crc, base.read_slice_range_crc(stored, -1, at, at + n, chunk.data()), n);
    while (next != rows.end() && (static_cast<uint64_t>(next->row) + 1) * row_bytes <= at) {
      ++next;
    }
    for (auto p = next; p != rows.end(); ++p) {
      const uint64_t row_at = static_cast<uint64_t>(p->row) * row_bytes;
      if (row_at >= at + n) break;
      const uint64_t from = std::max(row_at, at);
      const uint64_t to = std::min(row_at + row_bytes, at + n);
      std::byte* dst = chunk.data() + (from - at);
      const std::byte* src = p->bytes + (from - row_at);
      if (derive_crc)
        patched.add(static_cast<uint64_t>(p->row), from - row_at, dst, src, to - from);
      std::memcpy(dst, src, to - from);
    }
    const std::span<const std::byte> bytes(chunk.data(), static_cast<size_t>(n));
    if (derive_crc) {
      writer.append_unchecksummed_tensor_bytes(bytes);
    } else {
      writer.append_tensor_bytes(bytes);
    }
    at += n;
  }
  if (crc != expected) {
    throw DataLossError(where + ": crc32c mismatch (expected " + crc32c::hex(expected) + ", got " +
                        crc32c::hex(crc) + ")");
  }
  if (derive_crc) {
    writer.end_tensor(patched.apply(expected));
  } else {
    writer.end_tensor();
  }
}

// A fixed-width tensor of a chain merged in one uninitialized buffer (no
// zero fill, no intermediate copy of the base) and written from it.
void write_merged(const ChainReader& chain, const TensorInfo& info, size_t bytes,
                  BundleWriter& writer) {
  std::unique_ptr<std::byte[]> buf(new std::byte[std::max<size_t>(bytes, 1)]);
  chain.read_into(info.name, {buf.get(), bytes});
  writer.begin_tensor(info.name, info.dtype, info.shape);
  writer.append_tensor_bytes({buf.get(), bytes});
  writer.end_tensor();
}

void write_compacted(const CheckpointReader& reader, BundleWriter& writer) {
  const auto* chain = dynamic_cast<const ChainReader*>(&reader);
  std::vector<std::byte> chunk, arena;
  for (const TensorInfo& info : reader.list()) {
    if (!chain || !fixed_width(info)) {
      writer.add(info.name, reader.read(info.name).view());
      continue;
    }
    const auto bytes = static_cast<uint64_t>(num_elements(info.shape)) * dtype_size(info.dtype);
    if (!streams(*chain, info, bytes)) {
      write_merged(*chain, info, static_cast<size_t>(bytes), writer);
      continue;
    }
    const uint64_t row_bytes =
        info.shape[0] == 0 ? 0 : bytes / static_cast<uint64_t>(info.shape[0]);
    if (chunk.empty()) chunk.resize(kChunkBytes);
    stream_tensor(*chain, info, row_bytes, read_row_patches(*chain, info, row_bytes, arena), chunk,
                  writer);
  }
  writer.finish();
}

// True when paths `a` and `b` name the same file: equal once absolute and
// normalized with symbolic links resolved, or (both existing) one inode.
bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto resolved = [&ec](const std::string& p) {
    const fs::path abs = fs::absolute(p, ec).lexically_normal();
    const fs::path canonical = fs::weakly_canonical(abs, ec);
    return ec ? abs : canonical;
  };
  if (resolved(a) == resolved(b)) return true;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec) && !ec;
}

// The files of checkpoint `prefix`: a V2 bundle's index and data shards,
// a V1 checkpoint's file or shards, and its meta graph.
std::vector<std::string> files_of(FileSystem& files, const std::string& prefix) {
  std::vector<std::string> out{bundle_index_filename(prefix), prefix,
                               meta_graph_filename(prefix, "meta")};
  for (const std::string& pattern :
       {prefix, prefix + ".data-?????-of-?????", prefix + "-?????-of-?????"}) {
    for (std::string& f : match_files(files, pattern)) out.push_back(std::move(f));
  }
  return out;
}

// Validation before a compaction of `reader` (opened from `checkpoint`)
// into `output` writes anything (cp refuses `cp a a` likewise):
// InvalidArgumentError when a file the output would write is a file of the
// chain it reads (compacting model-4 onto its base model-1 would destroy
// the chain); FailedPreconditionError when the output is a checkpoint that
// the output directory's state file lists or that a listed delta needs
// (replacing it would change what the state file's checkpoints restore),
// or when a path the output writes is a directory. `output_files`: the
// prefix, then the files the output writes.
void check_output(FileSystem& files, const CheckpointReader& reader, const std::string& checkpoint,
                  const std::string& output, const std::vector<std::string>& output_files) {
  std::vector<std::string> inputs{checkpoint};
  if (const auto* chain = dynamic_cast<const ChainReader*>(&reader)) {
    inputs.clear();
    for (const auto& link : chain->links()) inputs.push_back(link->path());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string role = inputs.size() == 1      ? "the checkpoint itself"
                             : i == 0                ? "its base " + varstate::quoted(inputs[i])
                             : i + 1 < inputs.size() ? "its delta " + varstate::quoted(inputs[i])
                                                     : "the checkpoint itself";
    const std::vector<std::string> theirs = files_of(files, inputs[i]);
    for (const std::string& mine : output_files) {
      for (const std::string& input : theirs) {
        if (same_file(mine, input)) {
          throw InvalidArgumentError(
              varstate::quoted(mine) + " is a file of the chain being compacted (" + role +
              "): the output would overwrite its own input; choose another output");
        }
      }
    }
  }
  const std::string dir = dirname_of(output);
  if (kept_by_state_file(files, dir, "checkpoint").count(basename_of(output)) != 0) {
    throw FailedPreconditionError(
        varstate::quoted(output) + " is a checkpoint that " +
        varstate::quoted(join_path(dir, "checkpoint")) +
        " lists or that a checkpoint it lists needs; replacing it would change what that "
        "checkpoint restores; choose another output");
  }
  // The prefix itself names no file of a V2 output: a folder there is fine.
  check_no_directory_in_the_way(
      files, "writing the output",
      std::vector<std::string>(output_files.begin() + 1, output_files.end()));
}

}  // namespace

void compact_checkpoint(const std::string& checkpoint, const std::string& output_prefix,
                        FileSystem* fs) {
  FileSystem& files = fs ? *fs : *default_file_system();
  const std::string meta = meta_graph_filename(checkpoint, "meta");
  const std::string output_meta = meta_graph_filename(output_prefix, "meta");
  std::unique_ptr<CheckpointReader> reader;
  bool has_meta = false;
  std::optional<internal::LiveSave> live;
  try {
    reader = open_checkpoint(checkpoint, &files);
    has_meta = files.file_exists(meta);
    std::vector<std::string> outputs{output_prefix, bundle_index_filename(output_prefix),
                                     bundle_data_filename(output_prefix, 0, 1)};
    if (has_meta) outputs.push_back(output_meta);
    check_output(files, *reader, checkpoint, output_prefix, outputs);
    // What killed compactions to this output left (their temporary
    // files); registered meanwhile, so that no save in this process sweeps
    // this compaction's own.
    live.emplace(files, output_prefix, output_prefix, "", internal::Sweep::kCheckpointOnly);
  } catch (...) {
    rethrow_with_context("compacting checkpoint " + varstate::quoted(checkpoint) + " into " +
                         varstate::quoted(output_prefix));
  }
  try {
    {
      BundleWriter writer(output_prefix, {.file_system = &files});
      write_compacted(*reader, writer);
    }
    if (has_meta) write_file_atomically(files, output_meta, read_file_to_string(files, meta));
  } catch (...) {
    try {
      delete_checkpoint_files(files, output_prefix, output_meta);
    } catch (...) {
    }
    rethrow_with_context("compacting checkpoint " + varstate::quoted(checkpoint) + " into " +
                         varstate::quoted(output_prefix));
  }
}

}  // namespace varstate
