#include <map>
#include <optional>

#include "checkpoint/meta_graph_initializers_internal.h"
#include "checkpoint/meta_graph_ops_internal.h"
#include "checkpoint/proto_convert_internal.h"
#include "checkpoint/saver_io_internal.h"
#include "runtime/initializer_recipe.h"
#include "runtime/variable_access.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/placement.h"

namespace varstate::internal {
namespace {

class NodeWriter {
 public:
  NodeWriter(tf::GraphDef* g, const Variable& v) : g_(g), v_(v) {}

  std::string node(const std::string& name, const std::string& op,
                   std::vector<std::string> inputs = {}, DType t = DType::kInvalid) {
    last_ = add_node(g_, name, op, std::move(inputs), v_.placement());
    if (t != DType::kInvalid) attr(last_, "T").set_type(static_cast<tf::DataType>(t));
    return name;
  }
  std::string constant(const std::string& name, const Tensor& host) {
    last_ = add_const(g_, name, host, v_.placement());
    return name;
  }
  std::string dims(const std::string& name, const std::vector<int64_t>& d, DType dtype) {
    if (dtype == DType::kInt32) {
      return constant(name, Tensor::from_vector<int32_t>(std::vector<int32_t>(d.begin(), d.end())));
    }
    return constant(name, Tensor::from_vector<int64_t>(d));
  }
  tf::NodeDef* last() { return last_; }

