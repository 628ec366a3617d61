#include "checkpoint/ordered_code_internal.h"

#include <array>

namespace varstate::ordered_code {
namespace {

// Encoded length of a non-negative x >= 64, indexed by its bit count: 7
// payload bits per byte, less the sign and length-marker bits.
constexpr int signed_length(uint64_t x) {
  int bits = 64 - __builtin_clzll(x);
  return bits >= 63 ? 10 : bits / 7 + 1;
}

// Length-marker bits XORed into the first two bytes of an L-byte encoding.
constexpr std::array<uint8_t, 11> kHeader1 = {0,    0,    0xc0, 0xe0, 0xf0, 0xf8,
                                              0xfc, 0xfe, 0xff, 0xff, 0xff};
constexpr std::array<uint8_t, 11> kHeader2 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0xc0};

}  // namespace

void write_num_increasing(std::string* dst, uint64_t v) {
  uint8_t buf[8];
  int n = 0;
  while (v != 0) {
    buf[n++] = static_cast<uint8_t>(v & 0xff);
    v >>= 8;
  }
  dst->push_back(static_cast<char>(n));
  while (n > 0) dst->push_back(static_cast<char>(buf[--n]));
}

void write_string(std::string* dst, std::string_view s) {
  for (char c : s) {
    dst->push_back(c);
    if (c == '\x00')
      dst->push_back('\xff');
    else if (c == '\xff')
      dst->push_back('\x00');
  }
  dst->push_back('\x00');
  dst->push_back('\x01');
}

void write_signed_num_increasing(std::string* dst, int64_t v) {
  uint64_t x = v < 0 ? ~static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  if (x < 64) {
    dst->push_back(static_cast<char>(0x80 ^ static_cast<uint8_t>(v)));
    return;
  }
  int len = signed_length(x);
  uint8_t buf[10];
  uint8_t fill = v < 0 ? 0xff : 0x00;
  buf[0] = buf[1] = fill;
  uint64_t u = static_cast<uint64_t>(v);
  for (int i = 9; i >= 2; --i) {
    buf[i] = static_cast<uint8_t>(u & 0xff);
    u >>= 8;
  }
  uint8_t* p = buf + 10 - len;
  p[0] ^= kHeader1[static_cast<size_t>(len)];
  p[1] ^= kHeader2[static_cast<size_t>(len)];
  dst->append(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
}

bool read_num_increasing(std::string_view* src, uint64_t* v) {
  if (src->empty()) return false;
  size_t n = static_cast<uint8_t>((*src)[0]);
  if (n > 8 || src->size() < n + 1) return false;
  uint64_t out = 0;
  for (size_t i = 1; i <= n; ++i) out = (out << 8) | static_cast<uint8_t>((*src)[i]);
  *v = out;
  src->remove_prefix(n + 1);
  return true;
}

bool read_string(std::string_view* src, std::string* s) {
  s->clear();
  size_t i = 0;
  while (i < src->size()) {
    char c = (*src)[i];
    if (c != '\x00' && c != '\xff') {
      s->push_back(c);
      ++i;
      continue;
    }
    if (i + 1 >= src->size()) return false;
    char next = (*src)[i + 1];
    if (c == '\x00' && next == '\x01') {
      src->remove_prefix(i + 2);
      return true;
    }
    if (c == '\x00' && next == '\xff')
      s->push_back('\x00');
    else if (c == '\xff' && next == '\x00')
      s->push_back('\xff');
    else
      return false;
    i += 2;
  }
  return false;
}

bool read_signed_num_increasing(std::string_view* src, int64_t* v) {
  if (src->empty()) return false;
  uint8_t b0 = static_cast<uint8_t>((*src)[0]);
  bool negative = (b0 & 0x80) == 0;
  uint8_t flip = negative ? 0xff : 0x00;
  // Count the length-marker bits: the run of bits equal to the sign bit,
  // which starts at the sign bit itself.
  uint16_t lead = static_cast<uint16_t>((b0 ^ flip) << 8);
  if (src->size() > 1) lead |= static_cast<uint8_t>((*src)[1]) ^ flip;
  int ones = 0;
  while (ones < 16 && (lead & (0x8000u >> ones))) ++ones;
  if (ones <= 1) {
    *v = static_cast<int8_t>(b0 ^ 0x80);
    src->remove_prefix(1);
    return true;
  }
  int len = ones;
  if (len > 10 || src->size() < static_cast<size_t>(len)) return false;
  uint8_t buf[10];
  for (int i = 0; i < len; ++i) buf[i] = static_cast<uint8_t>((*src)[static_cast<size_t>(i)]);
  buf[0] ^= kHeader1[static_cast<size_t>(len)];
  buf[1] ^= kHeader2[static_cast<size_t>(len)];
  uint64_t u = negative ? ~uint64_t{0} : 0;
  for (int i = 0; i < len; ++i) u = (u << 8) | buf[i];
  *v = static_cast<int64_t>(u);
  src->remove_prefix(static_cast<size_t>(len));
  return true;
}

}  // namespace varstate::ordered_code

namespace varstate {

std::string encode_tensor_name_slice(std::string_view name, const TensorSlice& slice) {
  std::string key;
  ordered_code::write_num_increasing(&key, 0);
  ordered_code::write_string(&key, name);
  ordered_code::write_num_increasing(&key, static_cast<uint64_t>(slice.rank()));
  for (const TensorSlice::Extent& e : slice.extents()) {
    bool full = e.length == TensorSlice::kFullExtent;
    ordered_code::write_signed_num_increasing(&key, full ? 0 : e.start);
    ordered_code::write_signed_num_increasing(&key, full ? -1 : e.length);
  }
  return key;
}

std::optional<NameAndSlice> decode_tensor_name_slice(std::string_view key) {
  uint64_t zero = 0, rank = 0;
  NameAndSlice out;
  if (!ordered_code::read_num_increasing(&key, &zero) || zero != 0) return std::nullopt;
  if (!ordered_code::read_string(&key, &out.name)) return std::nullopt;
  if (!ordered_code::read_num_increasing(&key, &rank) || rank > 1024) return std::nullopt;
  std::vector<TensorSlice::Extent> extents;
  for (uint64_t d = 0; d < rank; ++d) {
    int64_t start = 0, length = 0;
    if (!ordered_code::read_signed_num_increasing(&key, &start) ||
        !ordered_code::read_signed_num_increasing(&key, &length)) {
      return std::nullopt;
    }
    if (length == -1) {
      extents.push_back(TensorSlice::Extent{});
    } else if (start < 0 || length < 0) {
      return std::nullopt;
    } else {
      extents.push_back(TensorSlice::Extent{start, length});
    }
  }
  if (!key.empty()) return std::nullopt;
  out.slice = TensorSlice(std::move(extents));
  return out;
}

}  // namespace varstate
