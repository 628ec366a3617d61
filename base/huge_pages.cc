#include "base/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace varstate::internal {

void* map_huge_aligned(size_t size, bool reserve_only) noexcept {
  // A range one huge page longer than asked, so that an aligned start lies
  // inside it; the ends around that start are given back.
  const size_t span = size + kHugePageBytes;
  const int prot = reserve_only ? PROT_NONE : PROT_READ | PROT_WRITE;
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (reserve_only ? MAP_NORESERVE : 0);
  void* reserve = mmap(nullptr, span, prot, flags, -1, 0);
  if (reserve == MAP_FAILED) return nullptr;
  auto* const begin = static_cast<char*>(reserve);
  const auto address = reinterpret_cast<uintptr_t>(begin);
  char* const target = begin + (round_to_huge_pages(address) - address);
  if (target > begin) munmap(begin, static_cast<size_t>(target - begin));
  char* const end = begin + span;
  if (target + size < end) munmap(target + size, static_cast<size_t>(end - (target + size)));
  if (!reserve_only) advise_huge_pages(target, size);
  return target;
}

void unmap_huge_aligned(void* p, size_t size) noexcept { munmap(p, size); }

void* allocate_huge_block(size_t size) noexcept {
  if constexpr (kMapHugeBlocks) return map_huge_aligned(size);
  void* p = std::aligned_alloc(kHugePageBytes, size);
  if (p != nullptr) advise_huge_pages(p, size);
  return p;
}

void free_huge_block(void* p, size_t size) noexcept {
  if constexpr (kMapHugeBlocks) {
    unmap_huge_aligned(p, size);
  } else {
    std::free(p);
  }
}

void advise_huge_pages([[maybe_unused]] void* p, [[maybe_unused]] size_t size) noexcept {
#ifdef MADV_HUGEPAGE
  madvise(p, size, MADV_HUGEPAGE);
#endif
}

}  // namespace varstate::internal
