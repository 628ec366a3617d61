#include "checkpoint/crc32c.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cstring>
#include <string>

#include "varstate/error.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VARSTATE_CRC32C_X86 1
#include <nmmintrin.h>
#endif

namespace varstate::crc32c {
namespace {

constexpr uint32_t kPolynomial = 0x82f63b78u;  // reflected Castagnoli

using Table = std::array<std::array<uint32_t, 256>, 8>;

constexpr Table make_slicing_table() {
  Table t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? kPolynomial : 0);
    t[0][i] = c;
  }
  for (int k = 1; k < 8; ++k) {
    for (int i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
  return t;
}

constexpr Table kTable = make_slicing_table();

inline uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// Advances the raw (uninverted) CRC register over n bytes.
uint32_t update_portable(uint32_t c, const uint8_t* p, size_t n) {
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = (c >> 8) ^ kTable[0][(c ^ *p++) & 0xff];
    --n;
  }
  while (n >= 8) {
    uint32_t lo = c ^ load_le32(p);
    uint32_t hi = load_le32(p + 4);
    c = kTable[7][lo & 0xff] ^ kTable[6][(lo >> 8) & 0xff] ^ kTable[5][(lo >> 16) & 0xff] ^
        kTable[4][lo >> 24] ^ kTable[3][hi & 0xff] ^ kTable[2][(hi >> 8) & 0xff] ^
        kTable[1][(hi >> 16) & 0xff] ^ kTable[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ kTable[0][(c ^ *p++) & 0xff];
  return c;
}

// Polynomials modulo kPolynomial in the reflected bit order of the CRC
// register: bit 31 is the coefficient of x^0, bit 0 that of x^31.
constexpr uint32_t kOne = 0x80000000u;

// a * b mod P.
uint32_t multiply_mod(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t bit = kOne; bit != 0; bit >>= 1) {
    if (a & bit) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kPolynomial : b >> 1;  // b *= x
  }
  return product;
}

// x^(8 * n) mod P, by squaring.
uint32_t x_to_8n(uint64_t n) {
  uint32_t result = kOne;
  uint32_t power = kOne >> 8;  // x^8
  for (; n != 0; n >>= 1) {
    if (n & 1) result = multiply_mod(result, power);
    power = multiply_mod(power, power);
  }
  return result;
}

// Multiplying the register by x^(8n) -- appending n zero bytes -- is linear
// in the register's bits, so it is a lookup per register byte in a table
// built from the images of the 32 unit vectors. This is what lets three
// independent crc32 streams, which hide the instruction's 3-cycle latency,
// be joined into one checksum, and what lets RecordPatch jump over the
// records a patch leaves alone.
struct ShiftTable {
  std::array<std::array<uint32_t, 256>, 4> t;

  // Multiplication by `power` (x^(8n) mod P for a shift by n bytes).
  explicit ShiftTable(uint32_t power) {
    std::array<uint32_t, 32> unit{};
    for (int bit = 0; bit < 32; ++bit) unit[bit] = multiply_mod(uint32_t{1} << bit, power);
    for (int k = 0; k < 4; ++k) {
      t[k][0] = 0;
      for (int b = 1; b < 256; ++b) {  // b's image: that of b without its lowest bit, and the bit's
        t[k][b] = t[k][b & (b - 1)] ^ unit[8 * k + std::countr_zero(static_cast<unsigned>(b))];
      }
    }
  }

  uint32_t shift(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

#if VARSTATE_CRC32C_X86

constexpr size_t kLongBlock = 8192;
constexpr size_t kShortBlock = 256;

const ShiftTable& long_shift() {
  static const ShiftTable table(x_to_8n(kLongBlock));
  return table;
}
const ShiftTable& short_shift() {
  static const ShiftTable table(x_to_8n(kShortBlock));
  return table;
}

inline uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Three streams of `block` bytes each, then joined: c0 * x^(16 block) ^
// c1 * x^(8 block) ^ c2.
__attribute__((target("sse4.2"))) inline uint64_t update_three_way(uint64_t c0, const uint8_t*& p,
                                                                   size_t& n, size_t block,
                                                                   const ShiftTable& shift) {
  while (n >= 3 * block) {
    uint64_t c1 = 0, c2 = 0;
    const uint8_t* end = p + block;
    do {
      c0 = _mm_crc32_u64(c0, load_u64(p));
      c1 = _mm_crc32_u64(c1, load_u64(p + block));
      c2 = _mm_crc32_u64(c2, load_u64(p + 2 * block));
      p += 8;
    } while (p < end);
    c0 = shift.shift(static_cast<uint32_t>(c0)) ^ c1;
    c0 = shift.shift(static_cast<uint32_t>(c0)) ^ c2;
    p += 2 * block;
    n -= 3 * block;
  }
  return c0;
}

__attribute__((target("sse4.2"))) uint32_t update_sse42(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  c = update_three_way(c, p, n, kLongBlock, long_shift());
  c = update_three_way(c, p, n, kShortBlock, short_shift());
  while (n >= 8) {
    c = _mm_crc32_u64(c, load_u64(p));
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
  return static_cast<uint32_t>(c);
}

bool cpu_has_sse42() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}

#endif  // VARSTATE_CRC32C_X86

using UpdateFn = uint32_t (*)(uint32_t, const uint8_t*, size_t);

UpdateFn select_update() {
#if VARSTATE_CRC32C_X86
  if (cpu_has_sse42()) {
    long_shift();  // build both tables now rather than inside a hot call
    short_shift();
    return update_sse42;
  }
#endif
  return update_portable;
}

UpdateFn update_fn() {
  static const UpdateFn fn = select_update();
  return fn;
}

}  // namespace

uint32_t combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  return multiply_mod(crc_a, x_to_8n(len_b)) ^ crc_b;
}

uint32_t extend(uint32_t crc, const void* data, size_t n) {
  return ~update_fn()(~crc, static_cast<const uint8_t*>(data), n);
}

uint32_t extend_portable(uint32_t crc, const void* data, size_t n) {
  return ~update_portable(~crc, static_cast<const uint8_t*>(data), n);
}

bool hardware_accelerated() { return update_fn() != update_portable; }

struct RecordPatch::Jump : ShiftTable {
  explicit Jump(uint32_t p) : ShiftTable(p), power(p) {}
  uint32_t power;  // x^(8 record_bytes 2^j) mod P
};

RecordPatch::RecordPatch(uint64_t record_bytes, uint64_t records)
    : record_bytes_(record_bytes), records_(records) {}

RecordPatch::~RecordPatch() = default;

void RecordPatch::add(uint64_t index, uint64_t offset, const void* before, const void* after,
                      size_t n) {
  if (index >= records_ || offset > record_bytes_ || n > record_bytes_ - offset ||
      (open_ && (index < index_ || (index == index_ && offset < seen_))) ||
      (!open_ && index < done_)) {
    std::string last = "none";
    if (open_) {
      last = "record " + std::to_string(index_) + " up to byte " + std::to_string(seen_);
    } else if (done_ > 0) {
      last = "record " + std::to_string(done_ - 1);
    }
    throw InvalidArgumentError(
        "crc32c::RecordPatch::add: bytes [" + std::to_string(offset) + ", " +
        std::to_string(offset + n) + ") of record " + std::to_string(index) + ", in " +
        std::to_string(records_) + " records of " + std::to_string(record_bytes_) +
        " bytes, records and their bytes in increasing order (last: " + last + ")");
  }
  if (open_ && index != index_) fold();
  if (!open_) {
    open_ = true;
    index_ = index;
    seen_ = 0;
    record_reg_ = 0;
  }
  if (offset > seen_) record_reg_ = multiply_mod(record_reg_, x_to_8n(offset - seen_));
  const auto* b = static_cast<const uint8_t*>(before);
  const auto* a = static_cast<const uint8_t*>(after);
  uint8_t diff[256];
  for (size_t done = 0; done < n;) {
    const size_t k = std::min(sizeof diff, n - done);
    for (size_t i = 0; i < k; ++i) diff[i] = b[done + i] ^ a[done + i];
    record_reg_ = update_fn()(record_reg_, diff, k);
    done += k;
  }
  seen_ = offset + n;
}

uint32_t RecordPatch::jump(uint32_t reg, uint64_t records) {
  for (size_t j = 0; records != 0; ++j, records >>= 1) {
    if (j == jumps_.size()) {
      const uint32_t power = j == 0 ? x_to_8n(record_bytes_)  // else the last one's, squared
                                    : multiply_mod(jumps_.back().power, jumps_.back().power);
      jumps_.emplace_back(power);
    }
    if (records & 1) reg = jumps_[j].shift(reg);
  }
  return reg;
}

void RecordPatch::fold() {
  if (seen_ < record_bytes_)
    record_reg_ = multiply_mod(record_reg_, x_to_8n(record_bytes_ - seen_));
  reg_ = jump(reg_, index_ + 1 - done_) ^ record_reg_;
  done_ = index_ + 1;
  open_ = false;
}

uint32_t RecordPatch::apply(uint32_t crc_before) {
  if (open_) fold();
  reg_ = jump(reg_, records_ - done_);
  done_ = records_;
  return crc_before ^ reg_;
}

std::string hex(uint32_t crc) {
  char buf[11];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(crc));
  return buf;
}

}  // namespace varstate::crc32c
