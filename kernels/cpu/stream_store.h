// Stores that go around the caches, for rows a kernel writes and nothing
// reads soon: an ordinary store that misses first reads the line it is
// about to overwrite (a read for ownership), so writing a row of a table
// far larger than the caches costs a read and a write of its lines; a
// non-temporal store of whole lines writes them once. They are weakly
// ordered: a thread calls stream_fence() after its last one, before
// anything (a lock's release, a pool task's completion) tells another
// thread the rows are written. A thread's own later loads see them.
// x86 (SSE2) only; elsewhere kCanStream is false and nothing streams.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace varstate::kernels::cpu {

#if defined(__SSE2__)
inline constexpr bool kCanStream = true;
#else
inline constexpr bool kCanStream = false;
#endif

// Copies `bytes` bytes (a multiple of 16) from `src` (any alignment) to
// `dst` (16-byte aligned) with non-temporal stores. Only whole 64-byte
// lines stream well: a part of a line is written to memory on its own.
inline void stream_copy(void* dst, const void* src, size_t bytes) {
#if defined(__SSE2__)
  auto* to = static_cast<std::byte*>(dst);
  const auto* from = static_cast<const std::byte*>(src);
  for (size_t b = 0; b < bytes; b += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + b),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + b)));
  }
#else
  (void)dst, (void)src, (void)bytes;
#endif
}

// Orders this thread's non-temporal stores before its later stores.
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// The size of the largest cache, in bytes (the last level's, as the OS
// reports it; 32 MiB when it does not). Read once.
int64_t last_level_cache_bytes();
// Makes last_level_cache_bytes() return `bytes` (tests: 0 streams every
// table), or what it read when nullopt. While no kernel runs.
void set_last_level_cache_bytes_for_testing(std::optional<int64_t> bytes);

}  // namespace varstate::kernels::cpu
