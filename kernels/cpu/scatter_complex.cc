// CPU scatter instantiated for the complex storage types.
#include "kernels/cpu/scatter_internal.h"

namespace varstate::kernels::cpu {

VARSTATE_INSTANTIATE_CPU_SCATTER(kComplex64, ::varstate::complex64)
VARSTATE_INSTANTIATE_CPU_SCATTER(kComplex128, ::varstate::complex128)

}  // namespace varstate::kernels::cpu
