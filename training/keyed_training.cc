#include "training/keyed_training.h"

#include "runtime/row_gather.h"
#include "training/training_ops_internal.h"

namespace varstate::internal {

KeyedTable::RowsFn keyed_training_fn(const KeyedTrainingStep& step) {
  return
      [&step](std::vector<Tensor>& arenas, const Tensor& slots, const std::vector<int64_t>* kept) {
        const TrainingKernel kernel{step.op, step.hyper, step.deterministic, step.who};
        const Tensor rows = kept ? gather_rows(step.values, *kept) : step.values;
        kernel.run(arenas, rows.on(arenas.front().device()), &slots);
      };
}

void train_keyed_rows(KeyedTable& table, const std::vector<int>& members,
                      std::span<const int64_t> keys, bool all_rows, const KeyedTrainingStep& step) {
  table.update_rows(members, keys, all_rows, keyed_training_fn(step));
}

}  // namespace varstate::internal
