// Instantiations of the CPU matmul for half, bfloat16 and complex types.
#include "kernels/cpu/matmul_internal.h"

namespace varstate::kernels::cpu {

template void matmul<half>(const half*, const half*, half*, int64_t, int64_t, int64_t, bool, bool);
template void matmul<bfloat16>(const bfloat16*, const bfloat16*, bfloat16*, int64_t, int64_t,
                               int64_t, bool, bool);
template void matmul<complex64>(const complex64*, const complex64*, complex64*, int64_t, int64_t,
                                int64_t, bool, bool);
template void matmul<complex128>(const complex128*, const complex128*, complex128*, int64_t,
                                 int64_t, int64_t, bool, bool);

}  // namespace varstate::kernels::cpu
