// Software prefetches that the compiler cannot delete.
//
// GCC (12, the CI compiler) models __builtin_prefetch as touching no
// memory. Its interprocedural pure-const pass therefore finds a function
// whose only effect is prefetching "looping pure", and a call to a pure
// function whose result is unused is dead code. A prefetching helper the
// early inliner leaves out of line (a lambda, or a function template with
// a loop in it) is thus deleted with its prefetches, and nothing says so.
// Sparse training's prefetch_rows was: its row loop ran with no prefetch
// at all (tools/check_prefetch.py now checks the built library).
//
// The empty volatile asm statement below emits no instruction; it only
// gives the function that contains it an effect the compiler must keep, so
// neither the prefetch nor the helper around it is ever dropped. It names
// no memory, so loads and stores still move freely around it.
#pragma once

#include <cstdint>

namespace varstate::kernels::cpu {

enum class PrefetchFor : int {
  kRead = 0,
  kWrite = 1
};

// Prefetches the cache line holding `p`.
template <PrefetchFor For = PrefetchFor::kRead>
[[gnu::always_inline]] inline void prefetch_line(const void* p) {
  __builtin_prefetch(p, static_cast<int>(For));
  asm volatile("");
}

// Prefetches the cache lines of [p, p + bytes) (bytes rounded up to
// whole 64-byte lines from p).
template <PrefetchFor For = PrefetchFor::kRead>
[[gnu::always_inline]] inline void prefetch_bytes(const void* p, int64_t bytes) {
  const char* line = static_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(line + b, static_cast<int>(For));
  asm volatile("");
}

}  // namespace varstate::kernels::cpu
