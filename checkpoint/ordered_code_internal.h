// TensorFlow's "OrderedCode" key encoding, used for the keys of saved
// slices in V2 bundles and V1 tables (EncodeTensorNameSlice): encoded keys
// sort like the (name, rank, start0, length0, ...) tuples they encode.
//
// Layout of a slice key: NumIncreasing(0), the escaped name, NumIncreasing(
// rank), then per dimension SignedNumIncreasing(start) and
// SignedNumIncreasing(length), with a full extent written as (0, -1).
// Internal to the checkpoint module.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "varstate/tensor_slice.h"

namespace varstate::ordered_code {

// Appends an unsigned number: a length byte, then that many big-endian bytes.
void write_num_increasing(std::string* dst, uint64_t v);
// Appends a string with 0x00 -> 00 ff and 0xff -> ff 00, then 00 01.
void write_string(std::string* dst, std::string_view s);
// Appends a signed number in 1 to 10 bytes (see formats.md 1.5).
void write_signed_num_increasing(std::string* dst, int64_t v);

// Readers consume from the front of *src; they return false on malformed
// input and then leave *src unspecified.
bool read_num_increasing(std::string_view* src, uint64_t* v);
bool read_string(std::string_view* src, std::string* s);
bool read_signed_num_increasing(std::string_view* src, int64_t* v);

}  // namespace varstate::ordered_code

namespace varstate {

// The key under which slice `slice` of tensor `name` is stored.
std::string encode_tensor_name_slice(std::string_view name, const TensorSlice& slice);

struct NameAndSlice {
  std::string name;
  TensorSlice slice;
};
// Inverse of encode_tensor_name_slice; nullopt if `key` is not such a key.
std::optional<NameAndSlice> decode_tensor_name_slice(std::string_view key);

}  // namespace varstate
