// bfloat16 products on AMX tiles (TDPBF16PS), for matmul.cc: B packed once
// into tiles of pairs of its rows, A's rows copied into tiles a chunk at a
// time, and 32 x 32 blocks of the float result computed as 2 x 2 tiles of
// 16 x 16 over steps of 32 in k. Compiled with -mamx-tile -mamx-bf16
// (kernels/sources.cmake), which enable only the tile instructions written
// here: the rest of this file compiles as the baseline does. Called only
// where matmul_amx::available(). Internal.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/cpu/matmul_rows.h"

namespace varstate::kernels::cpu::matmul_amx {
namespace {

constexpr int64_t kBlock = 32;  // rows and columns of the result a step computes
constexpr int64_t kDepth = 32;  // elements of k a tile row holds (64 bytes)

int64_t padded(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// The tile configuration (palette 1): tiles 0-3 hold the 2 x 2 blocks of
// the result (16 rows of 16 floats), 4-5 two blocks of 16 rows of A (32
// bfloat16 of k each), 6-7 two blocks of B (16 pairs of k, 16 columns).
struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void configure_tiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
}

// The calling thread's buffer for a block of rows of A, kept from call to
// call. Plain memory with a destructor of this file (no std:: container):
// an inline template instantiated here would be a weak symbol the linker
// could pick for the whole library (tools/check_isa_objects.py).
struct ABlock {
  uint16_t* data = nullptr;
  int64_t size = 0;
  uint16_t* reserve(int64_t n) {
    if (size < n) {
      std::free(data);
      data = static_cast<uint16_t*>(std::aligned_alloc(64, static_cast<size_t>(padded(n, 32)) * 2));
      if (data == nullptr) throw std::bad_alloc();
      size = n;
    }
    return data;
  }
  ~ABlock() { std::free(data); }
};
thread_local ABlock a_block;

// The tile loads and stores are asm statements that name no memory: this
// keeps the compiler from moving the buffers' stores after a load, or a
// read of a stored block before the store.
inline void memory_barrier() { asm volatile("" ::: "memory"); }

}  // namespace

bool available() {
  // Linux hands out the tiles' register state on request, once per process
  // (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); the caller
  // checked the CPU (cpu_amx_allowed).
  static const bool ok = [] {
    constexpr long kReqXcompPerm = 0x1023;
    constexpr long kXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0;
  }();
  return ok;
}

int64_t packed_b_pairs(int64_t k) { return padded(k, kDepth) / 2; }
int64_t packed_b_words(int64_t n, int64_t k) { return packed_b_pairs(k) * padded(n, kBlock); }

// The packed B is a sequence of tiles, each 16 pairs of k by 16 columns (1
// KiB, one tile load of consecutive bytes): for each 16 columns, every step
// of 32 in k in turn. Pair p, column j is word
//   ((j / 16 * steps + p / 16) * 16 + p % 16) * 16 + j % 16.
// Loads of rows a row of the matrix apart (n words) fell 4 KiB apart and
// came from one cache set.
void pack_b(const uint16_t* b, int64_t n, int64_t k, bool transpose_b, uint32_t* packed,
            int64_t first_pair, int64_t last_pair) {
  const int64_t n_pad = padded(n, kBlock), steps = padded(k, kDepth) / kDepth;
  const auto at = [&](int64_t row, int64_t j) -> uint32_t {
    return transpose_b ? b[j * k + row] : b[row * n + j];
  };
  for (int64_t p = first_pair; p < last_pair; ++p) {
    const int64_t k0 = 2 * p, k1 = 2 * p + 1;
    uint32_t* const base = packed + p * 16;  // its row in the first column block's tiles
    for (int64_t j0 = 0; j0 < n_pad; j0 += 16) {
      uint32_t* __restrict out = base + j0 / 16 * steps * 256;
      if (!transpose_b && k1 < k && j0 + 16 <= n) {  // the common case: two rows, 16 columns
        const uint16_t* __restrict lo = b + k0 * n + j0;
        const uint16_t* __restrict hi = b + k1 * n + j0;
        for (int64_t w = 0; w < 16; ++w) out[w] = uint32_t{lo[w]} | uint32_t{hi[w]} << 16;
        continue;
      }
      for (int64_t w = 0; w < 16; ++w) {
        const int64_t j = j0 + w;
        uint32_t word = 0;
        if (j < n && k0 < k) word = at(k0, j) | (k1 < k ? at(k1, j) << 16 : 0u);
        out[w] = word;
      }
    }
  }
}

namespace {

// Rows [first, last) of the result, their tiles of A packed into
// packed_a; the tiles are configured.
void rows_chunk(const uint16_t* a, const uint32_t* packed_b, float* c, int64_t m, int64_t n,
                int64_t k, bool transpose_a, int64_t first, int64_t last, uint16_t* packed_a) {
  const int64_t k_pad = padded(k, kDepth), n_pad = padded(n, kBlock), steps = k_pad / kDepth;
  // The range's rows of op(a) as tiles of 16 rows by 32 of k (1 KiB
  // each), blocks of 32 rows one after another: in a block, rows 0-15 for
  // every step, then rows 16-31. Row r of block q, element e of step s is
  //   q * 32 * k_pad + ((r / 16 * steps + s) * 16 + r % 16) * 32 + e % 32,
  // zero past row `last` and column k.
  const int64_t blocks = (last - first + kBlock - 1) / kBlock;
  for (int64_t q = 0; q < blocks; ++q) {
    for (int64_t r = 0; r < kBlock; ++r) {
      const int64_t row = first + q * kBlock + r;
      uint16_t* const dst = packed_a + q * kBlock * k_pad + (r / 16 * steps * 16 + r % 16) * kDepth;
      for (int64_t step = 0; step < steps; ++step) {
        uint16_t* __restrict out = dst + step * 16 * kDepth;
        const int64_t from = step * kDepth;
        const int64_t valid = row < last ? std::clamp<int64_t>(k - from, 0, kDepth) : 0;
        if (!transpose_a) {
          if (valid > 0) {
            std::memcpy(out, a + row * k + from, static_cast<size_t>(valid) * sizeof(uint16_t));
          }
        } else {
          for (int64_t e = 0; e < valid; ++e) out[e] = a[(from + e) * m + row];
        }
        for (int64_t e = valid; e < kDepth; ++e) out[e] = 0;
      }
    }
  }
  memory_barrier();
  alignas(64) float result[kBlock * kBlock];
  constexpr int64_t kTileStride = 64, kResultStride = kBlock * 4;
  // Columns outer: a block of B's columns (2 x 16 over all of k) stays in
  // the core's caches while every block of rows passes it.
  for (int64_t j0 = 0; j0 < n_pad; j0 += kBlock) {
    const uint32_t* b0 = packed_b + j0 / 16 * steps * 256;
    const uint32_t* b1 = b0 + steps * 256;
    for (int64_t q = 0; q < blocks; ++q) {
      const uint16_t* a0 = packed_a + q * kBlock * k_pad;
      const uint16_t* a1 = a0 + steps * 16 * kDepth;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t step = 0; step < steps; ++step) {
        _tile_loadd(4, a0 + step * 512, kTileStride);
        _tile_loadd(6, b0 + step * 256, kTileStride);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(7, b1 + step * 256, kTileStride);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, a1 + step * 512, kTileStride);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, result, kResultStride);
      _tile_stored(1, result + 16, kResultStride);
      _tile_stored(2, result + 16 * kBlock, kResultStride);
      _tile_stored(3, result + 16 * kBlock + 16, kResultStride);
      memory_barrier();
      const int64_t i0 = first + q * kBlock;
      const int64_t rows_here = std::min(kBlock, last - i0), cols_here = std::min(kBlock, n - j0);
      for (int64_t r = 0; r < rows_here; ++r) {
        std::memcpy(c + (i0 + r) * n + j0, result + r * kBlock,
                    static_cast<size_t>(cols_here) * sizeof(float));
      }
    }
  }
}

}  // namespace

void rows(const uint16_t* a, const uint32_t* packed_b, float* c, int64_t m, int64_t n, int64_t k,
          bool transpose_a, int64_t first, int64_t last) {
  const int64_t k_pad = padded(k, kDepth);
  // The range in chunks of rows whose tiles of A take about 1 MiB (32 to
  // 512 rows), so that a chunk stays in the core's cache while the blocks
  // of B's columns pass it.
  const int64_t chunk =
      std::clamp<int64_t>((int64_t{1} << 20) / (k_pad * 2) / kBlock * kBlock, kBlock, 16 * kBlock);
  uint16_t* const packed_a = a_block.reserve(chunk * k_pad);
  configure_tiles();
  for (int64_t begin = first; begin < last; begin += chunk) {
    const int64_t end = std::min(last, begin + chunk);
    rows_chunk(a, packed_b, c, m, n, k, transpose_a, begin, end, packed_a);
  }
  _tile_release();
}

}  // namespace varstate::kernels::cpu::matmul_amx
