#include <algorithm>
#include <functional>
#include <utility>

#include "checkpoint/meta_graph_ops_internal.h"
#include "checkpoint/proto_convert_internal.h"
#include "checkpoint/saver_io_internal.h"
#include "kernels/scatter_ops.h"
#include "runtime/op_node.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/partitioned_variable.h"

namespace varstate {
namespace {

// "^x", "x:0" -> "x".
std::string node_of(const std::string& input) {
  std::string name = input;
  if (!name.empty() && name[0] == '^') name.erase(0, 1);
  if (auto colon = name.rfind(':'); colon != std::string::npos) name.erase(colon);
  return name;
}

// The output index of a data input ("x" and "x:0" -> 0).
int output_of(const std::string& input) {
  auto colon = input.rfind(':');
  if (colon == std::string::npos) return 0;
  try {
    return std::stoi(input.substr(colon + 1));
  } catch (const std::exception&) {
    return -1;
  }
}

bool is_control(const std::string& input) { return !input.empty() && input[0] == '^'; }

std::optional<Variable> graph_variable(const Graph& graph, const Variable& v) {
  std::optional<Variable> found = graph.find_variable(v.op_name());
  if (found && found->same_as(v)) return found;
  return std::nullopt;
}

// The dtype an UpdateValue's value will have, when it is known before a run.
std::optional<DType> value_dtype(const UpdateValue& value) {
  if (const Tensor* t = value.as_tensor()) return t->dtype();
  if (const Variable* v = value.as_variable()) return v->dtype();
  if (const Placeholder* p = value.as_placeholder()) return p->dtype();
  return std::nullopt;
}

// A meta graph is written with every save: constants of Ops stay small
// (as the variables' inline initial values do).
constexpr size_t kMaxConstBytes = size_t{64} << 20;

}  // namespace

// ---------------------------------------------------------------------------
// Writing

OpNodeWriter::OpNodeWriter(tf::GraphDef* graph_def, const Graph& graph)
    : g_(graph_def), graph_(graph) {
  for (const tf::NodeDef& n : g_->node()) used_.insert(n.name());
}

std::string OpNodeWriter::unique(const std::string& name) {
  std::string out = name;
  for (int i = 1; used_.count(out); ++i) out = name + "_" + std::to_string(i);
  used_.insert(out);
  return out;
}

tf::NodeDef* OpNodeWriter::node(const std::string& name, const std::string& op,
                                const std::vector<std::string>& inputs, const std::string& device) {
  return add_node(g_, name, op, inputs, device);
}

std::string OpNodeWriter::write_const(const std::string& name, const Tensor& value,
                                      const std::string& device) {
  const Tensor host = value.to_host();
  const std::string unique_name = unique(name);
  add_const(g_, unique_name, host, device);
  return unique_name;
}

std::string OpNodeWriter::write_int32s(const std::string& name, const std::vector<int64_t>& values,
                                       bool scalar) {
  std::vector<int32_t> v(values.begin(), values.end());
  Tensor t = scalar ? Tensor(v.at(0)) : Tensor::from_vector<int32_t>(v);
  return write_const(name, t, {});
}

bool OpNodeWriter::check_value(const std::string& op, const std::string& role,
                               const UpdateValue& value, DType want, std::string* why) {
  const std::string what = "the " + role + " of Op " + quoted(op);
  if (const Variable* v = value.as_variable(); v && !graph_variable(graph_, *v)) {
    *why = what + " is variable " + quoted(v->op_name()) +
           ", which is not a variable of the exported graph";
    return false;
  }
  if (const Placeholder* p = value.as_placeholder();
      p && used_.count(p->name()) && !placeholders_.count(p->name())) {
    *why = what + " is placeholder " + quoted(p->name()) +
           ", whose name another node of the graph has";
    return false;
  }
  std::optional<DType> dtype = value_dtype(value);
  if (!dtype) {
    *why = what + " is read through a function, which a graph cannot hold";
    return false;
  }
  if (role == "indices") {
    if (*dtype != DType::kInt32 && *dtype != DType::kInt64) {
      *why = what + " have dtype " + std::string(dtype_name(*dtype)) +
             " (TensorFlow's Tindices is int32 or int64)";
      return false;
    }
    return true;
  }
  if (const Tensor* t = value.as_tensor(); t && t->nbytes() > kMaxConstBytes) {
    *why = what + " is a constant of " + std::to_string(t->nbytes()) + " bytes, more than the " +
           std::to_string(kMaxConstBytes >> 20) +
           " MiB a meta graph holds per constant (feed it through a placeholder)";
    return false;
  }
  if (*dtype == want) return true;
  if (const Tensor* t = value.as_tensor()) {
    try {
      convert_to_dtype(*t, want, op);  // a literal of another type converts when it fits
      return true;
    } catch (const Error& e) {
      *why = what + ": " + e.what();
      return false;
    }
  }
  *why = what + " has dtype " + std::string(dtype_name(*dtype)) + ", the variable " +
         std::string(dtype_name(want));
  return false;
}

std::string OpNodeWriter::write_value(const std::string& base, const std::string& role,
                                      const UpdateValue& value, DType want,
                                      const std::string& device) {
  if (const Variable* v = value.as_variable()) return v->op_name() + "/read";
  if (const Placeholder* p = value.as_placeholder()) {
    if (placeholders_.insert(p->name()).second) {
      used_.insert(p->name());
      tf::NodeDef* ph = node(p->name(), "Placeholder", {}, {});
      attr(ph, "dtype").set_type(static_cast<tf::DataType>(p->dtype()));
      tf::TensorShapeProto* shape = attr(ph, "shape").mutable_shape();
      if (p->shape().unknown_rank()) {
        shape->set_unknown_rank(true);
      } else {
        for (int64_t d : p->shape().dims()) shape->add_dim()->set_size(d);
      }
    }
    return p->name();
  }
  const Tensor& t = *value.as_tensor();
  return write_const(base + "/" + role, role == "indices" ? t : convert_to_dtype(t, want, base),
                     device);
}

std::optional<std::string> OpNodeWriter::add(const Op& op, std::string* why) {
  const internal::OpGraphForm* form = internal::graph_form(op);
  if (form == nullptr) {
    *why = "Op " + quoted(op.name()) +
           " was not built by an update function (varstate/state_ops.h) or Op::group";
    return std::nullopt;
  }
  if (auto it = written_.find(form); it != written_.end()) return it->second;
  std::optional<std::string> name;
  if (form->type == "NoOp") {
    name = write_group(op, *form, why);
  } else if (form->partitioned) {
    name = write_partitioned(op, *form, why);
  } else {
    name = write_update(op, *form, why);
  }
  if (name) written_.emplace(form, *name);
  return name;
}

std::optional<std::string> OpNodeWriter::write_group(const Op& op,
                                                     const internal::OpGraphForm& form,
                                                     std::string* why) {
  std::vector<std::string> members;
  for (const Op& member : form.control_inputs) {
    std::optional<std::string> name = add(member, why);
    if (!name) return std::nullopt;
    members.push_back("^" + *name);
  }
  const std::string name = unique(op.name());
  node(name, "NoOp", members, {});
  return name;
}

TensorShape OpNodeWriter::value_shape(const UpdateValue& value) {
  if (const Tensor* t = value.as_tensor()) return t->shape();
  if (const Variable* v = value.as_variable()) return v->shape();
  if (const Placeholder* p = value.as_placeholder()) return p->shape();
  return TensorShape::unknown();
}

// The update node of `ref`: input 0 the variable's node, then the values.
// TensorFlow's dense updates take a value of the variable's shape: a scalar
// goes through BroadcastTo, which varstate reads back as the scalar itself.
void OpNodeWriter::write_update_node(const std::string& name, const std::string& type,
                                     const Variable& ref, std::vector<std::string> inputs,
                                     const internal::OpGraphForm& form,
                                     std::optional<DType> index_dtype) {
  inputs.insert(inputs.begin(), ref.op_name());
  tf::NodeDef* n = node(name, type, inputs, ref.placement());
  attr(n, "T").set_type(static_cast<tf::DataType>(ref.dtype()));
  if (index_dtype) attr(n, "Tindices").set_type(static_cast<tf::DataType>(*index_dtype));
  if (form.limit) {
    attr(n, "limit").set_i(*form.limit);
  } else {
    attr(n, "use_locking").set_b(form.use_locking);
  }
  if (type == "Assign") attr(n, "validate_shape").set_b(form.validate_shape.value_or(true));
  attr(n, "_class").mutable_list()->add_s("loc:@" + ref.op_name());
}

std::optional<std::string> OpNodeWriter::write_update(const Op& op,
                                                      const internal::OpGraphForm& form,
                                                      std::string* why) {
  const Variable& ref = *form.ref;
  if (!graph_variable(graph_, ref)) {
    *why = "Op " + quoted(op.name()) + " updates variable " + quoted(ref.op_name()) +
           ", which is not a variable of the exported graph";
    return std::nullopt;
  }
  std::optional<DType> index_dtype;
  for (const auto& [role, value] : form.inputs) {
    if (!check_value(op.name(), role, value, ref.dtype(), why)) return std::nullopt;
    if (role == "indices") index_dtype = value_dtype(value);
  }
  const std::string name = unique(op.name());
  std::vector<std::string> inputs;
  for (const auto& [role, value] : form.inputs) {
    std::string in = write_value(name, role, value, ref.dtype(), ref.placement());
    const TensorShape shape = value_shape(value);
    if (!form.limit && !index_dtype && shape.is_scalar() && !ref.shape().is_scalar() &&
        ref.shape().is_fully_defined()) {
      tf::NodeDef* b =
          node(unique(name + "/broadcast"), "BroadcastTo",
               {in, write_int32s(name + "/shape", ref.shape().dims(), false)}, ref.placement());
      attr(b, "T").set_type(static_cast<tf::DataType>(ref.dtype()));
      attr(b, "Tidx").set_type(tf::DT_INT32);
      in = b->name();
    }
    inputs.push_back(std::move(in));
  }
  write_update_node(name, form.type, ref, std::move(inputs), form, index_dtype);
  return name;
}

// A PartitionedVariable's update as the nodes TensorFlow runs: a dense
// value is broadcast to the full shape and split along the axis (SplitV);
// scatter indices are routed to their part (the part is the number of part
// offsets <= the index) and re-based, indices and update rows split with
// DynamicPartition; then one update per part and a NoOp over them. The
// NoOp's attributes _varstate_partitioned (the variable's name) and
// _varstate_inputs (the value nodes) let import_meta_graph rebuild the one
// PartitionedVariable Op, which validates every index before any part
// changes.
std::optional<std::string> OpNodeWriter::write_partitioned(const Op& op,
                                                           const internal::OpGraphForm& form,
                                                           std::string* why) {
  const PartitionedVariable& p = *form.partitioned;
  if (!check_partitioned(op, form, why)) return std::nullopt;
  const std::string name = unique(op.name());
  std::vector<std::string> values;
  for (const auto& [role, value] : form.inputs) {
    values.push_back(write_value(name, role, value, p.dtype(), {}));
  }
  const bool sparse = form.inputs.size() == 2;
  const std::vector<std::string> part_nodes =
      sparse ? write_sparse_parts(name, form, values) : write_dense_parts(name, form, values[0]);
  std::vector<std::string> controls;
  for (const std::string& part_name : part_nodes) controls.push_back("^" + part_name);
  tf::NodeDef* group = node(name, "NoOp", controls, {});
  attr(group, "_varstate_partitioned").set_s(p.name());
  for (const std::string& v : values) attr(group, "_varstate_inputs").mutable_list()->add_s(v);
  return name;
}

bool OpNodeWriter::check_partitioned(const Op& op, const internal::OpGraphForm& form,
                                     std::string* why) {
  const PartitionedVariable& p = *form.partitioned;
  for (const Variable& part : p.variables()) {
    if (!graph_variable(graph_, part)) {
      *why = "Op " + quoted(op.name()) + " updates part " + quoted(part.op_name()) +
             ", which is not a variable of the exported graph";
      return false;
    }
  }
  const bool sparse = form.inputs.size() == 2;
  if (sparse && p.axis() != 0 && p.size() > 1) {
    *why = "Op " + quoted(op.name()) + " scatters into a variable partitioned along axis " +
           std::to_string(p.axis());
    return false;
  }
  for (const auto& [role, value] : form.inputs) {
    if (!check_value(op.name(), role, value, p.dtype(), why)) return false;
  }
  return true;
}

namespace {

// Output k of node `node_name`.
std::string output(const std::string& node_name, int k) {
  return k == 0 ? node_name : node_name + ":" + std::to_string(k);
}

}  // namespace

std::vector<std::string> OpNodeWriter::write_dense_parts(const std::string& name,
                                                         const internal::OpGraphForm& form,
                                                         const std::string& value) {
  const PartitionedVariable& p = *form.partitioned;
  const auto T = static_cast<tf::DataType>(p.dtype());
  const int n = static_cast<int>(p.size());
  tf::NodeDef* b = node(unique(name + "/broadcast"), "BroadcastTo",
                        {value, write_int32s(name + "/shape", p.shape().dims(), false)}, {});
  attr(b, "T").set_type(T);
  attr(b, "Tidx").set_type(tf::DT_INT32);
  std::vector<int64_t> sizes;
  for (const Variable& part : p.variables()) sizes.push_back(part.shape().dim(p.axis()));
  tf::NodeDef* split = node(unique(name + "/split"), "SplitV",
                            {b->name(), write_int32s(name + "/size_splits", sizes, false),
                             write_int32s(name + "/axis", {p.axis()}, true)},
                            {});
  attr(split, "T").set_type(T);
  attr(split, "Tlen").set_type(tf::DT_INT32);
  attr(split, "num_split").set_i(n);
  std::vector<std::string> part_nodes;
  for (int k = 0; k < n; ++k) {
    const std::string part_name = unique(name + "/part_" + std::to_string(k));
    write_update_node(part_name, form.type, p[static_cast<size_t>(k)], {output(split->name(), k)},
                      form, std::nullopt);
    part_nodes.push_back(part_name);
  }
  return part_nodes;
}

std::string OpNodeWriter::write_reshape(const std::string& name, const std::string& what,
                                        const std::string& in, tf::DataType dtype,
                                        const std::vector<int64_t>& shape) {
  tf::NodeDef* r = node(unique(name + "/" + what), "Reshape",
                        {in, write_int32s(name + "/" + what + "_shape", shape, false)}, {});
  attr(r, "T").set_type(dtype);
  attr(r, "Tshape").set_type(tf::DT_INT32);
  return r->name();
}

OpNodeWriter::PartRouting OpNodeWriter::write_part_routing(const std::string& name,
                                                           const PartitionedVariable& p,
                                                           const std::string& indices,
                                                           DType index_dtype) {
  const auto TI = static_cast<tf::DataType>(index_dtype);
  auto typed = [&](std::vector<int64_t> v) {
    if (index_dtype == DType::kInt64) return Tensor::from_vector<int64_t>(v);
    return Tensor::from_vector<int32_t>(std::vector<int32_t>(v.begin(), v.end()));
  };
  const std::string flat = write_reshape(name, "flat_indices", indices, TI, {-1});
  const std::string column = write_reshape(name, "column_indices", flat, TI, {-1, 1});
  const std::vector<int64_t>& offsets = p.offsets();
  tf::NodeDef* above = node(
      unique(name + "/above"), "GreaterEqual",
      {column, write_const(name + "/boundaries",
                           typed(std::vector<int64_t>(offsets.begin() + 1, offsets.end())), {})},
      {});
  attr(above, "T").set_type(TI);
  tf::NodeDef* cast = node(unique(name + "/above_count"), "Cast", {above->name()}, {});
  attr(cast, "SrcT").set_type(tf::DT_BOOL);
  attr(cast, "DstT").set_type(tf::DT_INT32);
  attr(cast, "Truncate").set_b(false);
  tf::NodeDef* part = node(unique(name + "/part"), "Sum",
                           {cast->name(), write_int32s(name + "/sum_axis", {1}, true)}, {});
  attr(part, "T").set_type(tf::DT_INT32);
  attr(part, "Tidx").set_type(tf::DT_INT32);
  attr(part, "keep_dims").set_b(false);
  tf::NodeDef* base = node(unique(name + "/part_offset"), "GatherV2",
                           {write_const(name + "/offsets", typed(offsets), {}), part->name(),
                            write_int32s(name + "/gather_axis", {0}, true)},
                           {});
  attr(base, "Tparams").set_type(TI);
  attr(base, "Tindices").set_type(tf::DT_INT32);
  attr(base, "Taxis").set_type(tf::DT_INT32);
  attr(base, "batch_dims").set_i(0);
  tf::NodeDef* local = node(unique(name + "/local_indices"), "Sub", {flat, base->name()}, {});
  attr(local, "T").set_type(TI);
  return {part->name(), local->name()};
}

std::vector<std::string> OpNodeWriter::write_sparse_parts(const std::string& name,
                                                          const internal::OpGraphForm& form,
                                                          const std::vector<std::string>& values) {
  const PartitionedVariable& p = *form.partitioned;
  const auto T = static_cast<tf::DataType>(p.dtype());
  const int n = static_cast<int>(p.size());
  const DType index_dtype = *value_dtype(form.inputs[0].second);
  const PartRouting routing = write_part_routing(name, p, values[0], index_dtype);
  auto partition = [&](const std::string& what, const std::string& data, tf::DataType dtype) {
    tf::NodeDef* d = node(unique(name + "/" + what), "DynamicPartition", {data, routing.part}, {});
    attr(d, "T").set_type(dtype);
    attr(d, "num_partitions").set_i(n);
    return d->name();
  };
  const std::string index_parts =
      partition("index_parts", routing.local_indices, static_cast<tf::DataType>(index_dtype));
  std::optional<std::string> update_parts;
  if (!value_shape(form.inputs[1].second).is_scalar()) {
    std::vector<int64_t> rows{-1};
    for (int d = 1; d < p.shape().rank(); ++d) rows.push_back(p.shape().dim(d));
    update_parts =
        partition("update_parts", write_reshape(name, "flat_updates", values[1], T, rows), T);
  }
  std::vector<std::string> part_nodes;
  for (int k = 0; k < n; ++k) {
    const std::string part_name = unique(name + "/part_" + std::to_string(k));
    write_update_node(part_name, form.type, p[static_cast<size_t>(k)],
                      {output(index_parts, k), update_parts ? output(*update_parts, k) : values[1]},
                      form, index_dtype);
    part_nodes.push_back(part_name);
  }
  return part_nodes;
}

// ---------------------------------------------------------------------------
// Reading

namespace {

enum class Role {
  kEffect,
  kPassThrough,
  kInert
};

// Node types whose only job is to pass their inputs' effects on, and those
// without effect or inputs that matter.
Role role_of(const std::string& op) {
  static const std::set<std::string> pass = {"NoOp", "Identity", "ReadVariableOp", "Snapshot"};
  static const std::set<std::string> inert = {"Const",       "Placeholder", "VariableV2",
                                              "VarHandleOp", "Variable",    "VarIsInitializedOp"};
  if (pass.count(op)) return Role::kPassThrough;
  if (inert.count(op)) return Role::kInert;
  return Role::kEffect;
}

using Build = std::function<Op(Variable, const std::vector<UpdateValue>&, const UpdateOptions&,
                               const tf::NodeDef&)>;

struct UpdateKind {
  int values;  // data inputs after the variable
  Build build;
};

template <Op (*F)(Variable, UpdateValue, const UpdateOptions&)>
UpdateKind dense() {
  return {1, [](Variable v, const std::vector<UpdateValue>& x, const UpdateOptions& o,
                const tf::NodeDef&) { return F(std::move(v), x[0], o); }};
}

template <Op (*F)(Variable, UpdateValue, UpdateValue, const UpdateOptions&)>
UpdateKind sparse() {
  return {2, [](Variable v, const std::vector<UpdateValue>& x, const UpdateOptions& o,
                const tf::NodeDef&) { return F(std::move(v), x[0], x[1], o); }};
}

UpdateKind counting() {
  return {0, [](Variable v, const std::vector<UpdateValue>&, const UpdateOptions&,
                const tf::NodeDef& n) {
            auto it = n.attr().find("limit");
            return count_up_to_op(std::move(v), it == n.attr().end() ? 0 : it->second.i());
          }};
}

// The update node types, ref and resource forms (the scatter family's from
// VARSTATE_SCATTER_OPS: "ScatterAdd" and "ResourceScatterAdd").
std::map<std::string, UpdateKind> make_update_kinds() {
  std::map<std::string, UpdateKind> kinds = {
      {"Assign", dense<assign_op>()},
      {"AssignVariableOp", dense<assign_op>()},
      {"AssignAdd", dense<assign_add_op>()},
      {"AssignAddVariableOp", dense<assign_add_op>()},
      {"AssignSub", dense<assign_sub_op>()},
      {"AssignSubVariableOp", dense<assign_sub_op>()},
      {"CountUpTo", counting()},
      {"ResourceCountUpTo", counting()},
  };
#define VARSTATE_SCATTER_NODE(kind, fn, node, arithmetic, ordered) \
  kinds.emplace(node, sparse<fn##_op>());                          \
  kinds.emplace("Resource" node, sparse<fn##_op>());
  VARSTATE_SCATTER_OPS(VARSTATE_SCATTER_NODE)
#undef VARSTATE_SCATTER_NODE
  return kinds;
}

const std::map<std::string, UpdateKind>& update_kinds() {
  static const std::map<std::string, UpdateKind> kinds = make_update_kinds();
  return kinds;
}

}  // namespace

OpNodeReader::OpNodeReader(const tf::GraphDef& graph_def, Graph& graph) : graph_(graph) {
  for (const tf::NodeDef& n : graph_def.node()) nodes_.emplace(n.name(), &n);
}

std::optional<Op> OpNodeReader::build(const std::string& node, std::string* why) {
  if (!nodes_.count(node)) {
    why->clear();  // a plain name, not a node that cannot run
    return std::nullopt;
  }
  std::vector<Op> ops;
  std::set<std::string> done, visiting;
  if (!effects(node, ops, done, visiting, why)) return std::nullopt;
  if (ops.size() == 1 && ops[0].name() == node) return ops[0];
  return Op::group(std::move(ops), node);
}

bool OpNodeReader::effects(const std::string& name, std::vector<Op>& out,
                           std::set<std::string>& done, std::set<std::string>& visiting,
                           std::string* why) {
  if (done.count(name)) return true;
  if (!visiting.insert(name).second) {
    *why = "node " + quoted(name) + " depends on itself";
    return false;
  }
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    *why = "the graph has no node " + quoted(name);
    return false;
  }
  const tf::NodeDef& n = *it->second;
  // The node's own update, built once per reader.
  auto add_own = [&](const tf::NodeDef& node) {
    auto built = updates_.find(name);
    if (built == updates_.end()) {
      std::optional<Op> op = node.attr().count("_varstate_partitioned")
                                 ? partitioned_update(node, why)
                                 : update(node, why);
      if (!op) return false;
      built = updates_.emplace(name, *op).first;
    }
    out.push_back(built->second);
    return true;
  };
  // A PartitionedVariable update is one effect: its per-part nodes do not run apart.
  const bool partitioned = n.attr().count("_varstate_partitioned") > 0;
  for (const std::string& in : n.input()) {
    if (!partitioned && is_control(in) && !effects(node_of(in), out, done, visiting, why)) {
      return false;
    }
  }
  const Role role = partitioned ? Role::kEffect : role_of(n.op());
  if (role == Role::kPassThrough) {
    for (const std::string& in : n.input()) {
      if (!is_control(in) && !effects(node_of(in), out, done, visiting, why)) return false;
    }
  } else if (role == Role::kEffect && !add_own(n)) {
    return false;
  }
  visiting.erase(name);
  done.insert(name);
  return true;
}

std::optional<Op> OpNodeReader::update(const tf::NodeDef& n, std::string* why) {
  auto kind = update_kinds().find(n.op());
  if (kind == update_kinds().end()) {
    *why = "node " + quoted(n.name()) + " has op type " + quoted(n.op()) +
           ", which varstate does not run";
    return std::nullopt;
  }
  std::vector<std::string> data;
  for (const std::string& in : n.input()) {
    if (!is_control(in)) data.push_back(in);
  }
  if (static_cast<int>(data.size()) != 1 + kind->second.values) {
    *why = "node " + quoted(n.name()) + " (" + n.op() + ") has " + std::to_string(data.size()) +
           " data inputs, expected " + std::to_string(1 + kind->second.values);
    return std::nullopt;
  }
  std::optional<Variable> ref = graph_.find_variable(node_of(data[0]));
  if (!ref) {
    *why = "node " + quoted(n.name()) + " updates " + quoted(node_of(data[0])) +
           ", which is not a variable of the graph";
    return std::nullopt;
  }
  std::vector<UpdateValue> values;
  for (size_t i = 1; i < data.size(); ++i) {
    std::optional<UpdateValue> v = value(data[i], why);
    if (!v) return std::nullopt;
    values.push_back(std::move(*v));
  }
  UpdateOptions options;
  if (auto a = n.attr().find("use_locking"); a != n.attr().end())
    options.use_locking = a->second.b();
  if (auto a = n.attr().find("validate_shape"); a != n.attr().end()) {
    options.validate_shape = a->second.b();
  }
  return internal::renamed(kind->second.build(*ref, values, options, n), n.name());
}

std::optional<PartitionedVariable> OpNodeReader::partitioned_variable(const std::string& name,
                                                                      std::string* why) {
  std::vector<Variable> parts;
  for (const Variable& v : graph_.variables()) {
    const auto& slice = v.save_slice_info();
    if (slice && slice->full_name == name) parts.push_back(v);
  }
  if (parts.empty()) {
    *why = "the graph has no parts of partitioned variable " + quoted(name);
    return std::nullopt;
  }
  std::sort(parts.begin(), parts.end(), [](const Variable& a, const Variable& b) {
    return a.save_slice_info()->var_offset < b.save_slice_info()->var_offset;
  });
  const SaveSliceInfo& first = *parts.front().save_slice_info();
  std::vector<int64_t> partitions(first.full_shape.size(), 1);
  for (size_t d = 0; d < partitions.size(); ++d) {
    for (const Variable& v : parts) {
      if (v.save_slice_info()->var_offset[d] != 0)
        partitions[d] = static_cast<int64_t>(parts.size());
    }
  }
  try {
    return PartitionedVariable(name, TensorShape(first.full_shape), parts.front().dtype(), parts,
                               partitions);
  } catch (const Error& e) {
    *why = "the parts of " + quoted(name) + " do not form a partitioned variable: " + e.what();
    return std::nullopt;
  }
}

std::optional<Op> OpNodeReader::partitioned_update(const tf::NodeDef& n, std::string* why) {
  std::optional<PartitionedVariable> p =
      partitioned_variable(n.attr().at("_varstate_partitioned").s(), why);
  if (!p) return std::nullopt;
  const tf::NodeDef* part = nullptr;
  for (const std::string& in : n.input()) {
    auto it = nodes_.find(node_of(in));
    if (is_control(in) && it != nodes_.end()) {
      part = it->second;
      break;
    }
  }
  std::vector<UpdateValue> values;
  if (auto a = n.attr().find("_varstate_inputs"); a != n.attr().end()) {
    for (const std::string& in : a->second.list().s()) {
      std::optional<UpdateValue> v = value(in, why);
      if (!v) return std::nullopt;
      values.push_back(std::move(*v));
    }
  }
  UpdateOptions options;
  if (part) {
    if (auto a = part->attr().find("use_locking"); a != part->attr().end()) {
      options.use_locking = a->second.b();
    }
  }
  const std::string type = part ? part->op() : "";
  using Dense = Op (*)(PartitionedVariable, UpdateValue, const UpdateOptions&);
  using Sparse = Op (*)(PartitionedVariable, UpdateValue, UpdateValue, const UpdateOptions&);
  static const std::map<std::string, Dense> dense = {
      {"Assign", assign_op}, {"AssignAdd", assign_add_op}, {"AssignSub", assign_sub_op}};
  static const std::map<std::string, Sparse> sparse = {{"ScatterUpdate", scatter_update_op},
                                                       {"ScatterAdd", scatter_add_op},
                                                       {"ScatterSub", scatter_sub_op}};
  if (auto d = dense.find(type); d != dense.end() && values.size() == 1) {
    return internal::renamed(d->second(*p, values[0], options), n.name());
  }
  if (auto s = sparse.find(type); s != sparse.end() && values.size() == 2) {
    return internal::renamed(s->second(*p, values[0], values[1], options), n.name());
  }
  *why = "node " + quoted(n.name()) + " updates partitioned variable " + quoted(p->name()) +
         " with " + quoted(type) + " and " + std::to_string(values.size()) +
         " values, which varstate does not run";
  return std::nullopt;
}

std::optional<UpdateValue> OpNodeReader::value(const std::string& input, std::string* why,
                                               int depth) {
  const std::string name = node_of(input);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    *why = "the graph has no node " + quoted(name);
    return std::nullopt;
  }
  const tf::NodeDef& n = *it->second;
  if (output_of(input) != 0 || depth > 32) {
    *why = "input " + quoted(input) + " is not the first output of a value node";
    return std::nullopt;
  }
  for (const std::string& in : n.input()) {
    if (is_control(in)) {
      *why = "value node " + quoted(name) + " has control inputs, which varstate does not run";
      return std::nullopt;
    }
  }
  if (std::optional<Variable> v = graph_.find_variable(name)) return UpdateValue(*v);
  auto dtype_attr = [&]() -> std::optional<DType> {
    auto a = n.attr().find("dtype");
    if (a == n.attr().end() || !dtype_is_valid(a->second.type())) return std::nullopt;
    return static_cast<DType>(a->second.type());
  };
  if (n.op() == "Const") {
    auto a = n.attr().find("value");
    std::optional<DType> dtype = dtype_attr();
    if (!dtype || a == n.attr().end() || !a->second.has_tensor()) {
      *why = "Const node " + quoted(name) + " has no dtype or value";
      return std::nullopt;
    }
    const tf::TensorProto& proto = a->second.tensor();
    try {
      const std::vector<int64_t> dims =
          shape_from_proto(proto.tensor_shape(), "Const node " + quoted(name));
      TensorData data;
      data.dtype = *dtype;
      data.shape = dims;
      values_from_proto(proto, static_cast<size_t>(TensorShape(dims).num_elements()), data,
                        "Const node " + quoted(name), /*repeat_last=*/true);
      return UpdateValue(
          tensor_from_data(data, TensorShape(dims), DeviceManager::instance().cpu()));
    } catch (const Error& e) {
      *why = e.what();
      return std::nullopt;
    }
  }
  if (n.op() == "Placeholder") {
    std::optional<DType> dtype = dtype_attr();
    if (!dtype) {
      *why = "Placeholder node " + quoted(name) + " has no dtype";
      return std::nullopt;
    }
    TensorShape shape = TensorShape::unknown();
    if (auto a = n.attr().find("shape");
        a != n.attr().end() && a->second.has_shape() && !a->second.shape().unknown_rank()) {
      std::vector<int64_t> dims;
      for (const auto& d : a->second.shape().dim()) dims.push_back(d.size() < 0 ? -1 : d.size());
      shape = TensorShape(std::move(dims));
    }
    if (std::optional<Placeholder> p = find_placeholder(name, &graph_); p && p->dtype() == *dtype) {
      return UpdateValue(*p);
    }
    if (graph_.name_scope().empty()) graph_.unique_name(name);  // marks the name as used
    return UpdateValue(internal::placeholder_named(name, *dtype, std::move(shape), graph_));
  }
  // BroadcastTo stands for a scalar the update broadcasts itself.
  if ((role_of(n.op()) == Role::kPassThrough && n.op() != "NoOp" && n.input_size() >= 1) ||
      (n.op() == "BroadcastTo" && n.input_size() == 2)) {
    return value(n.input(0), why, depth + 1);
  }
  *why = "value node " + quoted(name) + " has op type " + quoted(n.op()) +
         ", which varstate does not evaluate";
  return std::nullopt;
}

}  // namespace varstate
