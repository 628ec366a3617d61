#include "varstate/state_ops.h"

#include <algorithm>
#include <array>
#include <type_traits>
#include <utility>

#include "kernels/scatter_ops.h"
#include "runtime/op_node.h"
#include "runtime/update_options_internal.h"

namespace varstate {

using internal::UpdateCaller;
using kernels::DenseUpdateOp;
using kernels::ScatterOp;

UpdateValue::UpdateValue(Tensor t) : source_(std::move(t)) {}
UpdateValue::UpdateValue(Variable v) : source_(std::move(v)) {}
UpdateValue::UpdateValue(Placeholder p) : source_(std::move(p)) {}
UpdateValue::UpdateValue(std::function<Tensor()> fn) : source_(std::move(fn)) {}

Tensor UpdateValue::get() const {
  if (const Tensor* t = as_tensor()) return *t;
  if (const Variable* v = as_variable()) return v->value();
  if (const Placeholder* p = as_placeholder()) return internal::fed_value(*p);
  return std::get<std::function<Tensor()>>(source_)();
}

namespace {

// The Op keeps the options past the call: it owns the name's characters.
struct StoredOptions {
  explicit StoredOptions(const UpdateOptions& options) : options(options), name(options.name) {}
  UpdateOptions get() const {
    UpdateOptions o = options;
    o.name = name;
    return o;
  }
  UpdateOptions options;
  std::string name;
};

using Inputs = std::vector<std::pair<std::string, UpdateValue>>;

std::vector<Placeholder> placeholders_of(const Inputs& inputs) {
  std::vector<Placeholder> out;
  for (const auto& [role, value] : inputs) {
    if (const Placeholder* p = value.as_placeholder())
      out = internal::merge_placeholders(out, {*p});
  }
  return out;
}

const std::string& name_of(const Variable& v) { return v.op_name(); }
const std::string& name_of(const PartitionedVariable& v) { return v.name(); }

// An Op named "<ref>/<type>" whose run reads `inputs` (in order) and passes
// their values to `apply`; its graph form is the TensorFlow node `type` (for
// a PartitionedVariable: one per part).
template <size_t N, typename Ref, typename Apply>
Op update_op(Ref ref, const char* type, Inputs inputs, const UpdateOptions& options, bool locking,
             Apply apply) {
  auto form = std::make_shared<internal::OpGraphForm>();
  form->type = type;
  if constexpr (std::is_same_v<Ref, Variable>) {
    form->ref = ref;
    if (form->type == "Assign") form->validate_shape = options.validate_shape;
  } else {
    form->partitioned = ref;
  }
  form->inputs = inputs;
  form->use_locking = locking;
  std::vector<Placeholder> placeholders = placeholders_of(inputs);
  // A value fed through a placeholder of partial shape has no static shape:
  // TensorFlow's kernel finds a mismatch at run time (InvalidArgumentError),
  // where a static one fails the graph builder (ValueError).
  const bool runtime_shape =
      std::any_of(placeholders.begin(), placeholders.end(),
                  [](const Placeholder& p) { return !p.shape().is_fully_defined(); });
  return internal::make_op(
      name_of(ref) + "/" + type, type,
      [ref, inputs = std::move(inputs), stored = StoredOptions(options), apply,
       runtime_shape]() mutable {
        std::array<Tensor, N> values;
        for (size_t i = 0; i < N; ++i) values[i] = inputs[i].second.get();
        try {
          apply(ref, values, stored.get());
        } catch (const ValueError& e) {
          if (!runtime_shape) throw;
          throw InvalidArgumentError(e.what());
        }
      },
      std::move(form), std::move(placeholders));
}

}  // namespace

Op assign_op(Variable ref, UpdateValue value, const UpdateOptions& options) {
  return update_op<1>(
      ref, "Assign", {{"value", std::move(value)}}, options,
      internal::use_locking(options, DenseUpdateOp::kAssign, UpdateCaller::kFunction),
      [](Variable& v, const auto& x, const UpdateOptions& o) { assign(v, x[0], o); });
}

Op assign_add_op(Variable ref, UpdateValue delta, const UpdateOptions& options) {
  return update_op<1>(
      ref, "AssignAdd", {{"delta", std::move(delta)}}, options,
      internal::use_locking(options, DenseUpdateOp::kAdd, UpdateCaller::kFunction),
      [](Variable& v, const auto& x, const UpdateOptions& o) { assign_add(v, x[0], o); });
}

Op assign_sub_op(Variable ref, UpdateValue delta, const UpdateOptions& options) {
  return update_op<1>(
      ref, "AssignSub", {{"delta", std::move(delta)}}, options,
      internal::use_locking(options, DenseUpdateOp::kSub, UpdateCaller::kFunction),
      [](Variable& v, const auto& x, const UpdateOptions& o) { assign_sub(v, x[0], o); });
}

Op count_up_to_op(Variable ref, int64_t limit) {
  auto form = std::make_shared<internal::OpGraphForm>();
  form->type = "CountUpTo";
  form->ref = ref;
  form->limit = limit;
  return internal::make_op(ref.op_name() + "/CountUpTo", "CountUpTo",
                           [ref, limit]() mutable { count_up_to(ref, limit); }, std::move(form),
                           {});
}

#define VARSTATE_SCATTER_OP(KIND, FN, TYPE, ARITHMETIC, ORDERED)                                \
  Op FN##_op(Variable ref, UpdateValue indices, UpdateValue updates,                            \
             const UpdateOptions& options) {                                                    \
    return update_op<2>(                                                                        \
        ref, TYPE, {{"indices", std::move(indices)}, {"updates", std::move(updates)}}, options, \
        internal::use_locking(options, ScatterOp::KIND, UpdateCaller::kFunction),               \
        [](Variable& v, const auto& x, const UpdateOptions& o) { FN(v, x[0], x[1], o); });      \
  }
