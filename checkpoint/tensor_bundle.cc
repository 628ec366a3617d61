#include "checkpoint/tensor_bundle.h"
#include "checkpoint/tensor_bundle_internal.h"

#include <cinttypes>
#include <cstdio>
#include <random>

#include "checkpoint/crc32c.h"
#include "checkpoint/proto_convert_internal.h"
#include "checkpoint/table_internal.h"
#include "varstate/error.h"

namespace varstate {
namespace {

std::string random_hex32() {
  std::random_device rd;
  std::mt19937_64 gen((uint64_t{rd()} << 32) ^ rd());
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64, gen(), gen());
  return buf;
}

}  // namespace

namespace internal {

uint32_t extend_length(uint32_t crc, uint64_t len) {
  uint8_t buf[8];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<uint8_t>(len >> (8 * i));
  return crc32c::extend(crc, buf, len > 0xffffffffu ? 8 : 4);
}

LoadedIndex load_index(FileSystem& fs, const std::string& prefix) {
  const std::string path = bundle_index_filename(prefix);
  LoadedIndex out;
  TableReader table(fs, path);
  bool first = true;
  table.for_each([&](std::string_view key, std::string_view value) {
    if (first) {
      first = false;
      if (!key.empty() ||
          !out.header.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
        throw DataLossError(
            "Unable to read file (" + path +
            "). Perhaps the file is corrupt or was produced by a newer version of "
            "TensorFlow with format changes (" +
            (key.empty() ? "unable to parse header" : "failed to seek to header entry") + ")");
      }
      return;
    }
    tf::BundleEntryProto entry;
    if (!entry.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      throw DataLossError("reading " + quoted(path) + ": Entry for key " + quoted(key) +
                          " not parseable.");
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

}  // namespace internal

std::string bundle_index_filename(std::string_view prefix) {
  return std::string(prefix) + ".index";
}

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

}  // namespace varstate
