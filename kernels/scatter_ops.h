// The scatter family as one table: the host-side facts of each ScatterOp
// (kernels/common.h) that the library's sites expand, so that a new op is
// one line here instead of an edit in every list. Kernel code needs none of
// this (it dispatches on the enum alone), so the table lives apart from
// common.h, which every CUDA translation unit includes.
#pragma once

#include "kernels/common.h"

namespace varstate::kernels {

// X(kind, function, TensorFlow node type, arithmetic, ordered), one row
// per ScatterOp enumerator:
//   function    the public function and method name (varstate/scatter.h)
//   node        the graph node type of its op form; the resource variant
//               prefixes "Resource" ("ScatterAdd", "ResourceScatterAdd")
//   arithmetic  needs a numeric dtype (kUpdate moves any non-string value)
//   ordered     needs an ordered dtype (no complex)
// Expanded by: runtime/scatter.cc (the public functions),
// runtime/variable.cc (the methods), runtime/partitioned_variable.cc,
// runtime/state_ops.cc (the op forms), checkpoint/meta_graph_ops.cc (the
// node types read back) and scatter_op_info below (names in messages, the
// dtype rules). The combine of each op is kernels/elementwise_functors.h's
// scatter_combine; recipes in docs/architecture.md.
#define VARSTATE_SCATTER_OPS(X)                             \
  X(kUpdate, scatter_update, "ScatterUpdate", false, false) \
  X(kAdd, scatter_add, "ScatterAdd", true, false)           \
  X(kSub, scatter_sub, "ScatterSub", true, false)           \
  X(kMul, scatter_mul, "ScatterMul", true, false)           \
  X(kDiv, scatter_div, "ScatterDiv", true, false)           \
  X(kMin, scatter_min, "ScatterMin", true, true)            \
  X(kMax, scatter_max, "ScatterMax", true, true)

// One op's row of the table.
struct ScatterOpInfo {
  const char* function;  // "scatter_add"
  const char* node;      // "ScatterAdd"
  bool arithmetic;
  bool ordered;
};

// A ScatterOp without a row in the table fails the build here: the switch
// has no default, and a missing case is an error, not a warning.
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
constexpr ScatterOpInfo scatter_op_info(ScatterOp op) {
  switch (op) {
#define VARSTATE_SCATTER_INFO(kind, fn, node, arithmetic, ordered) \
  case ScatterOp::kind:                                            \
    return {#fn, node, arithmetic, ordered};
    VARSTATE_SCATTER_OPS(VARSTATE_SCATTER_INFO)
#undef VARSTATE_SCATTER_INFO
  }
  return {"scatter", "Scatter", false, false};  // not a ScatterOp
}
#pragma GCC diagnostic pop

}  // namespace varstate::kernels
