// Row lookups: tf.gather along axis 0, as an embedding lookup does.
//
//   Tensor rows = gather(embedding, ids);  // ids int32/int64, any shape
//   // rows.shape() == ids.shape() + embedding.shape()[1:]
//
// For a Tensor or a Variable the rows are gathered on the device that holds
// them (a GPU kernel on a GPU) and the result stays there. For a
// PartitionedVariable each part gathers its own rows on its own device and
// only those rows travel to the result's device (GatherOptions::device, or
// placement as for `as_tensor()`): nothing else of the table is copied.
//
// gather_gradients is the gradient of a gather from a partitioned table
// (TensorFlow's embedding_lookup gradient), ready for apply_gradients:
//
//   Tensor rows = gather(emb, ids);                  // forward
//   Tensor grads = ...;                              // d loss / d rows
//   opt.apply_gradients(gather_gradients(emb, ids, grads), &global_step);
//
// Every index must be in [0, rows): an index outside raises
// InvalidArgumentError naming its position and value, as TensorFlow's CPU
// kernel does (TensorFlow's GPU kernel returns zeros instead; varstate
// checks on every device). When a Tensor's or a Variable's rows and the
// indices are on the same GPU, a kernel checks the indices there and the
// gather waits only for that check's verdict (no copy of the indices);
// indices elsewhere are checked on the host.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "varstate/gradient.h"
#include "varstate/partitioned_variable.h"
#include "varstate/tensor.h"
#include "varstate/variable.h"

namespace varstate {

struct GatherOptions {
  // The op's name in error messages ("gather" when empty).
  std::string name;
  // PartitionedVariable only: the device of the result, e.g. "/cpu:0".
  std::optional<std::string> device;
};

Tensor gather(const Tensor& params, const Tensor& indices, const GatherOptions& options = {});
Tensor gather(const Variable& params, const Tensor& indices, const GatherOptions& options = {});
Tensor gather(const PartitionedVariable& params, const Tensor& indices,
              const GatherOptions& options = {});

// The gradient of gather(params, indices) given `grads`, the gradient of
// its result (shape indices.shape + params.shape[1:], params' dtype): one
// (IndexedSlices, part) pair per part, in part order, each holding the
// rows of `grads` whose indices fall in that part, with the indices
// re-based to the part's first row, the part's shape as dense_shape, on
// the part's device. Every part gets one, empty or not (as in TensorFlow,
// where Adam then decays the slots of a part the batch missed). The rows
// keep their order within a part, so duplicates apply as the optimizer
// applies them. Nothing is copied when one part holds every index and
// lives where grads do. Errors (nothing returned): InvalidArgumentError for
// a table not split along axis 0, grads of another shape, or an index
// outside [0, rows) (named by position and value); TypeError for grads of
// another dtype or indices not int32/int64.
std::vector<GradientAndVariable> gather_gradients(const PartitionedVariable& params,
                                                  const Tensor& indices, const Tensor& grads,
                                                  const GatherOptions& options = {});

}  // namespace varstate
