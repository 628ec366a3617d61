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
// Every index must be in [0, rows): an index outside raises
// InvalidArgumentError naming its position and value, as TensorFlow's CPU
// kernel does (TensorFlow's GPU kernel returns zeros instead; varstate
// checks on every device). Indices on a GPU are read back to the host
// for that check.
#pragma once

#include <optional>
#include <string>

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

}  // namespace varstate
