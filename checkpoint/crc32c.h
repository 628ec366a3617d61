// CRC-32C (Castagnoli), the checksum of TensorFlow checkpoints and of the
// LevelDB-format tables inside them.
//
// extend() continues a running checksum: value(a || b) ==
// extend(value(a), b). On x86-64 CPUs with SSE4.2 it uses the crc32
// instruction over three interleaved streams (several GB/s per core);
// elsewhere a table-driven routine (slicing by 8). Both give identical
// results; the portable one is exposed for testing.
//
// mask()/unmask() are TensorFlow's transformation of a stored checksum
// (rotate right by 15, add a constant), which keeps the CRC of a string that
// itself contains CRCs from being degenerate. Every CRC stored in a
// checkpoint (block trailers, BundleEntryProto.crc32c, string length
// checksums) is masked.
//
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace varstate::crc32c {

// Returns the CRC-32C of data[0, n) appended to a string whose CRC-32C is
// `crc` (0 for the empty string).
uint32_t extend(uint32_t crc, const void* data, size_t n);

// CRC-32C of data[0, n).
inline uint32_t value(const void* data, size_t n) { return extend(0, data, n); }

// The CRC-32C of a || b from crc_a = value(a), crc_b = value(b) and the
// length of b, without the bytes: CRC-32C is affine over GF(2), so
// value(a || b) == crc_a * x^(8 * len_b) mod P  xor  crc_b. Lets readers of
// disjoint ranges of one stored tensor verify its single stored checksum
// together (each range read once). O(log len_b) polynomial products.
uint32_t combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

// The CRC-32C of a buffer of `records` records of `record_bytes` bytes each,
// after some of its records were overwritten, from the CRC-32C of the buffer
// before and the bytes of the overwritten records alone. CRC-32C is affine
// over GF(2): for equal lengths, value(after) == value(before) xor U(before
// xor after), U being the CRC with zero initial and final values. before xor
// after is zero outside the overwritten records, so U needs their bytes and,
// between them, a jump over zero records: one 4-lookup table step per set
// bit of the number of records jumped (tables built as first needed). Lets
// compaction write a patched tensor without a checksum pass over it.
class RecordPatch {
 public:
  RecordPatch(uint64_t record_bytes, uint64_t records);
  ~RecordPatch();
  RecordPatch(const RecordPatch&) = delete;
  RecordPatch& operator=(const RecordPatch&) = delete;

  // Bytes [offset, offset + n) of record `index` go from `before` to
  // `after`. Records come in increasing order; a record's bytes in order, in
  // one piece or several (bytes not given are unchanged). InvalidArgumentError
  // for a range outside the record or out of order.
  void add(uint64_t index, uint64_t offset, const void* before, const void* after, size_t n);

  // value(after) from value(before); no add() after it.
  uint32_t apply(uint32_t crc_before);

 private:
  struct Jump;

  uint32_t jump(uint32_t reg, uint64_t records);  // appends records * record_bytes zeros
  void fold();                                    // the open record into reg_

  uint64_t record_bytes_, records_;
  uint32_t reg_ = 0;  // U of the difference over records [0, done_)
  uint64_t done_ = 0;
  bool open_ = false;  // a record being added: index_, seen_ bytes of it, U of them
  uint64_t index_ = 0, seen_ = 0;
  uint32_t record_reg_ = 0;
  std::vector<Jump> jumps_;  // [j]: a jump over 2^j records
};

// The table-driven implementation, used where the CPU lacks SSE4.2.
uint32_t extend_portable(uint32_t crc, const void* data, size_t n);

// True when extend() uses the SSE4.2 crc32 instruction on this CPU.
bool hardware_accelerated();

inline constexpr uint32_t kMaskDelta = 0xa282ead8u;

// The masked form of `crc`, as TensorFlow stores checksums.
inline uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

// Inverse of mask().
inline uint32_t unmask(uint32_t masked) {
  uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

// `crc` as error messages show it: "0x1234abcd".
std::string hex(uint32_t crc);

}  // namespace varstate::crc32c
