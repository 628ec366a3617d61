// Base-128 varints (the LevelDB table's block handles, the string lengths of
// a tensor bundle): 7 bits per byte, least significant group first, the high
// bit set on every byte but the last. A uint64 takes at most 10 bytes.
// Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace varstate::internal {

// Appends v to *dst.
inline void put_varint64(std::string* dst, uint64_t v) {
  while (v >= 0x80) {
    dst->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  dst->push_back(static_cast<char>(v));
}

// Reads one varint from [p, end) into *v and advances p past it. False
// (p and *v unspecified) when the bytes end first or the varint is longer
// than 10 bytes.
inline bool get_varint64(const std::byte*& p, const std::byte* end, uint64_t* v) {
  uint64_t out = 0;
  for (int shift = 0; shift <= 63 && p < end; shift += 7) {
    const auto b = static_cast<uint8_t>(*p++);
    out |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) {
      *v = out;
      return true;
    }
  }
  return false;
}

}  // namespace varstate::internal
