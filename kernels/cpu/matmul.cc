// Instantiations of the CPU matmul for float, double and int32.
#include "kernels/cpu/matmul_internal.h"

namespace varstate::kernels::cpu {

template void matmul<float>(const float*, const float*, float*, int64_t, int64_t, int64_t, bool,
                            bool);
template void matmul<double>(const double*, const double*, double*, int64_t, int64_t, int64_t, bool,
                             bool);
template void matmul<int32_t>(const int32_t*, const int32_t*, int32_t*, int64_t, int64_t, int64_t,
                              bool, bool);

}  // namespace varstate::kernels::cpu
