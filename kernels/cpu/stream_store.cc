#include "kernels/cpu/stream_store.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <fstream>
#include <string>

namespace varstate::kernels::cpu {
namespace {

// A sysfs cache size ("32768K", "1M", "512"), in bytes; 0 when unreadable.
int64_t parse_size(const std::string& text) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  const char unit = used < text.size() ? text[used] : ' ';
  if (unit == 'K') return value << 10;
  if (unit == 'M') return value << 20;
  if (unit == 'G') return value << 30;
  return value;
}

int64_t read_last_level_cache_bytes() {
  // The kernel's view first: the cache this core shares (a VM's CPUID may
  // report the whole host's). The deepest level listed wins.
  int best_level = 0;
  int64_t best = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level_file(dir + "/level"), size_file(dir + "/size");
    int level = 0;
    std::string size;
    if (!(level_file >> level) || !(size_file >> size)) continue;
    const int64_t bytes = parse_size(size);
    if (bytes > 0 && level >= best_level) best_level = level, best = bytes;
  }
  if (best > 0) return best;
#ifdef _SC_LEVEL3_CACHE_SIZE
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) return l3;
#endif
  return int64_t{32} << 20;
}

std::atomic<int64_t> cache_bytes_for_testing{-1};

}  // namespace

int64_t last_level_cache_bytes() {
  static const int64_t bytes = read_last_level_cache_bytes();
  const int64_t forced = cache_bytes_for_testing.load(std::memory_order_relaxed);
  return forced >= 0 ? forced : bytes;
}

void set_last_level_cache_bytes_for_testing(std::optional<int64_t> bytes) {
  cache_bytes_for_testing.store(bytes.value_or(-1));
}

}  // namespace varstate::kernels::cpu
