// The text form in which the interop tests pass tensors between varstate
// (interop_tool) and TensorFlow (Python): one tensor per line,
//
//   KEY DTYPE DIMS DATA [extra fields...]
//
// KEY: the name as hex of its UTF-8 bytes; DTYPE: TensorFlow's DataType enum
// number; DIMS: "2,3", or "-" for a scalar; DATA: the elements' little-endian
// bytes in row-major order as hex, "-" when there are none. Strings: each
// element's bytes as hex, comma-separated ("-" for a single empty string).
// Hex keeps non-ASCII names and arbitrary bytes exact on both sides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "varstate/tensor.h"

namespace varstate::interop {

struct TextTensor {
  std::string key;
  DType dtype = DType::kInvalid;
  std::vector<int64_t> dims;
  std::vector<std::byte> bytes;      // numeric dtypes
  std::vector<std::string> strings;  // DType::kString
  std::vector<std::string> extra;    // fields after DATA
};

std::string hex_encode(const void* data, size_t size);
std::string hex_decode(std::string_view hex);

// Splits `s` at `sep` (an empty string gives one empty field).
std::vector<std::string> split(std::string_view s, char sep);

// Parses one line; throws InvalidArgumentError naming the line on bad input.
TextTensor parse_line(const std::string& line);
std::vector<TextTensor> read_text_file(const std::string& path);

std::string format_line(const std::string& key, const Tensor& host_tensor);
std::string format_line(const std::string& key, DType dtype, const std::vector<int64_t>& dims,
                        const void* data, size_t nbytes, const std::vector<std::string>& strings);

// A host tensor holding the line's values.
Tensor to_tensor(const TextTensor& t);

}  // namespace varstate::interop
