// The training ops on a dynamic variable's rows (runtime/keyed_table.h),
// wherever the table is: the kernel of a KeyedTrainingStep as the function
// a table runs on its rows. Used by TrainingCall (training/training_call.cc)
// in the process holding the table, and by the parameter-server task
// holding a shard of a remote one (distributed/mpi_keyed_table.cc), so that
// both run the same kernel on the same rows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/keyed_table.h"

namespace varstate::internal {

// The kernel of `step` (which must outlive the function) on a table's rows:
// for KeyedTable::update_rows and update_rows_device_keys. The gradient
// rows of keys the table has not admitted are left out; the rest move to
// the arenas' device.
KeyedTable::RowsFn keyed_training_fn(const KeyedTrainingStep& step);

// Runs `step` on `table`'s rows of `keys` (update_rows: absent keys
// inserted first, every member of `members` updated in place; `all_rows`
// for the ops that decay every row).
void train_keyed_rows(KeyedTable& table, const std::vector<int>& members,
                      std::span<const int64_t> keys, bool all_rows, const KeyedTrainingStep& step);

}  // namespace varstate::internal
