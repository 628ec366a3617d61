// Checkpoint-internal: what the tensor bundle's writer
// (tensor_bundle_writer.cc) and reader (tensor_bundle_reader.cc) share.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/file_system.h"
#include "proto/tensor_bundle.pb.h"

namespace varstate::internal {

inline constexpr tf::BundleHeaderProto::Endianness kHostEndianness =
    std::endian::native == std::endian::little ? tf::BundleHeaderProto::LITTLE
                                               : tf::BundleHeaderProto::BIG;

// Extends `crc` by a string length as TensorFlow checksums it: 4 bytes
// little-endian, or 8 for lengths that do not fit.
uint32_t extend_length(uint32_t crc, uint64_t len);

// A bundle's index: its header and its entries in key order.
struct LoadedIndex {
  tf::BundleHeaderProto header;
  std::vector<std::pair<std::string, tf::BundleEntryProto>> entries;
};

// Reads and checks the index of the bundle at `prefix` (DataLossError when
// it is corrupt or of an unknown version or endianness).
LoadedIndex load_index(FileSystem& fs, const std::string& prefix);

}  // namespace varstate::internal
