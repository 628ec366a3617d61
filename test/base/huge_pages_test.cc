#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "base/huge_pages.h"
#include "kernels/cpu/hash_index.h"
#include "kernels/key_hash.h"

using namespace varstate;

namespace {

struct Mapping {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  std::string perms;
};

// The mapping of /proc/self/maps that holds address p.
std::optional<Mapping> mapping_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    Mapping m;
    char perms[8] = {};
    unsigned long b = 0;
    unsigned long e = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx %7s", &b, &e, perms) != 3) continue;
    if (a >= b && a < e) return Mapping{b, e, perms};
  }
  return std::nullopt;
}

bool huge_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % internal::kHugePageBytes == 0;
}

}  // namespace

TEST_CASE("huge pages: sizes round up to whole huge pages", "[huge_pages]") {
  CHECK(internal::round_to_huge_pages(1) == internal::kHugePageBytes);
  CHECK(internal::round_to_huge_pages(internal::kHugePageBytes) == internal::kHugePageBytes);
  CHECK(internal::round_to_huge_pages(internal::kHugePageBytes + 1) ==
        2 * internal::kHugePageBytes);
}

TEST_CASE("huge pages: a block is an aligned mapping of its own, exactly its size",
          "[huge_pages]") {
  const size_t size = 3 * internal::kHugePageBytes;
  void* p = internal::map_huge_aligned(size);
  REQUIRE(p != nullptr);
  CHECK(huge_aligned(p));
  std::memset(p, 0x5a, size);  // writable to its last byte
  CHECK(static_cast<unsigned char*>(p)[size - 1] == 0x5a);
  // The ends of the over-long reservation were given back: no mapping of
  // its own runs past the block. (A neighbour may merge with it, so the
  // block's own range is checked, not the whole mapping's.)
  const std::optional<Mapping> m = mapping_of(p);
  REQUIRE(m.has_value());
  CHECK(m->perms.substr(0, 2) == "rw");
  internal::unmap_huge_aligned(p, size);
  CHECK_FALSE(mapping_of(p).has_value());

  void* reserved = internal::map_huge_aligned(size, /*reserve_only=*/true);
  REQUIRE(reserved != nullptr);
  CHECK(huge_aligned(reserved));
  const std::optional<Mapping> r = mapping_of(reserved);
  REQUIRE(r.has_value());
  CHECK(r->perms.substr(0, 3) == "---");  // reserved: no access
  internal::unmap_huge_aligned(reserved, size);
}

TEST_CASE("huge pages: a large index array gets a fresh mapping, not reused heap memory",
          "[huge_pages][hash_index]") {
  using Allocator = kernels::cpu::IndexAllocator<kernels::KeyEntry>;
  Allocator allocator;
  const size_t n = (4 * internal::kHugePageBytes) / sizeof(kernels::KeyEntry);
  // Heap memory touched and freed first: malloc would hand it out again,
  // on the 4 KiB pages it was touched on.
  {
    std::vector<char> touched(8 * internal::kHugePageBytes, 1);
    CHECK(touched.back() == 1);
  }
  kernels::KeyEntry* entries = allocator.allocate(n);
  CHECK(huge_aligned(entries));
  if constexpr (internal::kMapHugeBlocks) {
    // Unmapped when given back: a mapping of its own.
    allocator.deallocate(entries, n);
    CHECK_FALSE(mapping_of(entries).has_value());
  } else {
    allocator.deallocate(entries, n);  // malloc's, under AddressSanitizer
  }
  // Small arrays stay malloc's.
  kernels::KeyEntry* small = allocator.allocate(16);
  REQUIRE(small != nullptr);
  allocator.deallocate(small, 16);
}
