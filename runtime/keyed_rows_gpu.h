// The GPU kernels a hash-keyed table (runtime/keyed_table.h) runs on its
// arenas by slot. Runtime-internal; compiled in every build, called only
// for tables on a GPU.
#pragma once

#include "runtime/keyed_table.h"
#include "varstate/tensor.h"

namespace varstate::internal {

// The rows `slots` (int64 [n] on arena's device) of `arena` (a GPU tensor
// of rank >= 1), in order; a negative slot reads `fill` (a GPU tensor of
// one row) or, with `fill` invalid, is left unwritten for the caller.
Tensor gather_slots(const Tensor& arena, const Tensor& slots, const Tensor& fill = Tensor());

// Writes `init`'s initial rows of `keys` at `slots` (int64 [n] each, on
// arena's device; the slots distinct): the constant, or the seeded random
// row of each key, bit for bit the CPU's (DeviceKeyedTable::initial_rows).
void write_initial_rows(Tensor& arena, const KeyedRowInit& init, const Tensor& keys,
                        const Tensor& slots);
// The same into row i of `rows` (a lookup's output, [n] + row shape on the
// GPU) for each i whose slot (int64 [n] on that GPU, as the key index
// found it) is negative; rows of present keys are left as they are.
void write_initial_rows_where_absent(Tensor& rows, const KeyedRowInit& init, const Tensor& keys,
                                     const Tensor& slots);

}  // namespace varstate::internal
