#include "varstate/runtime/state_ops.h"

#include <utility>

namespace varstate {

UpdateValue::UpdateValue(Tensor t) : fn_([t = std::move(t)] { return t; }) {}
UpdateValue::UpdateValue(Variable v) : fn_([v = std::move(v)] { return v.value(); }) {}
UpdateValue::UpdateValue(std::function<Tensor()> fn) : fn_(std::move(fn)) {}

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

}  // namespace

Op assign_op(Variable ref, UpdateValue value, const UpdateOptions& options) {
  std::string name = ref.op_name() + "/Assign";
  return Op(std::move(name), "Assign",
            [ref, value = std::move(value), stored = StoredOptions(options)]() mutable {
              assign(ref, value.get(), stored.get());
            });
}

Op assign_add_op(Variable ref, UpdateValue delta, const UpdateOptions& options) {
  std::string name = ref.op_name() + "/AssignAdd";
  return Op(std::move(name), "AssignAdd",
            [ref, delta = std::move(delta), stored = StoredOptions(options)]() mutable {
              assign_add(ref, delta.get(), stored.get());
            });
}

Op assign_sub_op(Variable ref, UpdateValue delta, const UpdateOptions& options) {
  std::string name = ref.op_name() + "/AssignSub";
  return Op(std::move(name), "AssignSub",
            [ref, delta = std::move(delta), stored = StoredOptions(options)]() mutable {
              assign_sub(ref, delta.get(), stored.get());
            });
}

Op count_up_to_op(Variable ref, int64_t limit) {
  std::string name = ref.op_name() + "/CountUpTo";
  return Op(std::move(name), "CountUpTo", [ref, limit]() mutable { count_up_to(ref, limit); });
}

#define VARSTATE_SCATTER_OP(FN, TYPE)                                                    \
  Op FN##_op(Variable ref, UpdateValue indices, UpdateValue updates,                     \
             const UpdateOptions& options) {                                             \
    std::string name = ref.op_name() + "/" TYPE;                                         \
    return Op(std::move(name), TYPE,                                                     \
              [ref, indices = std::move(indices), updates = std::move(updates), options, \
               label = std::string(options.name)]() mutable {                            \
                UpdateOptions o = options;                                               \
                o.name = label;                                                          \
                FN(ref, indices.get(), updates.get(), o);                                \
              });                                                                        \
  }
VARSTATE_SCATTER_OP(scatter_update, "ScatterUpdate")
VARSTATE_SCATTER_OP(scatter_add, "ScatterAdd")
VARSTATE_SCATTER_OP(scatter_sub, "ScatterSub")
VARSTATE_SCATTER_OP(scatter_mul, "ScatterMul")
VARSTATE_SCATTER_OP(scatter_div, "ScatterDiv")
VARSTATE_SCATTER_OP(scatter_min, "ScatterMin")
VARSTATE_SCATTER_OP(scatter_max, "ScatterMax")
#undef VARSTATE_SCATTER_OP

Op assign_op(PartitionedVariable ref, UpdateValue value, const UpdateOptions& options) {
  std::string name = ref.name() + "/Assign";
  return Op(std::move(name), "Assign",
            [ref, value = std::move(value), stored = StoredOptions(options)]() mutable {
              ref.assign(value.get(), stored.get());
            });
}

Op assign_add_op(PartitionedVariable ref, UpdateValue delta, const UpdateOptions& options) {
  std::string name = ref.name() + "/AssignAdd";
  return Op(std::move(name), "AssignAdd",
            [ref, delta = std::move(delta), stored = StoredOptions(options)]() mutable {
              ref.assign_add(delta.get(), stored.get());
            });
}

Op assign_sub_op(PartitionedVariable ref, UpdateValue delta, const UpdateOptions& options) {
  std::string name = ref.name() + "/AssignSub";
  return Op(std::move(name), "AssignSub",
            [ref, delta = std::move(delta), stored = StoredOptions(options)]() mutable {
              ref.assign_sub(delta.get(), stored.get());
            });
}

#define VARSTATE_PARTITIONED_SCATTER_OP(FN, TYPE)                                        \
  Op FN##_op(PartitionedVariable ref, UpdateValue indices, UpdateValue updates,          \
             const UpdateOptions& options) {                                             \
    std::string name = ref.name() + "/" TYPE;                                            \
    return Op(std::move(name), TYPE,                                                     \
              [ref, indices = std::move(indices), updates = std::move(updates), options, \
               label = std::string(options.name)]() mutable {                            \
                UpdateOptions o = options;                                               \
                o.name = label;                                                          \
                ref.FN(indices.get(), updates.get(), o);                                 \
              });                                                                        \
  }
VARSTATE_PARTITIONED_SCATTER_OP(scatter_update, "ScatterUpdate")
VARSTATE_PARTITIONED_SCATTER_OP(scatter_add, "ScatterAdd")
VARSTATE_PARTITIONED_SCATTER_OP(scatter_sub, "ScatterSub")
#undef VARSTATE_PARTITIONED_SCATTER_OP

}  // namespace varstate
