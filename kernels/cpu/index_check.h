// The bounds check of every CPU scatter and gather: the first index outside
// [0, rows).
#pragma once

#include <cstdint>

namespace varstate::kernels::cpu {

// The first position in [0, n) whose index is not in [0, rows), or -1.
// With AVX2 (chosen at run time) 8 int32 or 4 int64 indices a compare, over
// blocks of 256 whose verdict is one test; else a scalar loop. About 0.1
// ns an index against 0.55 for the loop (65,536 indices, x86-64 baseline
// build, 2-vCPU EPYC VM).
int64_t first_bad_index(const int32_t* indices, int64_t n, int64_t rows);
int64_t first_bad_index(const int64_t* indices, int64_t n, int64_t rows);

// The scalar loop alone (what CPUs without AVX2 run), for tests.
int64_t first_bad_index_portable(const int32_t* indices, int64_t n, int64_t rows);
int64_t first_bad_index_portable(const int64_t* indices, int64_t n, int64_t rows);

}  // namespace varstate::kernels::cpu
