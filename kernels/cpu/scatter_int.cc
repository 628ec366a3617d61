// CPU scatter instantiated for the integer storage types.
#include "kernels/cpu/scatter_internal.h"

namespace varstate::kernels::cpu {

VARSTATE_INSTANTIATE_CPU_SCATTER(kInt8, int8_t)
VARSTATE_INSTANTIATE_CPU_SCATTER(kInt16, int16_t)
VARSTATE_INSTANTIATE_CPU_SCATTER(kInt32, int32_t)
VARSTATE_INSTANTIATE_CPU_SCATTER(kInt64, int64_t)
VARSTATE_INSTANTIATE_CPU_SCATTER(kUInt8, uint8_t)
VARSTATE_INSTANTIATE_CPU_SCATTER(kUInt16, uint16_t)
VARSTATE_INSTANTIATE_CPU_SCATTER(kUInt32, uint32_t)
VARSTATE_INSTANTIATE_CPU_SCATTER(kUInt64, uint64_t)

}  // namespace varstate::kernels::cpu