VARSTATE_SCATTER_OPS(VARSTATE_SCATTER_OP)
#undef VARSTATE_SCATTER_OP

Op assign_op(PartitionedVariable ref, UpdateValue value, const UpdateOptions& options) {
  return update_op<1>(
      ref, "Assign", {{"value", std::move(value)}}, options,
      internal::use_locking(options, DenseUpdateOp::kAssign, UpdateCaller::kPartitioned),
      [](PartitionedVariable& v, const auto& x, const UpdateOptions& o) { v.assign(x[0], o); });
}

Op assign_add_op(PartitionedVariable ref, UpdateValue delta, const UpdateOptions& options) {
  return update_op<1>(
      ref, "AssignAdd", {{"delta", std::move(delta)}}, options,
      internal::use_locking(options, DenseUpdateOp::kAdd, UpdateCaller::kPartitioned),
      [](PartitionedVariable& v, const auto& x, const UpdateOptions& o) { v.assign_add(x[0], o); });
}

Op assign_sub_op(PartitionedVariable ref, UpdateValue delta, const UpdateOptions& options) {
  return update_op<1>(
      ref, "AssignSub", {{"delta", std::move(delta)}}, options,
      internal::use_locking(options, DenseUpdateOp::kSub, UpdateCaller::kPartitioned),
      [](PartitionedVariable& v, const auto& x, const UpdateOptions& o) { v.assign_sub(x[0], o); });
}

#define VARSTATE_PARTITIONED_SCATTER_OP(KIND, FN, TYPE, ARITHMETIC, ORDERED)                    \
  Op FN##_op(PartitionedVariable ref, UpdateValue indices, UpdateValue updates,                 \
             const UpdateOptions& options) {                                                    \
    return update_op<2>(                                                                        \
        ref, TYPE, {{"indices", std::move(indices)}, {"updates", std::move(updates)}}, options, \
        internal::use_locking(options, ScatterOp::KIND, UpdateCaller::kPartitioned),            \
        [](PartitionedVariable& v, const auto& x, const UpdateOptions& o) {                     \
          v.FN(x[0], x[1], o);                                                                  \
        });                                                                                     \
  }
VARSTATE_SCATTER_OPS(VARSTATE_PARTITIONED_SCATTER_OP)
#undef VARSTATE_PARTITIONED_SCATTER_OP

}  // namespace varstate
