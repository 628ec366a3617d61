#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "checkpoint/varint_internal.h"

using varstate::internal::get_varint64;
using varstate::internal::put_varint64;

namespace {

const std::byte* bytes(const std::string& s) {
  return reinterpret_cast<const std::byte*>(s.data());
}

}  // namespace

TEST_CASE("varint64 encodes 7 bits per byte, low group first", "[varint]") {
  std::string out;
  put_varint64(&out, 300);  // 0b10'0101100: 0xac then 0x02
  REQUIRE(out == std::string("\xac\x02", 2));
  out.clear();
  put_varint64(&out, 0);
  REQUIRE(out == std::string(1, '\0'));
  out.clear();
  put_varint64(&out, std::numeric_limits<uint64_t>::max());
  REQUIRE(out.size() == 10);
  CHECK(static_cast<uint8_t>(out.back()) == 0x01);
}

TEST_CASE("varint64 round-trips and advances past each value", "[varint]") {
  const uint64_t values[] = {0,         1,           127, 128, 16383, 16384, uint64_t{1} << 32,
                             123456789, ~uint64_t{0}};
  std::string s;
  for (uint64_t v : values) put_varint64(&s, v);
  const std::byte* p = bytes(s);
  const std::byte* end = p + s.size();
  for (uint64_t v : values) {
    uint64_t got = 0;
    REQUIRE(get_varint64(p, end, &got));
    CHECK(got == v);
  }
  CHECK(p == end);
}

TEST_CASE("varint64 rejects a truncated or over-long value", "[varint]") {
  std::string s;
  put_varint64(&s, uint64_t{1} << 40);
  s.pop_back();  // the last byte, the only one without the high bit
  const std::byte* p = bytes(s);
  uint64_t v = 0;
  CHECK_FALSE(get_varint64(p, p + s.size(), &v));

  const std::string eleven(11, '\x80');  // never ends within 10 bytes
  p = bytes(eleven);
  CHECK_FALSE(get_varint64(p, p + eleven.size(), &v));

  const std::string empty;
  p = bytes(empty);
  CHECK_FALSE(get_varint64(p, p, &v));
}
