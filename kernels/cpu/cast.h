// CPU dtype conversion between numeric storage types and bool.
#pragma once

#include <cstdint>

namespace varstate::kernels::cpu {

// out[i] = convert<To>(in[i]) for i in [0, n), with tf.cast's rules.
template <typename From, typename To>
void cast(const From* in, To* out, int64_t n);

}  // namespace varstate::kernels::cpu
