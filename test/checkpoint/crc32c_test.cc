#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/crc32c.h"
#include "test_util.h"
#include "varstate/error.h"

using namespace varstate;

TEST_CASE("crc32c matches known vectors", "[crc32c]") {
  const std::string check = "123456789";
  CHECK(crc32c::value(check.data(), check.size()) == 0xe3069283u);
  CHECK(crc32c::extend_portable(0, check.data(), check.size()) == 0xe3069283u);

  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
    dec[static_cast<size_t>(i)] = static_cast<uint8_t>(31 - i);
  }
  CHECK(crc32c::value(zeros.data(), 32) == 0x8a9136aau);
  CHECK(crc32c::value(ones.data(), 32) == 0x62a8ab43u);
  CHECK(crc32c::value(inc.data(), 32) == 0x46dd794eu);
  CHECK(crc32c::value(dec.data(), 32) == 0x113fdb5cu);
  CHECK(crc32c::value(nullptr, 0) == 0u);
}

TEST_CASE("crc32c of TensorFlow's float values (formats.md 1.6)", "[crc32c]") {
  const float values[] = {0.5f, 2.0f, 3.0f, 0.0f};
  const uint32_t crcs[] = {0x26973e52u, 0x091c567bu, 0xf60b907fu, 0x48674bc7u};
  const uint32_t masked[] = {0x1f273806u, 0x4f78fd10u, 0xc382d6efu, 0x3a117ba6u};
  for (int i = 0; i < 4; ++i) {
    CAPTURE(values[i]);
    uint32_t c = crc32c::value(&values[i], 4);
    CHECK(c == crcs[i]);
    CHECK(crc32c::mask(c) == masked[i]);
    CHECK(crc32c::unmask(masked[i]) == c);
  }
  CHECK(crc32c::mask(0) == 0xa282ead8u);
}

TEST_CASE("crc32c extend composes", "[crc32c]") {
  const std::string s = "hello, checkpoint world";
  for (size_t split = 0; split <= s.size(); ++split) {
    CAPTURE(split);
    uint32_t a = crc32c::value(s.data(), split);
    CHECK(crc32c::extend(a, s.data() + split, s.size() - split) ==
          crc32c::value(s.data(), s.size()));
  }
}

TEST_CASE("crc32c combine joins the checksums of adjacent ranges", "[crc32c]") {
  INFO("seed " << testing::kSeed);
  std::mt19937_64 gen(testing::kSeed);
  std::vector<uint8_t> data(3 * 8192 * 3 + 1001);
  for (auto& b : data) b = static_cast<uint8_t>(gen());
  const uint32_t whole = crc32c::value(data.data(), data.size());
  const size_t splits[] = {0, 1, 7, 8, 255, 4096, 3 * 8192 + 1, data.size() - 1, data.size()};
  for (size_t split : splits) {
    CAPTURE(split);
    const uint32_t a = crc32c::value(data.data(), split);
    const uint32_t b = crc32c::value(data.data() + split, data.size() - split);
    CHECK(crc32c::combine(a, b, data.size() - split) == whole);
  }
  // Three ranges, combined left to right; the empty string is neutral.
  const uint32_t a = crc32c::value(data.data(), 100);
  const uint32_t b = crc32c::value(data.data() + 100, 5000);
  const uint32_t c = crc32c::value(data.data() + 5100, data.size() - 5100);
  CHECK(crc32c::combine(crc32c::combine(a, b, 5000), c, data.size() - 5100) == whole);
  CHECK(crc32c::combine(whole, 0, 0) == whole);
  CHECK(crc32c::combine(0, whole, data.size()) == whole);
  // Lengths past 2^32 bytes: combining is associative.
  const uint64_t lb = (uint64_t{1} << 33) + 3, lc = (uint64_t{1} << 40) + 12345;
  CHECK(crc32c::combine(crc32c::combine(a, b, lb), c, lc) ==
        crc32c::combine(a, crc32c::combine(b, c, lc), lb + lc));
}

TEST_CASE("crc32c hardware path equals the portable one", "[crc32c]") {
  INFO("seed " << testing::kSeed << ", hardware " << crc32c::hardware_accelerated());
  std::mt19937_64 gen(testing::kSeed);
  std::vector<uint8_t> data(3 * 8192 * 2 + 3 * 256 * 3 + 77);
  for (auto& b : data) b = static_cast<uint8_t>(gen());
  // Sizes straddling the 3-way block thresholds, at every alignment.
  const size_t sizes[] = {0,
                          1,
                          7,
                          8,
                          9,
                          63,
                          255,
                          256,
                          767,
                          768,
                          769,
                          1000,
                          3 * 8192 - 1,
                          3 * 8192,
                          3 * 8192 + 1,
                          3 * 8192 + 3 * 256 + 5,
                          data.size() - 8};
  for (size_t size : sizes) {
    for (size_t offset = 0; offset < 8; ++offset) {
      CAPTURE(size, offset);
      uint32_t seed = static_cast<uint32_t>(gen());
      REQUIRE(crc32c::extend(seed, data.data() + offset, size) ==
              crc32c::extend_portable(seed, data.data() + offset, size));
    }
  }
}

