// Helpers for the checkpoint tests: scratch directories, raw file access and
// an independent decoder of the LevelDB table format (written from the
// format description, sharing no code with the library's reader).
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/crc32c.h"
#include "device_fixture.h"
#include "test_util.h"

namespace varstate::testing {

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = (std::filesystem::temp_directory_path() /
             ("varstate_ckpt_test_" + std::to_string(rd()) + std::to_string(rd())))
                .string();
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

inline std::string from_hex(std::string_view hex) {
  std::string out;
  std::string digits;
  for (char c : hex) {
    if (std::isxdigit(static_cast<unsigned char>(c))) digits += c;
  }
  for (size_t i = 0; i + 1 < digits.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  }
  return out;
}

inline std::string to_hex(std::string_view bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// --- independent table decoder ---------------------------------------------

inline uint64_t decode_varint(const std::string& s, size_t* pos) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    REQUIRE(*pos < s.size());
    uint8_t b = static_cast<uint8_t>(s[(*pos)++]);
    v |= uint64_t{b & 0x7fu} << shift;
    if (!(b & 0x80)) return v;
  }
  FAIL("varint too long");
  return 0;
}

inline uint32_t decode_fixed32(const std::string& s, size_t pos) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[pos + static_cast<size_t>(i)]);
  return v;
}

struct BlockHandle {
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct DecodedBlock {
  std::vector<std::pair<std::string, std::string>> entries;
  std::vector<uint32_t> restarts;
  std::vector<uint32_t> shared;  // shared-prefix length of each entry
};

// Decodes one uncompressed block at `h`, checking its trailer.
inline DecodedBlock decode_block(const std::string& file, BlockHandle h) {
  REQUIRE(h.offset + h.size + 5 <= file.size());
  std::string block = file.substr(h.offset, h.size);
  uint8_t type = static_cast<uint8_t>(file[h.offset + h.size]);
  CHECK(type == 0);  // no compression
  uint32_t stored = decode_fixed32(file, h.offset + h.size + 1);
  CHECK(crc32c::unmask(stored) == crc32c::value(file.data() + h.offset, h.size + 1));
  DecodedBlock out;
  REQUIRE(block.size() >= 4);
  uint32_t num_restarts = decode_fixed32(block, block.size() - 4);
  size_t restarts_at = block.size() - 4 - 4 * size_t{num_restarts};
  for (uint32_t i = 0; i < num_restarts; ++i)
    out.restarts.push_back(decode_fixed32(block, restarts_at + 4 * i));
  size_t pos = 0;
  std::string key;
  while (pos < restarts_at) {
    uint64_t shared = decode_varint(block, &pos);
    uint64_t unshared = decode_varint(block, &pos);
    uint64_t value_len = decode_varint(block, &pos);
    REQUIRE(shared <= key.size());
    key = key.substr(0, shared) + block.substr(pos, unshared);
    pos += unshared;
    out.entries.emplace_back(key, block.substr(pos, value_len));
    out.shared.push_back(static_cast<uint32_t>(shared));
    pos += value_len;
  }
  CHECK(pos == restarts_at);
  return out;
}

struct DecodedTable {
  BlockHandle metaindex, index;
  DecodedBlock index_block;
  std::vector<std::pair<std::string, std::string>> entries;  // all data entries in order
};

inline DecodedTable decode_table(const std::string& file) {
  REQUIRE(file.size() >= 48);
  size_t footer = file.size() - 48;
  CHECK(to_hex(file.substr(file.size() - 8)) == "57fb808b247547db");
  DecodedTable t;
  size_t pos = footer;
  t.metaindex.offset = decode_varint(file, &pos);
  t.metaindex.size = decode_varint(file, &pos);
  t.index.offset = decode_varint(file, &pos);
  t.index.size = decode_varint(file, &pos);
  for (; pos < file.size() - 8; ++pos) CHECK(file[pos] == '\0');  // padding
  DecodedBlock meta = decode_block(file, t.metaindex);
  CHECK(meta.entries.empty());
  t.index_block = decode_block(file, t.index);
  for (const auto& [sep, handle] : t.index_block.entries) {
    size_t p = 0;
    BlockHandle h;
    h.offset = decode_varint(handle, &p);
    h.size = decode_varint(handle, &p);
    DecodedBlock data = decode_block(file, h);
    for (auto& e : data.entries) {
      CHECK(e.first <= sep);
      t.entries.push_back(std::move(e));
    }
  }
  return t;
}

}  // namespace varstate::testing