 private:
  tf::GraphDef* g_;
  const Variable& v_;
  tf::NodeDef* last_ = nullptr;
};

size_t value_bytes(const Tensor& t) {
  if (t.dtype() != DType::kString) return t.nbytes();
  size_t bytes = 0;
  for (const std::string& s : t.to_vector<std::string>()) bytes += s.size();
  return bytes;
}

// The random op (full shape), a Slice to the part, then the scale and shift
// TensorFlow's random_ops build: rnd * (max - min) + min, rnd * stddev + mean.
void add_random(NodeWriter& w, const std::string& op, BoundInitializer& bound) {
  const InitializerRecipe& r = bound.recipe();
  const DType dtype = bound.dtype();
  const auto& p = bound.partition_info();
  const TensorShape full = p ? p->full_shape : bound.shape();
  const RandomOpForm form = random_op_form(r, full, dtype);
  const SeedPair seeds = bound.seeds();
  const std::string scope = op + "/Initializer/";
  const std::string shape = w.dims(scope + "shape", full.dims(), DType::kInt32);
  const bool is_int = std::string(form.op_type) == "RandomUniformInt";
  std::string rnd;
  if (is_int) {
    rnd = w.node(scope + form.op_type, form.op_type,
                 {shape, w.constant(scope + "min", form.a), w.constant(scope + "max", form.b)});
    attr(w.last(), "Tout").set_type(static_cast<tf::DataType>(dtype));
  } else {
    rnd = w.node(scope + form.op_type, form.op_type, {shape});
    attr(w.last(), "dtype").set_type(static_cast<tf::DataType>(dtype));
  }
  attr(w.last(), "T").set_type(tf::DT_INT32);
  attr(w.last(), "seed").set_i(seeds.seed);
  attr(w.last(), "seed2").set_i(seeds.seed2);
  if (p) {
    rnd = w.node(scope + "Slice", "Slice",
                 {rnd, w.dims(scope + "begin", p->var_offset, DType::kInt64),
                  w.dims(scope + "size", bound.shape().dims(), DType::kInt64)},
                 dtype);
    attr(w.last(), "Index").set_type(tf::DT_INT64);
  }
  if (is_int) {
    w.node(op + "/initial_value", "Identity", {rnd}, dtype);
    return;
  }
  std::string scale;
  if (form.distribution == RandomDistribution::kUniform) {
    scale = w.node(scope + "sub", "Sub", {w.constant(scope + "max", form.b), scope + "min"}, dtype);
    w.constant(scope + "min", form.a);
  } else {
    scale = w.constant(scope + "stddev", form.b);
  }
  const std::string shift = form.distribution == RandomDistribution::kUniform
                                ? scope + "min"
                                : w.constant(scope + "mean", form.a);
  const std::string mul = w.node(scope + "mul", "Mul", {rnd, scale}, dtype);
  w.node(op + "/initial_value", "Add", {mul, shift}, dtype);
}

// A host value of at most the inline limit, or nullopt.
std::optional<Tensor> small_value(const std::function<Tensor()>& compute, const TensorShape& shape,
                                  DType dtype) {
  if (dtype != DType::kString && shape.is_fully_defined() &&
      static_cast<size_t>(shape.num_elements()) * dtype_size(dtype) > kMaxInlineInitialValueBytes) {
    return std::nullopt;
  }
  Tensor host;
  {
    DeviceScope scope("/device:CPU:0");
    host = compute().to_host();
  }
  if (value_bytes(host) > kMaxInlineInitialValueBytes) return std::nullopt;
  return host;
}

}  // namespace

bool add_initial_value_nodes(tf::GraphDef* g, const Variable& v) {
  NodeWriter w(g, v);
  const std::string name = v.op_name() + "/initial_value";
  if (std::optional<Tensor> t = initial_tensor(v)) {
    if (value_bytes(*t) > kMaxInlineInitialValueBytes) return false;
    w.constant(name, convert_to_dtype(*t, v.dtype(), name).to_host());
    return true;
  }
  InitialValueFn fn = initial_value_fn(v);
  if (!fn) return false;
  std::shared_ptr<BoundInitializer> bound = bound_initializer(fn);
  if (!bound) {
    std::optional<Tensor> host =
        small_value([&] { return v.initial_value(); }, v.shape(), v.dtype());
    if (!host) return false;
    w.constant(name, *host);
    return true;
  }
  const InitializerRecipe& r = bound->recipe();
  const DType dtype = bound->dtype();
  if (is_random(r.kind)) {
    add_random(w, v.op_name(), *bound);
    return true;
  }
  const TensorShape& shape = bound->shape();
  const PartitionInfo* p = bound->partition_info() ? &*bound->partition_info() : nullptr;
  if (r.kind == InitializerKind::kZeros || r.kind == InitializerKind::kOnes ||
      (r.kind == InitializerKind::kConstant && r.value.num_elements() <= 1)) {
    Tensor scalar = r.kind == InitializerKind::kOnes ? Tensor(1).cast(dtype)
                    : r.kind == InitializerKind::kConstant && r.value.num_elements() == 1
                        ? run_recipe(r, TensorShape{}, dtype, nullptr, {}, 0).to_host()
                        : Tensor::zeros(dtype, TensorShape{}, DeviceManager::instance().cpu());
    const std::string scope = v.op_name() + "/Initializer/";
    w.node(name, "Fill",
           {w.dims(scope + "shape", shape.dims(), DType::kInt32),
            w.constant(scope + "value", scalar.reshaped(TensorShape{}))},
           dtype);
    attr(w.last(), "index_type").set_type(tf::DT_INT32);
    return true;
  }
  std::optional<Tensor> host =
      small_value([&] { return run_recipe(r, shape, dtype, p, {}, 0); }, shape, dtype);
  if (!host) return false;
  w.constant(name, *host);
  return true;
}

// ---------------------------------------------------------------------------
// Import

namespace {

class NodeReader {
 public:
  explicit NodeReader(const NodeIndex& nodes) : nodes_(nodes) {}
  const tf::NodeDef* find(std::string name) const {
    if (!name.empty() && name[0] == '^') return nullptr;
    if (auto c = name.rfind(':'); c != std::string::npos && name.substr(c + 1) != "0") {
      return nullptr;
    }
    if (auto c = name.rfind(':'); c != std::string::npos) name.erase(c);
    auto it = nodes_.find(name);
    return it == nodes_.end() ? nullptr : it->second;
  }
  const tf::NodeDef* input(const tf::NodeDef* n, int i) const {
    return n && n->input_size() > i ? find(n->input(i)) : nullptr;
  }
  // A Const node's value on the host.
  std::optional<Tensor> constant(const tf::NodeDef* n) const {
    if (!n || n->op() != "Const") return std::nullopt;
    auto dt = n->attr().find("dtype");
    auto value = n->attr().find("value");
    if (dt == n->attr().end() || value == n->attr().end() || !value->second.has_tensor() ||
        !dtype_is_valid(dt->second.type())) {
      return std::nullopt;
    }
    const tf::TensorProto& proto = value->second.tensor();
    const std::string what = "Const node " + quoted(n->name());
    const std::vector<int64_t> dims = shape_from_proto(proto.tensor_shape(), what);
    TensorData data;
    data.dtype = static_cast<DType>(dt->second.type());
    data.shape = dims;
    values_from_proto(proto, static_cast<size_t>(TensorShape(dims).num_elements()), data, what,
                      /*repeat_last=*/true);
    return tensor_from_data(data, TensorShape(dims), DeviceManager::instance().cpu());
  }
  std::optional<std::vector<int64_t>> dims(const tf::NodeDef* n) const {
    std::optional<Tensor> t = constant(n);
    if (!t || !dtype_is_integer(t->dtype())) return std::nullopt;
    return t->cast(DType::kInt64).to_vector<int64_t>();
  }
  static int64_t int_attr(const tf::NodeDef* n, const char* key) {
    auto it = n->attr().find(key);
    return it == n->attr().end() ? 0 : it->second.i();
  }

