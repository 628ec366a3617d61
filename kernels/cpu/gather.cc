#include "kernels/cpu/gather.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/eigen_internal.h"

namespace varstate::kernels::cpu {
namespace {

// Rows ahead whose first cache line is prefetched: random rows are
// latency-bound, and a copy loop alone keeps too few misses in flight.
constexpr int64_t kPrefetchRows = 16;

// copy(first, last) over [0, n), on several threads above the gather
// threshold (bytes read + written).
template <typename Copy>
void for_rows(int64_t n, int64_t row_bytes, const Copy& copy) {
  for_ranges(n, 1, 2 * n * row_bytes, parallel_thresholds().gather_bytes, copy);
}

}  // namespace

template <typename Index>
void gather_rows(const void* table, int64_t row_bytes, const Index* indices, int64_t n, void* out) {
  if (n == 0 || row_bytes == 0) return;
  const char* src = static_cast<const char*>(table);
  char* dst = static_cast<char*>(out);
  auto copy = [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      if (i + kPrefetchRows < last) {
        __builtin_prefetch(src + static_cast<int64_t>(indices[i + kPrefetchRows]) * row_bytes);
      }
      std::memcpy(dst + i * row_bytes, src + static_cast<int64_t>(indices[i]) * row_bytes,
                  row_bytes);
    }
  };
  for_rows(n, row_bytes, copy);
}

template <typename Index>
void gather_rows_parts(const void* const* parts, const int64_t* part_begin, int num_parts,
                       int64_t row_bytes, const Index* indices, int64_t n, void* out) {
  if (n == 0 || row_bytes == 0) return;
  char* dst = static_cast<char*>(out);
  const int64_t* bounds = part_begin + 1;
  auto source = [&](int64_t i) {
    const int64_t r = static_cast<int64_t>(indices[i]);
    const int k = static_cast<int>(std::upper_bound(bounds, bounds + num_parts - 1, r) - bounds);
    return static_cast<const char*>(parts[k]) + (r - part_begin[k]) * row_bytes;
  };
  auto copy = [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      if (i + kPrefetchRows < last) __builtin_prefetch(source(i + kPrefetchRows));
      std::memcpy(dst + i * row_bytes, source(i), row_bytes);
    }
  };
  for_rows(n, row_bytes, copy);
}

template void gather_rows<int32_t>(const void*, int64_t, const int32_t*, int64_t, void*);
template void gather_rows<int64_t>(const void*, int64_t, const int64_t*, int64_t, void*);
template void gather_rows_parts<int64_t>(const void* const*, const int64_t*, int, int64_t,
                                         const int64_t*, int64_t, void*);

}  // namespace varstate::kernels::cpu
