#include "checkpoint/crc32c.h"

#include <array>
#include <cstdio>
#include <cstring>

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

#if VARSTATE_CRC32C_X86

// Multiplying the register by x^(8n) -- appending n zero bytes -- is linear
// in the register's bits, so it is a lookup per register byte in a table
// built from the images of the 32 unit vectors. This is what lets three
// independent crc32 streams, which hide the instruction's 3-cycle latency,
// be joined into one checksum.
struct ShiftTable {
  std::array<std::array<uint32_t, 256>, 4> t;

  explicit ShiftTable(size_t zero_bytes) {
    std::array<uint32_t, 32> unit{};
    for (int bit = 0; bit < 32; ++bit) {
      uint32_t c = uint32_t{1} << bit;
      for (size_t i = 0; i < zero_bytes; ++i) c = (c >> 8) ^ kTable[0][c & 0xff];
      unit[bit] = c;
    }
    for (int k = 0; k < 4; ++k) {
      for (int b = 0; b < 256; ++b) {
        uint32_t v = 0;
        for (int j = 0; j < 8; ++j) {
          if (b & (1 << j)) v ^= unit[8 * k + j];
        }
        t[k][b] = v;
      }
    }
  }

  uint32_t shift(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

constexpr size_t kLongBlock = 8192;
constexpr size_t kShortBlock = 256;

const ShiftTable& long_shift() {
  static const ShiftTable table(kLongBlock);
  return table;
}
const ShiftTable& short_shift() {
  static const ShiftTable table(kShortBlock);
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

std::string hex(uint32_t crc) {
  char buf[11];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(crc));
  return buf;
}

}  // namespace varstate::crc32c