 private:
  const NodeIndex& nodes_;
};

// The random recipe of Add(Mul(R, scale), shift) / RandomUniformInt, R a
// random op of the full shape or a Slice of one; nullopt when the nodes are
// another form.
std::optional<InitialValueFn> random_from_nodes(const NodeReader& r, const tf::NodeDef* n,
                                                DType dtype) {
  const tf::NodeDef* rnd = n;
  Tensor a, b;
  if (n->op() == "Add" || n->op() == "AddV2") {
    const tf::NodeDef* mul = r.input(n, 0);
    std::optional<Tensor> shift = r.constant(r.input(n, 1));
    if (!mul || mul->op() != "Mul" || !shift) return std::nullopt;
    rnd = r.input(mul, 0);
    const tf::NodeDef* scale = r.input(mul, 1);
    if (scale && scale->op() == "Sub") {
      std::optional<Tensor> hi = r.constant(r.input(scale, 0));
      std::optional<Tensor> lo = r.constant(r.input(scale, 1));
      if (!hi || !lo) return std::nullopt;
      a = *lo;
      b = *hi;
    } else if (std::optional<Tensor> s = r.constant(scale)) {
      a = *shift;
      b = *s;
    } else {
      return std::nullopt;
    }
  }
  if (!rnd) return std::nullopt;
  std::optional<PartitionInfo> partition;
  std::optional<std::vector<int64_t>> part_shape;
  if (rnd->op() == "Slice") {
    std::optional<std::vector<int64_t>> begin = r.dims(r.input(rnd, 1));
    part_shape = r.dims(r.input(rnd, 2));
    if (!begin || !part_shape) return std::nullopt;
    partition = PartitionInfo{TensorShape{}, *begin};
    rnd = r.input(rnd, 0);
  }
  if (!rnd) return std::nullopt;
  InitializerRecipe recipe;
  recipe.dtype = dtype;
  if (rnd->op() == "RandomUniform") {
    recipe.kind = InitializerKind::kRandomUniform;
  } else if (rnd->op() == "RandomStandardNormal") {
    recipe.kind = InitializerKind::kRandomNormal;
  } else if (rnd->op() == "TruncatedNormal") {
    recipe.kind = InitializerKind::kTruncatedNormal;
  } else if (rnd->op() == "RandomUniformInt") {
    recipe.kind = InitializerKind::kRandomUniform;
    std::optional<Tensor> lo = r.constant(r.input(rnd, 1));
    std::optional<Tensor> hi = r.constant(r.input(rnd, 2));
    if (!lo || !hi) return std::nullopt;
    a = *lo;
    b = *hi;
  } else {
    return std::nullopt;
  }
  if (!a.valid() || !b.valid()) return std::nullopt;  // a bare float random op
  std::optional<std::vector<int64_t>> full = r.dims(r.input(rnd, 0));
  if (!full) return std::nullopt;
  recipe.a = a;
  recipe.b = b;
  const int64_t seed = NodeReader::int_attr(rnd, "seed");
  const int64_t seed2 = NodeReader::int_attr(rnd, "seed2");
  if (seed != 0 || seed2 != 0) recipe.seeds = SeedPair{seed, seed2};
  TensorShape shape(*full);
  if (partition) {
    partition->full_shape = shape;
    shape = TensorShape(*part_shape);
  }
  return varstate::bind(
      make_initializer(std::make_shared<const InitializerRecipe>(std::move(recipe))), shape, dtype,
      partition);
}

}  // namespace

NodeIndex index_nodes(const tf::GraphDef& g) {
  NodeIndex nodes;
  nodes.reserve(static_cast<size_t>(g.node_size()));
  for (const tf::NodeDef& n : g.node()) nodes.emplace(n.name(), &n);  // the first of a name
  return nodes;
}

bool import_initial_value(const NodeIndex& nodes, const std::string& node, Variable& v) {
  NodeReader r(nodes);
  const tf::NodeDef* n = r.find(node);
  while (n && n->op() == "Identity") n = r.input(n, 0);
  if (!n) return false;
  const DType dtype = v.dtype();
  std::optional<InitialValueFn> fn;
  if (std::optional<Tensor> t = r.constant(n)) {
    Tensor value = *t;
    fn = [value] { return value; };
  } else if (n->op() == "Fill") {
    std::optional<std::vector<int64_t>> dims = r.dims(r.input(n, 0));
    std::optional<Tensor> scalar = r.constant(r.input(n, 1));
    if (!dims || !scalar) return false;
    fn = varstate::bind(constant_initializer(*scalar, dtype), TensorShape(*dims), dtype);
  } else {
    fn = random_from_nodes(r, n, dtype);
  }
  if (!fn) return false;
  set_initial_value_fn(v, std::move(*fn));
  return true;
}

}  // namespace varstate::internal
