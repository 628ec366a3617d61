// Anonymous mappings aligned to 2 MiB and asked to be backed by transparent
// huge pages (madvise mode). Large arrays read at random (a variable's rows,
// a hash index's entries) miss the TLB far less on huge pages.
//
// A mapping of its own is needed for that: memory malloc hands out again
// was touched before, on 4 KiB pages, and madvise does not change pages
// already there. Under AddressSanitizer callers keep to malloc instead, so
// that out-of-bounds accesses to their arrays are still reported
// (kMapHugeBlocks).
#pragma once

#include <cstddef>

namespace varstate::internal {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kMapHugeBlocks = false;
#else
inline constexpr bool kMapHugeBlocks = true;
#endif

// `bytes` rounded up to whole huge pages.
constexpr size_t round_to_huge_pages(size_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

// A fresh mapping of `size` bytes (a multiple of kHugePageBytes) at a
// 2 MiB-aligned address, readable and writable and advised for huge pages;
// nullptr when the system has no room. `reserve_only`: the range is
// reserved (no access, no memory committed) for a caller that moves another
// mapping onto it (mremap), and not advised.
void* map_huge_aligned(size_t size, bool reserve_only = false) noexcept;

// Unmaps a block map_huge_aligned returned (`size` as asked).
void unmap_huge_aligned(void* p, size_t size) noexcept;

// A block of `size` bytes (a multiple of kHugePageBytes), 2 MiB-aligned
// and advised for huge pages: a mapping of its own (map_huge_aligned), or
// malloc's under AddressSanitizer (kMapHugeBlocks). nullptr when the system
// has no room. Given back by free_huge_block with the same size.
void* allocate_huge_block(size_t size) noexcept;
void free_huge_block(void* p, size_t size) noexcept;

// Advises [p, p + size) for huge pages (advisory: no error when the system
// declines).
void advise_huge_pages(void* p, size_t size) noexcept;

}  // namespace varstate::internal