// Overwrites the chosen records of `data` (in pieces of `piece` bytes, or
// whole) through a RecordPatch, and returns its checksum of the result.
static uint32_t patched_crc(std::vector<uint8_t>& data, size_t record_bytes,
                            const std::vector<uint64_t>& records, std::mt19937_64& gen,
                            size_t piece) {
  crc32c::RecordPatch patch(record_bytes, data.size() / record_bytes);
  const uint32_t before = crc32c::value(data.data(), data.size());
  std::vector<uint8_t> fresh(record_bytes);
  for (uint64_t r : records) {
    for (auto& b : fresh) b = static_cast<uint8_t>(gen());
    uint8_t* at = data.data() + r * record_bytes;
    for (size_t off = 0; off < record_bytes; off += piece) {
      const size_t n = std::min(piece, record_bytes - off);
      patch.add(r, off, at + off, fresh.data() + off, n);
    }
    std::copy(fresh.begin(), fresh.end(), at);
  }
  return patch.apply(before);
}

TEST_CASE("crc32c RecordPatch gives the checksum of the overwritten buffer", "[crc32c]") {
  INFO("seed " << testing::kSeed);
  std::mt19937_64 gen(testing::kSeed);
  for (size_t record_bytes : {size_t{1}, size_t{3}, size_t{8}, size_t{64}, size_t{1000}}) {
    const size_t records = 5000;
    std::vector<uint8_t> data(record_bytes * records);
    for (auto& b : data) b = static_cast<uint8_t>(gen());
    // None, the first, the last, neighbours, sparse, dense, every record.
    std::vector<std::vector<uint64_t>> sets = {
        {}, {0}, {records - 1}, {0, 1, 2, records - 1}, {17, 18, 4000}};
    std::vector<uint64_t> sparse, all;
    for (uint64_t r = 0; r < records; ++r) {
      if (gen() % 97 == 0) sparse.push_back(r);
      all.push_back(r);
    }
    sets.push_back(sparse);
    sets.push_back(all);
    for (const auto& set : sets) {
      for (size_t piece : {record_bytes, size_t{1}, size_t{7}}) {
        CAPTURE(record_bytes, set.size(), piece);
        const uint32_t got = patched_crc(data, record_bytes, set, gen, piece);
        CHECK(got == crc32c::value(data.data(), data.size()));
      }
    }
  }
}

TEST_CASE("crc32c RecordPatch: bytes left out of a record stay as they were", "[crc32c]") {
  std::vector<uint8_t> data(40 * 10);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  crc32c::RecordPatch patch(40, 10);
  const uint32_t before = crc32c::value(data.data(), data.size());
  const uint8_t after[5] = {1, 2, 3, 4, 5};
  patch.add(3, 10, data.data() + 3 * 40 + 10, after, 5);  // the middle of record 3
  patch.add(3, 30, data.data() + 3 * 40 + 30, after, 2);  // a gap, then 2 bytes
  patch.add(9, 0, data.data() + 9 * 40, after, 1);        // the first byte of the last
  std::copy(after, after + 5, data.data() + 3 * 40 + 10);
  std::copy(after, after + 2, data.data() + 3 * 40 + 30);
  data[9 * 40] = after[0];
  CHECK(patch.apply(before) == crc32c::value(data.data(), data.size()));
}

TEST_CASE("crc32c RecordPatch rejects records out of order or out of range", "[crc32c]") {
  const uint8_t bytes[8] = {};
  crc32c::RecordPatch patch(8, 4);
  patch.add(1, 0, bytes, bytes, 4);
  CHECK_THROWS_AS(patch.add(0, 0, bytes, bytes, 8), InvalidArgumentError);  // an earlier record
  CHECK_THROWS_WITH(patch.add(1, 2, bytes, bytes, 1),                       // bytes already given
                    Catch::Contains("bytes [2, 3) of record 1") &&
                        Catch::Contains("last: record 1 up to byte 4"));
  CHECK_THROWS_AS(patch.add(4, 0, bytes, bytes, 1), InvalidArgumentError);  // past the last
  CHECK_THROWS_AS(patch.add(2, 4, bytes, bytes, 5), InvalidArgumentError);  // past the record
  patch.add(2, 0, bytes, bytes, 8);  // a good call still works after the refusals
  patch.apply(0);
  CHECK_THROWS_WITH(patch.add(3, 0, bytes, bytes, 1), Catch::Contains("last: record 3"));
  // Nothing to patch: no records, or records of no bytes.
  CHECK(crc32c::RecordPatch(8, 0).apply(0x1234abcdu) == 0x1234abcdu);
  crc32c::RecordPatch empty_rows(0, 10);
  empty_rows.add(4, 0, bytes, bytes, 0);
  CHECK(empty_rows.apply(0x1234abcdu) == 0x1234abcdu);
}
