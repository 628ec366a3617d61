// varstate's side of the TensorFlow interop suite (test/interop/): writes
// and reads checkpoints, generates random values and runs ops described in
// the text form of tensor_text.h, so that Python tests can compare them with
// what TensorFlow writes, reads and computes.
//
//   interop_tool save VARS PREFIX [sharded] [v1]
//       one variable per line of VARS (KEY DTYPE DIMS DATA [DEVICE [SLICE]]);
//       DEVICE "-" or a device string (a separate shard when sharded);
//       SLICE "-" or "FULL_DIMS;OFFSET": the line is a partition of the
//       variable KEY of shape FULL_DIMS at OFFSET. Saves with a Saver.
//   interop_tool save_chain VARS PREFIX OUT
//       saves the variables of VARS incrementally: a base PREFIX-0, then a
//       delta PREFIX-1 after row 1 := row 0 and a delta PREFIX-2 after
//       row n-1 := row 0 in every non-string variable of 2+ rows; compacts
//       PREFIX-2 into the full checkpoint OUT.
//   interop_tool dump CHECKPOINT OUT      every tensor of a V1/V2 checkpoint
//   interop_tool dynamic_save PREFIX OUT
//       a dynamic variable "emb" (dim 3) trained with Adagrad, written to
//       and erased from, and a dense "dense", saved at PREFIX (meta graph
//       included); OUT: keys, values, slot (emb's rows and accumulator in
//       key order) and dense
//   interop_tool dynamic_chain PREFIX COMPACT OUT
//       a dynamic variable "emb" (dim 3, Adagrad) of 400 keys saved
//       incrementally at PREFIX-1, then, after a few keys were trained,
//       erased and inserted, a per-key delta at PREFIX-2, compacted into the
//       full checkpoint COMPACT; OUT: keys, values, slot, written (the
//       delta's keys) and erased
//   interop_tool dynamic_restore CHECKPOINT DIM OUT
//       restores a dynamic variable "emb" of DIM from CHECKPOINT's
//       emb-keys / emb-values; OUT: its keys and values
//   interop_tool restore CHECKPOINT VARS OUT
//       creates the variables of VARS (DATA ignored) and restores them with a
//       Saver; writes each variable's value (partitions keyed KEY@OFFSET)
//   interop_tool random SPEC OUT
//       lines "ID OP DTYPE DIMS GRAPH_SEED OP_SEED A B" (OP uniform, normal,
//       truncated; A/B minval/maxval or mean/stddev; "-" for unset), each in
//       a fresh graph, except when ID starts with "+" (the previous graph)
//   interop_tool init SPEC OUT
//       lines "ID NAME DTYPE DIMS GRAPH_SEED OP_SEED CALLS [ARGS...]": one
//       initializer object called CALLS times in one fresh graph; outputs
//       ID#0, ID#1, ...
//   interop_tool locking OUT
//       for assign, assign_add, ..., scatter_max called with default
//       arguments: "OP 1" when the call waits for the variable's
//       update_mutex (use_locking), "OP 0" when it does not
//   interop_tool slice SPEC OUT
//       lines "ID DIMS SPEC" (SPEC like "::-2,1" with "b:e:s", an index,
//       "..." or "new" (tf.newaxis) per entry): strided_slice of iota(DIMS)
//       as int64, or "ID error CLASS"
//   interop_tool slice_assign SPEC OUT
//       lines as for slice: a variable "v" holding iota(DIMS) as int64 gets
//       -(1 + iota(slice shape)) assigned to v[SPEC]; writes v's value, or
//       "ID error CLASS"
//   interop_tool collection SPEC OUT
//       lines "ID FUNC KEY SCOPE" (FUNC get_collection, global_variables,
//       trainable_variables, local_variables, model_variables or
//       moving_average_variables; KEY and SCOPE as hex, "-" for none) over
//       the graph of cmd_collection; writes ID with a string tensor of the
//       items' names ("str:VALUE", "int:VALUE" for unnamed items), or
//       "ID error CLASS"
//   interop_tool errors OUT DIR
//       "CASE ErrorClass" for each documented error case (checkpoints in DIR)
//   interop_tool sharing OUT
//       "CASE\tOUTCOME" for each variable-sharing case of test_sharing.py
//       (sharing_cases.cc)
//   interop_tool export_meta INIT_VARS SAVED_VARS PREFIX [sharded] [v1] [deferred]
//       variables with the initial values of INIT_VARS (DEVICE/SLICE fields
//       as for save; with "deferred" also "deferred_w", [4,3] float32 from
//       glorot_uniform_initializer(seed=3)), assigned SAVED_VARS' values,
//       saved with their meta graph to PREFIX
//   interop_tool export_init_meta PREFIX OUT
//       variables made by get_variable from each kind of initializer (a
//       partitioned one too), initialized (values to OUT, key: op name) and
//       saved with their meta graph to PREFIX
//   interop_tool import_meta META CHECKPOINT OUT
//       imports a meta graph, restores CHECKPOINT with the returned saver and
//       writes every global variable's value (key: op name) to OUT and the
//       trainable variables' op names, one a line, to OUT.trainable
//   interop_tool export_train PREFIX
//       a model with a train_op over placeholders "ids" (int64 [?]), "rows"
//       (float32 [?,2]) and "lr" (float32 []) in collection "train_op",
//       saved with its meta graph to PREFIX (see cmd_export_train)
//   interop_tool run_train META CHECKPOINT FEEDS OUT
//       imports META, restores CHECKPOINT, then for each step s of FEEDS
//       (lines keyed "s/placeholder") runs every Op of collection "train_op"
//       with that step's feeds; writes every global variable's value to OUT
//   interop_tool partition SPEC OUT
//       lines "ID DTYPE DIMS KIND ARGS..." with KIND and ARGS one of
//         fixed NUM_SHARDS AXIS
//         axis_size MAX_SHARD_BYTES AXIS BYTES_PER_STRING MAX_SHARDS|-
//         min_max MAX_PARTITIONS AXIS MIN_SLICE_SIZE BYTES_PER_STRING
//       (DTYPE a TF enum number); writes "ID P0,P1,... SHAPES": the
//       partitioner's result and, for numeric dtypes, the part shapes of
//       get_variable with that partitioner ("D0xD1;D0xD1;..."), or "ID error
//       CLASS"
//   interop_tool math SPEC OUT
//       pairs of lines X (with extra field OP) and Y; OP div, floordiv,
//       floormod, add, sub, mul; outputs the result or the error class
//
// Exit status 0 on success; on an exception, its class and message on
// stderr and status 1.
//
// Adding a comparison (e.g. partitioners: shard counts over a grid of
// shapes, dtypes and arguments): a command here that reads a spec file and
// writes its results as tensor_text lines, dispatched in main(), and a
// test_*.py computing the same with TensorFlow through conftest's tool(),
// encode() and read_tensors().
#include <algorithm>
#include <any>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "optimizer_cases.h"
#include "placement_cases.h"
#include "runtime/variable_access.h"
#include "sharing_cases.h"
#include "tensor_text.h"
#include "varstate/checkpoint_chain.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/device_manager.h"
#include "varstate/dynamic_variable.h"
#include "varstate/error.h"
#include "varstate/gather.h"
#include "varstate/graph.h"
#include "varstate/initializers.h"
#include "varstate/math_ops.h"
#include "varstate/meta_graph.h"
#include "varstate/optimizers.h"
#include "varstate/partitioned_variable.h"
#include "varstate/partitioners.h"
#include "varstate/placeholder.h"
#include "varstate/placement.h"
#include "varstate/random_ops.h"
#include "varstate/saver.h"
#include "varstate/scatter.h"
#include "varstate/session.h"
#include "varstate/slice.h"
#include "varstate/state_ops.h"
#include "varstate/variable.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

namespace varstate::interop {
namespace {

std::vector<int64_t> parse_dims(const std::string& s) {
  std::vector<int64_t> dims;
  if (s == "-" || s.empty()) return dims;
  for (const std::string& d : split(s, ',')) dims.push_back(std::stoll(d));
  return dims;
}

std::string dims_key(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s;
}

std::optional<int64_t> parse_opt_int(const std::string& s) {
  if (s == "-") return std::nullopt;
  return std::stoll(s);
}

// A literal parameter in `dtype`'s arithmetic (integers exact).
Tensor parse_param(const std::string& s, DType dtype) {
  if (dtype_is_integer(dtype)) return Tensor(static_cast<int64_t>(std::stoll(s)));
  return Tensor(std::stod(s));
}

class Output {
 public:
  explicit Output(const std::string& path) : out_(path) {
    if (!out_) throw NotFoundError("interop_tool: cannot write " + quoted(path));
  }
  void write(const std::string& key, const Tensor& t) { out_ << format_line(key, t) << "\n"; }
  void write_line(const std::string& line) { out_ << line << "\n"; }

 private:
  std::ofstream out_;
};

struct VarLine {
  TextTensor value;
  std::string device;
  std::optional<SaveSliceInfo> slice;
};

std::vector<VarLine> read_vars(const std::string& path) {
  std::vector<VarLine> out;
  for (TextTensor& t : read_text_file(path)) {
    VarLine v;
    v.value = std::move(t);
    if (!v.value.extra.empty() && v.value.extra[0] != "-") v.device = v.value.extra[0];
    if (v.value.extra.size() > 1 && v.value.extra[1] != "-") {
      const std::vector<std::string> parts = split(v.value.extra[1], ';');
      if (parts.size() != 2)
        throw InvalidArgumentError("interop_tool: bad slice " + quoted(v.value.extra[1]));
      v.slice =
          SaveSliceInfo{v.value.key, parse_dims(parts[0]), parse_dims(parts[1]), v.value.dims};
    }
    out.push_back(std::move(v));
  }
  return out;
}

// Variables for the lines of VARS, initialized from their data (or zeros).
std::vector<Variable> make_variables(const std::vector<VarLine>& lines, bool zeros) {
  std::vector<Variable> vars;
  std::map<std::string, int> parts;  // partitions are named KEY/part_0, KEY/part_1, ...
  for (const VarLine& line : lines) {
    std::optional<DeviceScope> scope;
    if (!line.device.empty()) scope.emplace(line.device);
    Tensor init =
        zeros ? Tensor(line.value.dtype, TensorShape(line.value.dims)) : to_tensor(line.value);
    if (zeros && init.dtype() != DType::kString && init.nbytes() > 0) {
      std::memset(init.raw_data(), 0, init.nbytes());
    }
    VariableOptions options;
    options.name = line.value.key;
    if (line.slice) {
      options.name = line.value.key + "/part_" + std::to_string(parts[line.value.key]++);
      options.save_slice_info = line.slice;
    }
    vars.emplace_back(init, options);
  }
  Session sess;
  sess.run(global_variables_initializer());
  return vars;
}

int cmd_save(const std::vector<std::string>& args) {
  const std::vector<VarLine> lines = read_vars(args.at(0));
  bool sharded = false, v1 = false;
  for (size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "sharded") sharded = true;
    if (args[i] == "v1") v1 = true;
  }
  std::vector<Variable> vars = make_variables(lines, /*zeros=*/false);
  Saver saver({.var_list = vars,
               .sharded = sharded,
               .write_version = v1 ? CheckpointFormatVersion::kV1 : CheckpointFormatVersion::kV2});
  Session sess;
  saver.save(sess, args.at(1), {.write_meta_graph = false});
  return 0;
}

int cmd_save_chain(const std::vector<std::string>& args) {
  const std::vector<VarLine> lines = read_vars(args.at(0));
  std::vector<Variable> vars = make_variables(lines, /*zeros=*/false);
  Saver saver({.var_list = vars, .max_to_keep = 0});
  Session sess;
  const std::string prefix = args.at(1);
  saver.save(sess, prefix, {.global_step = 0, .write_meta_graph = false, .incremental = true});
  for (int64_t step = 1; step <= 2; ++step) {
    for (Variable& v : vars) {
      if (v.dtype() == DType::kString || v.shape().rank() == 0 || v.shape().dim(0) < 2) continue;
      const int64_t row = step == 1 ? 1 : v.shape().dim(0) - 1;
      scatter_update(v, Tensor(row), gather(v, Tensor(int64_t{0})));
    }
    saver.save(sess, prefix, {.global_step = step, .write_meta_graph = false, .incremental = true});
  }
  compact_checkpoint(prefix + "-2", args.at(2));
  return 0;
}

// A dynamic variable trained, written to and erased from, saved with its
// Adagrad slot and a dense variable (meta graph included) at args[0]; its
// contents (keys, rows, slot rows) go to args[1] for TensorFlow to compare.
int cmd_dynamic_save(const std::vector<std::string>& args) {
  DynamicVariable emb = get_dynamic_variable(
      "emb", {.dim = 3, .initializer = random_normal_initializer({.seed = 5})});
  Variable dense = get_variable("dense", {.shape = TensorShape{2, 2}});
  AdagradOptimizer opt(0.5);
  Session sess;
  sess.run(global_variables_initializer());
  const Tensor keys = Tensor::from_vector<int64_t>(
      {INT64_MIN, INT64_MIN + 1, -7, 0, 42, int64_t{1} << 40, INT64_MAX, 42});
  opt.apply_gradients(
      {emb.gradient(keys, Tensor::filled(DType::kFloat, {8, 3}, Tensor(0.25f),
                                         DeviceManager::instance().cpu())),
       {Tensor::filled(DType::kFloat, {2, 2}, Tensor(1.0f), DeviceManager::instance().cpu()),
        dense}});
  emb.insert(Tensor::from_vector<int64_t>({1000}), Tensor({{1.0f, 2.0f, 3.0f}}));
  emb.erase(Tensor::from_vector<int64_t>({0}));
  Saver().save(sess, args.at(0));
  Output out(args.at(1));
  const KeysAndValues kv = emb.export_rows();
  out.write("keys", kv.keys);
  out.write("values", kv.values);
  out.write("slot", opt.get_slot(emb.variable(), "accumulator")->value());
  out.write("dense", dense.value());
  return 0;
}

// A dynamic table's chain: a base, a per-key delta, and its compaction
// (the usage comment at the top).
int cmd_dynamic_chain(const std::vector<std::string>& args) {
  DynamicVariable emb = get_dynamic_variable(
      "emb", {.dim = 3, .initializer = random_normal_initializer({.seed = 6})});
  AdagradOptimizer opt(0.5);
  Session sess;
  sess.run(global_variables_initializer());
  Device& cpu = DeviceManager::instance().cpu();
  std::vector<int64_t> keys(400);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<int64_t>(i * 7919) - 1000000;
  opt.apply_gradients({emb.gradient(Tensor::from_vector(keys),
                                    Tensor::filled(DType::kFloat, {400, 3}, Tensor(0.25f), cpu))});
  Saver saver({.max_to_keep = 5});
  (void)saver.save(sess, args.at(0), {.global_step = int64_t{1}, .incremental = true}).wait();
  const std::vector<int64_t> trained(keys.begin(), keys.begin() + 5);
  opt.apply_gradients({emb.gradient(Tensor::from_vector(trained),
                                    Tensor::filled(DType::kFloat, {5, 3}, Tensor(-0.5f), cpu))});
  emb.erase(Tensor::from_vector<int64_t>({keys[10], keys[11], keys[12]}));
  emb.insert(Tensor::from_vector<int64_t>({INT64_MIN, INT64_MAX}),
             Tensor({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}}));
  const std::string delta =
      saver.save(sess, args.at(0), {.global_step = int64_t{2}, .incremental = true}).wait().value();
  if (!checkpoint_chain(delta).back().is_delta) {
    std::fprintf(stderr, "dynamic_chain: %s is not a delta\n", delta.c_str());
    return 2;
  }
  compact_checkpoint(delta, args.at(1));
  Output out(args.at(2));
  const KeysAndValues kv = emb.export_rows();
  out.write("keys", kv.keys);
  out.write("values", kv.values);
  out.write("slot", opt.get_slot(emb.variable(), "accumulator")->value());
  std::vector<int64_t> written = trained;
  written.push_back(INT64_MIN);
  written.push_back(INT64_MAX);
  std::sort(written.begin(), written.end());
  out.write("written", Tensor::from_vector(written));
  out.write("erased", Tensor::from_vector<int64_t>({keys[10], keys[11], keys[12]}));
  return 0;
}

// Restores a dynamic variable "emb" of dim args[1] from the checkpoint
// args[0] (its "emb-keys" / "emb-values", written by TensorFlow) and writes
// its keys and rows to args[2].
int cmd_dynamic_restore(const std::vector<std::string>& args) {
  DynamicVariable emb = get_dynamic_variable("emb", {.dim = std::stoll(args.at(1))});
  Session sess;
  sess.run(global_variables_initializer());
  emb.gather(Tensor::from_vector<int64_t>({12345}));  // replaced by the restore
  Saver({.var_list = std::vector<Variable>{emb.variable()}}).restore(sess, args.at(0));
  Output out(args.at(2));
  const KeysAndValues kv = emb.export_rows();
  out.write("keys", kv.keys);
  out.write("values", kv.values);
  return 0;
}

int cmd_dump(const std::vector<std::string>& args) {
  std::unique_ptr<CheckpointReader> reader = open_checkpoint(args.at(0));
  Output out(args.at(1));
  for (const TensorInfo& info : reader->list()) {
    const TensorData d = reader->read(info.name);
    out.write_line(
        format_line(info.name, d.dtype, d.shape, d.bytes.data(), d.bytes.size(), d.strings));
  }
  return 0;
}

void dump_variables(const std::vector<Variable>& vars, const std::vector<VarLine>& lines,
                    Output& out) {
  Session sess;
  for (size_t i = 0; i < vars.size(); ++i) {
    std::string key = lines[i].value.key;
    if (lines[i].slice) key += "@" + dims_key(lines[i].slice->var_offset);
    out.write(key, vars[i].eval(sess));
  }
}

int cmd_restore(const std::vector<std::string>& args) {
  const std::vector<VarLine> lines = read_vars(args.at(1));
  std::vector<Variable> vars = make_variables(lines, /*zeros=*/true);
  Saver saver({.var_list = vars});
  Session sess;
  saver.restore(sess, args.at(0));
  Output out(args.at(2));
  dump_variables(vars, lines, out);
  return 0;
}

// Calls fn(fields, line) for each non-empty line of the case file `path`,
// its fields split at spaces.
template <typename Fn>
void for_each_case(const std::string& path, Fn fn) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) fn(split(line, ' '), line);
  }
}

int cmd_random(const std::vector<std::string>& args) {
  Output out(args.at(1));
  for_each_case(args.at(0), [&](const std::vector<std::string>& f, const std::string& line) {
    if (f.size() != 8) throw InvalidArgumentError("interop_tool random: bad line " + quoted(line));
    if (f[0].empty() || f[0][0] != '+') {
      reset_default_graph();
      get_default_graph().set_random_seed(parse_opt_int(f[4]));
    }
    const DType dtype = dtype_from_name(f[2]);
    const TensorShape shape(parse_dims(f[3]));
    const std::optional<int64_t> seed = parse_opt_int(f[5]);
    Tensor t;
    if (f[1] == "uniform") {
      RandomUniformOptions o{.dtype = dtype, .seed = seed};
      if (f[6] != "-") o.minval = parse_param(f[6], dtype);
      if (f[7] != "-") o.maxval = parse_param(f[7], dtype);
      t = random_uniform(shape, o);
    } else {
      RandomNormalOptions o{.dtype = dtype, .seed = seed};
      if (f[6] != "-") o.mean = parse_param(f[6], dtype);
      if (f[7] != "-") o.stddev = parse_param(f[7], dtype);
      t = f[1] == "normal" ? random_normal(shape, o) : truncated_normal(shape, o);
    }
    out.write(f[0], t);
  });
  return 0;
}

Initializer make_initializer(const std::vector<std::string>& f, DType dtype) {
  const std::string& name = f[1];
  const std::optional<int64_t> seed = parse_opt_int(f[5]);
  auto arg = [&](size_t i) -> const std::string& {
    if (f.size() <= 7 + i)
      throw InvalidArgumentError("interop_tool init: " + name + " needs more arguments");
    return f[7 + i];
  };
  if (name == "random_uniform") {
    RandomUniformInitializerOptions o{.seed = seed, .dtype = dtype};
    if (f.size() > 7) o.minval = parse_param(arg(0), dtype);
    if (f.size() > 8) o.maxval = parse_param(arg(1), dtype);
    return random_uniform_initializer(o);
  }
  if (name == "random_normal" || name == "truncated_normal") {
    RandomNormalInitializerOptions o{.seed = seed, .dtype = dtype};
    if (f.size() > 7) o.mean = parse_param(arg(0), dtype);
    if (f.size() > 8) o.stddev = parse_param(arg(1), dtype);
    return name == "random_normal" ? random_normal_initializer(o) : truncated_normal_initializer(o);
  }
  if (name == "uniform_unit_scaling") {
    return uniform_unit_scaling_initializer(
        {.factor = f.size() > 7 ? std::stod(arg(0)) : 1.0, .seed = seed, .dtype = dtype});
  }
  if (name == "variance_scaling") {
    return variance_scaling_initializer({.scale = std::stod(arg(0)),
                                         .mode = arg(1),
                                         .distribution = arg(2),
                                         .seed = seed,
                                         .dtype = dtype});
  }
  if (name == "glorot_uniform") return glorot_uniform_initializer({.seed = seed, .dtype = dtype});
  if (name == "glorot_normal") return glorot_normal_initializer({.seed = seed, .dtype = dtype});
  throw InvalidArgumentError("interop_tool init: unknown initializer " + quoted(name));
}

int cmd_init(const std::vector<std::string>& args) {
  Output out(args.at(1));
  for_each_case(args.at(0), [&](const std::vector<std::string>& f, const std::string& line) {
    if (f.size() < 7) throw InvalidArgumentError("interop_tool init: bad line " + quoted(line));
    reset_default_graph();
    get_default_graph().set_random_seed(parse_opt_int(f[4]));
    const DType dtype = dtype_from_name(f[2]);
    const TensorShape shape(parse_dims(f[3]));
    const Initializer init = make_initializer(f, dtype);
    const int calls = std::stoi(f[6]);
    for (int k = 0; k < calls; ++k) out.write(f[0] + "#" + std::to_string(k), init(shape, dtype));
  });
  return 0;
}

// Whether `update` (a call with default arguments) waits while another
// thread holds the variable's update_mutex.
bool waits_for_lock(const std::function<void(Variable&)>& update) {
  reset_default_graph();
  Variable v(Tensor({1.f, 2.f, 3.f, 4.f}), {.name = "v"});
  Session sess;
  sess.run(global_variables_initializer());
  std::unique_lock held(internal::update_mutex(v));
  auto done = std::async(std::launch::async, [&] { update(v); });
  const bool waited = done.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout;
  held.unlock();
  done.get();
  return waited;
}

int cmd_locking(const std::vector<std::string>& args) {
  Output out(args.at(0));
  const Tensor one = Tensor({1.f, 1.f, 1.f, 1.f});
  const Tensor idx = Tensor({int64_t{0}, int64_t{2}});
  const Tensor upd = Tensor({2.f, 2.f});
  const std::vector<std::pair<std::string, std::function<void(Variable&)>>> ops = {
      {"assign", [&](Variable& v) { assign(v, one); }},
      {"assign_add", [&](Variable& v) { assign_add(v, one); }},
      {"assign_sub", [&](Variable& v) { assign_sub(v, one); }},
      {"scatter_update", [&](Variable& v) { scatter_update(v, idx, upd); }},
      {"scatter_add", [&](Variable& v) { scatter_add(v, idx, upd); }},
      {"scatter_sub", [&](Variable& v) { scatter_sub(v, idx, upd); }},
      {"scatter_mul", [&](Variable& v) { scatter_mul(v, idx, upd); }},
      {"scatter_div", [&](Variable& v) { scatter_div(v, idx, upd); }},
      {"scatter_min", [&](Variable& v) { scatter_min(v, idx, upd); }},
      {"scatter_max", [&](Variable& v) { scatter_max(v, idx, upd); }},
      {"method_assign", [&](Variable& v) { v.assign(one); }},
      {"method_assign_add", [&](Variable& v) { v.assign_add(one); }},
      {"method_assign_sub", [&](Variable& v) { v.assign_sub(one); }},
  };
  for (const auto& [name, fn] : ops) out.write_line(name + (waits_for_lock(fn) ? " 1" : " 0"));
  return 0;
}

std::vector<SliceSpec> parse_slice(const std::string& text) {
  std::vector<SliceSpec> specs;
  for (const std::string& dim : split(text, ',')) {
    const std::vector<std::string> p = split(dim, ':');
    auto opt = [](const std::string& s) -> std::optional<int64_t> {
      if (s.empty()) return std::nullopt;
      return std::stoll(s);
    };
    if (dim == "...") {
      specs.push_back(Slice::ellipsis());
    } else if (dim == "new") {
      specs.push_back(Slice::newaxis());
    } else if (p.size() == 1) {
      specs.push_back(Slice::index(std::stoll(p[0])));
    } else {
      specs.push_back(Slice::range(opt(p[0]), opt(p[1]), p.size() > 2 ? opt(p[2]) : std::nullopt));
    }
  }
  return specs;
}

// 0, 1, ... as int64 of `shape`.
Tensor iota(const TensorShape& shape) {
  std::vector<int64_t> v(shape.num_elements());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i);
  return Tensor::from_vector(v, shape);
}

// "ID error CLASS": the line of a case that raised.
void write_error(Output& out, const std::string& id, const Error& e) {
  out.write_line(hex_encode(id.data(), id.size()) + " error " +
                 std::string(error_code_name(e.code())));
}

int cmd_slice(const std::vector<std::string>& args) {
  Output out(args.at(1));
  for_each_case(args.at(0), [&](const std::vector<std::string>& f, const std::string&) {
    const Tensor t = iota(TensorShape(parse_dims(f.at(1))));
    try {
      out.write(f[0], strided_slice(t, parse_slice(f.at(2))));
    } catch (const Error& e) {
      write_error(out, f[0], e);
    }
  });
  return 0;
}

int cmd_slice_assign(const std::vector<std::string>& args) {
  Output out(args.at(1));
  for_each_case(args.at(0), [&](const std::vector<std::string>& f, const std::string&) {
    reset_default_graph();
    Variable v(iota(TensorShape(parse_dims(f.at(1)))), {.name = "v"});
    Session().run(v.initializer());
    try {
      VariableSlice region = v.slice(parse_slice(f.at(2)));
      region.assign(-(iota(region.shape()) + int64_t{1}));
      out.write(f[0], v.value());
    } catch (const Error& e) {
      write_error(out, f[0], e);
    }
  });
  return 0;
}

// The items' names as TensorFlow's get_collection test prints them.
Tensor item_names(const std::vector<std::any>& items) {
  std::vector<std::string> names;
  for (const std::any& item : items) {
    if (const auto* v = std::any_cast<Variable>(&item)) names.push_back(v->name());
    if (const auto* p = std::any_cast<PartitionedVariable>(&item)) names.push_back(p->name());
    if (const auto* op = std::any_cast<Op>(&item)) names.push_back(op->name());
    if (const auto* ph = std::any_cast<Placeholder>(&item)) names.push_back(ph->name() + ":0");
    if (const auto* s = std::any_cast<std::string>(&item)) names.push_back("str:" + *s);
    if (const auto* i = std::any_cast<int>(&item)) names.push_back("int:" + std::to_string(*i));
  }
  return Tensor::from_vector(names);
}

// The graph test_collections.py builds with TensorFlow.
void build_collection_graph() {
  reset_default_graph();
  const TensorShape two{2};
  {
    auto enc = variable_scope("enc");
    get_variable("w", {.shape = two});
    PartitionedVariable emb =
        get_variable("emb", {.shape = TensorShape{4, 2}, .partitioner = fixed_size_partitioner(2)});
    add_to_collection("mixed", emb);
  }
  {
    auto encoder = variable_scope("encoder");
    get_variable("w", {.shape = two, .trainable = false});
  }
  {
    using Keys = std::vector<std::string>;
    auto dec = variable_scope("dec");
    get_variable("local", {.shape = two, .collections = Keys{GraphKeys::LOCAL_VARIABLES}});
    get_variable("model",
                 {.shape = two,
                  .collections = Keys{GraphKeys::GLOBAL_VARIABLES, GraphKeys::MODEL_VARIABLES}});
    get_variable("avg", {.shape = two,
                         .trainable = false,
                         .collections = Keys{GraphKeys::GLOBAL_VARIABLES,
                                             GraphKeys::MOVING_AVERAGE_VARIABLES}});
  }
  add_to_collection("mixed", placeholder(DType::kFloat, two, "enc/x"));
  add_to_collection("mixed", Op("enc/step", "NoOp", [] {}));
  add_to_collection("mixed", std::string("enc/unnamed"));
  add_to_collection("mixed", 7);
}

std::vector<std::any> run_collection_query(const std::string& func, const std::string& key,
                                           const std::string& scope) {
  const std::map<std::string, std::function<std::vector<Variable>(std::string_view)>> helpers = {
      {"global_variables", [](std::string_view s) { return global_variables(s); }},
      {"trainable_variables", [](std::string_view s) { return trainable_variables(s); }},
      {"local_variables", [](std::string_view s) { return local_variables(s); }},
      {"model_variables", [](std::string_view s) { return model_variables(s); }},
      {"moving_average_variables", [](std::string_view s) { return moving_average_variables(s); }},
  };
  if (func == "get_collection") return get_collection(key, scope);
  auto it = helpers.find(func);
  if (it == helpers.end()) throw InvalidArgumentError("interop_tool: bad function " + quoted(func));
  std::vector<Variable> vars = it->second(scope);
  return std::vector<std::any>(vars.begin(), vars.end());
}

int cmd_collection(const std::vector<std::string>& args) {
  std::ifstream in(args.at(0));
  Output out(args.at(1));
  build_collection_graph();
  auto field = [](const std::string& f) { return f == "-" ? std::string() : hex_decode(f); };
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> f = split(line, ' ');
    try {
      out.write(f.at(0), item_names(run_collection_query(f.at(1), field(f.at(2)), field(f.at(3)))));
    } catch (const Error& e) {
      write_error(out, f[0], e);
    }
  }
  return 0;
}

// The documented error cases of tf-state-ops-api.md that TensorFlow can run
// too (test_semantics.py holds TensorFlow's side under the same names), by
// subject: each a name and a call expected to throw (or not).
using ErrorCases = std::vector<std::pair<std::string, std::function<void()>>>;

// A fresh default graph holding v = float32 [1, 2, 3] (uninitialized).
Variable fresh_variable() {
  reset_default_graph();
  Variable v(Tensor({1.f, 2.f, 3.f}), {.name = "v"});
  return v;
}

void initialize_globals() {
  Session sess;
  sess.run(global_variables_initializer());
}

// Reads of uninitialized variables, bad indices, shape mismatches.
ErrorCases variable_error_cases() {
  return {
      {"read_uninitialized",
       [] {
         Session sess;
         fresh_variable().eval(sess);
       }},
      {"assign_add_uninitialized",
       [] {
         Variable v = fresh_variable();
         v.assign_add(Tensor({1.f, 1.f, 1.f}));
       }},
      {"scatter_update_out_of_range",
       [] {
         Variable v = fresh_variable();
         initialize_globals();
         scatter_update(v, Tensor({int64_t{5}}), Tensor({1.f}));
       }},
      {"scatter_add_negative_index",
       [] {
         Variable v = fresh_variable();
         initialize_globals();
         scatter_add(v, Tensor({int64_t{-1}}), Tensor({1.f}));
       }},
      {"count_up_to_limit",
       [] {
         reset_default_graph();
         Variable v(Tensor(int64_t{3}), {.name = "c"});
         initialize_globals();
         count_up_to(v, 3);
       }},
      {"assign_shape_mismatch",
       [] {
         Variable v = fresh_variable();
         initialize_globals();
         assign(v, Tensor({1.f, 2.f}));
       }},
      {"assign_add_shape_mismatch",
       [] {
         Variable v = fresh_variable();
         initialize_globals();
         assign_add(v, Tensor({1.f, 2.f}));
       }},
      {"assign_scalar_broadcast",
       [] {
         Variable v = fresh_variable();
         initialize_globals();
         assign(v, Tensor(5.f));
       }},
      {"assign_sub_shape_mismatch",
       [] {
         Variable v = fresh_variable();
         initialize_globals();
         assign_sub(v, Tensor({{1.f, 2.f, 3.f}}));
       }},
      {"scatter_update_updates_shape",
       [] {
         Variable v = fresh_variable();
         initialize_globals();
         scatter_update(v, Tensor({int64_t{0}, int64_t{1}}), Tensor({1.f}));
       }},
      {"scatter_add_updates_rank",
       [] {
         Variable v = fresh_variable();
         initialize_globals();
         scatter_add(v, Tensor({int64_t{0}, int64_t{1}}), Tensor({{1.f, 2.f}}));
       }},
      {"scatter_max_into_scalar",
       [] {
         reset_default_graph();
         Variable v(Tensor(1.f), {.name = "s"});
         initialize_globals();
         scatter_max(v, Tensor({int64_t{0}}), Tensor({1.f}));
       }},
      {"variable_initial_value_other_dtype",
       [] {
         reset_default_graph();
         Variable v(Tensor({1, 2}).strongly_typed(), {.name = "w", .dtype = DType::kFloat});
       }},
  };
}

// Element-wise ops, matmul, integer division and strided slices.
ErrorCases math_error_cases() {
  return {
      {"add_incompatible_shapes",
       [] {
         (void)(Tensor({1.f, 2.f, 3.f}) + Tensor({1.f, 2.f}));
       }},
      {"multiply_incompatible_shapes",
       [] {
         (void)(Tensor::zeros(DType::kFloat, {2, 3}) * Tensor::zeros(DType::kFloat, {2, 2}));
       }},
      {"matmul_inner_dimension_mismatch",
       [] {
         matmul(Tensor::zeros(DType::kFloat, {2, 3}), Tensor::zeros(DType::kFloat, {2, 3}));
       }},
      {"matmul_not_a_matrix",
       [] {
         matmul(Tensor::zeros(DType::kFloat, {3}), Tensor::zeros(DType::kFloat, {3, 2}));
       }},
      {"floordiv_int_by_zero",
       [] {
         floordiv(Tensor({7, -7}), Tensor({0, 1}));
       }},
      {"floormod_int_by_zero",
       [] {
         (void)(Tensor({7, -7}) % Tensor({2, 0}));
       }},
      {"slice_step_zero",
       [] {
         strided_slice(Tensor({1, 2, 3}), {Slice::range(0, 3, 0)});
       }},
      {"slice_multiple_ellipses",
       [] {
         strided_slice(Tensor({{1, 2}, {3, 4}}), {Slice::ellipsis(), Slice::ellipsis()});
       }},
  };
}

// Random ops and initializers given a dtype or arguments they reject.
ErrorCases random_and_initializer_error_cases() {
  return {
      {"random_uniform_int_without_maxval",
       [] { random_uniform(TensorShape{3}, {.dtype = DType::kInt32}); }},
      {"random_uniform_int_empty_range",
       [] {
         random_uniform(TensorShape{3}, {.minval = 5, .maxval = Tensor(3), .dtype = DType::kInt32});
       }},
      {"random_normal_int_dtype", [] { random_normal(TensorShape{3}, {.dtype = DType::kInt32}); }},
      {"truncated_normal_int_dtype",
       [] { truncated_normal(TensorShape{3}, {.dtype = DType::kInt64}); }},
      {"random_uniform_int8_dtype",
       [] { random_uniform(TensorShape{3}, {.maxval = Tensor(3), .dtype = DType::kInt8}); }},
      {"random_normal_initializer_int_dtype",
       [] { random_normal_initializer({.dtype = DType::kInt32}); }},
      {"random_uniform_initializer_int_without_maxval",
       [] { random_uniform_initializer({.dtype = DType::kInt32})(TensorShape{3}); }},
      {"constant_initializer_too_many",
       [] {
         constant_initializer(Tensor({1.f, 2.f, 3.f}))(TensorShape{2});
       }},
      {"variance_scaling_bad_scale", [] { variance_scaling_initializer({.scale = -1.0}); }},
      {"variance_scaling_bad_mode", [] { variance_scaling_initializer({.mode = "fan_sum"}); }},
  };
}

// A fresh graph holding `name` = `value`, restored from `path`.
void restore_into(const Tensor& value, const std::string& name, const std::string& path) {
  reset_default_graph();
  Variable v(value, {.name = name});
  initialize_globals();
  Saver().restore(Session(), path);
}

// Checkpoints: saves DIR/ckpt (v = float32 [3]) first, for the restores.
ErrorCases checkpoint_error_cases(const std::string& dir) {
  const std::string ckpt = dir + "/ckpt";
  {
    Variable v = fresh_variable();
    initialize_globals();
    Saver().save(Session(), ckpt, {.write_meta_graph = false});
  }
  return {
      {"restore_missing_key",
       [ckpt] {
         restore_into(Tensor({1.f, 2.f, 3.f}), "missing", ckpt);
       }},
      {"restore_dtype_mismatch",
       [ckpt] {
         restore_into(Tensor({1, 2, 3}), "v", ckpt);
       }},
      {"restore_shape_mismatch",
       [ckpt] {
         restore_into(Tensor({1.f, 2.f}), "v", ckpt);
       }},
      {"restore_no_checkpoint",
       [dir] {
         restore_into(Tensor({1.f, 2.f, 3.f}), "v", dir + "/none");
       }},
      {"save_missing_directory",
       [dir] {
         reset_default_graph();
         Variable v(Tensor({1.f}), {.name = "v"});
         initialize_globals();
         Saver().save(Session(), dir + "/no/such/dir/model");
       }},
  };
}

int cmd_errors(const std::vector<std::string>& args) {
  Output out(args.at(0));
  ErrorCases cases = checkpoint_error_cases(args.at(1));
  for (ErrorCases more :
       {variable_error_cases(), math_error_cases(), random_and_initializer_error_cases()}) {
    cases.insert(cases.end(), more.begin(), more.end());
  }
  for (const auto& [name, fn] : cases) {
    std::string result = "none";
    try {
      fn();
    } catch (const Error& e) {
      result = std::string(error_code_name(e.code()));
    }
    out.write_line(name + " " + result);
  }
  return 0;
}

int cmd_export_meta(const std::vector<std::string>& args) {
  const std::vector<VarLine> init_lines = read_vars(args.at(0));
  const std::vector<VarLine> saved_lines = read_vars(args.at(1));
  bool sharded = false, v1 = false, deferred = false;
  for (size_t i = 3; i < args.size(); ++i) {
    sharded |= args[i] == "sharded";
    v1 |= args[i] == "v1";
    deferred |= args[i] == "deferred";
  }
  std::vector<Variable> vars = make_variables(init_lines, /*zeros=*/false);
  if (deferred) {
    Variable w(bind(glorot_uniform_initializer({.seed = 3}), {4, 3}, DType::kFloat),
               {.name = "deferred_w", .dtype = DType::kFloat, .expected_shape = TensorShape{4, 3}});
    Session().run(w.initializer());
  }
  if (saved_lines.size() != init_lines.size()) {
    throw InvalidArgumentError("interop_tool export_meta: " + std::to_string(saved_lines.size()) +
                               " saved values for " + std::to_string(init_lines.size()) +
                               " variables");
  }
  for (size_t i = 0; i < vars.size(); ++i) vars[i].assign(to_tensor(saved_lines[i].value));
  Saver saver({.sharded = sharded,
               .write_version = v1 ? CheckpointFormatVersion::kV1 : CheckpointFormatVersion::kV2});
  Session sess;
  saver.save(sess, args.at(2));
  return 0;
}

int cmd_export_init_meta(const std::vector<std::string>& args) {
  get_default_graph().set_random_seed(5);
  const TensorShape shape{7, 33};
  auto make = [&](const char* name, Initializer init, DType dtype = DType::kFloat) {
    return get_variable(name, {.shape = shape, .dtype = dtype, .initializer = init});
  };
  make("uniform", random_uniform_initializer({.minval = -2, .maxval = 3, .seed = 1}));
  make("uniform_int",
       random_uniform_initializer({.minval = -5, .maxval = 9, .seed = 2, .dtype = DType::kInt64}),
       DType::kInt64);
  make("normal", random_normal_initializer({.mean = 1.5, .stddev = 0.5, .seed = 3}));
  make("truncated", truncated_normal_initializer({.mean = -1, .stddev = 2, .seed = 4}));
  make("normal_f64", random_normal_initializer({.seed = 8, .dtype = DType::kDouble}),
       DType::kDouble);
  make("glorot_uniform", glorot_uniform_initializer({.seed = 5}));
  make("glorot_normal", glorot_normal_initializer());  // graph seed only
  make("scaling", variance_scaling_initializer(
                      {.scale = 2, .mode = "fan_in", .distribution = "untruncated_normal"}));
  make("unit_scaling", uniform_unit_scaling_initializer({.factor = 1.5, .seed = 6}));
  make("zeros", zeros_initializer());
  make("ones", ones_initializer(DType::kInt32), DType::kInt32);
  make("constant", constant_initializer(Tensor({1.f, 2.f, 3.f})));
  get_variable("part", {.shape = TensorShape{10, 4},
                        .initializer = glorot_uniform_initializer({.seed = 7}),
                        .partitioner = fixed_size_partitioner(3)});
  Session sess;
  sess.run(global_variables_initializer());
  Output out(args.at(1));
  for (const Variable& v : global_variables()) out.write(v.op_name(), v.eval(sess));
  Saver saver;
  saver.save(sess, args.at(0));
  return 0;
}

int cmd_import_meta(const std::vector<std::string>& args) {
  std::optional<Saver> saver = import_meta_graph(args.at(0));
  if (!saver)
    throw NotFoundError("interop_tool import_meta: no variables in " + quoted(args.at(0)));
  Session sess;
  saver->restore(sess, args.at(1));
  Output out(args.at(2));
  for (const Variable& v : global_variables()) out.write(v.op_name(), v.eval(sess));
  Output trainable(args.at(2) + ".trainable");
  for (const Variable& v : trainable_variables()) trainable.write_line(v.op_name());
  return 0;
}

// The model of test_train_op.py: plain variables, a counter, partitioned
// tables, and one train_op with every kind of update input (placeholders,
// constants, another variable's value). TensorFlow runs a group's members
// in any order, concurrently: no two members touch the same variable, and
// none reads a variable another member updates.
int cmd_export_train(const std::vector<std::string>& args) {
  Variable emb(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}), {.name = "emb"});
  Variable w(Tensor({1.f, 2.f}), {.name = "dense/w"});
  Variable bias(Tensor({0.5f, -0.5f}), {.name = "dense/b"});
  Variable scale(Tensor({0.25f, 4.f}), {.name = "dense/scale"});
  Variable step(Tensor(int64_t{0}), {.trainable = false, .name = "global_step"});
  Variable floor(Tensor({9.f, 9.f, 9.f}), {.name = "floor"});
  auto table = [](const char* name) {
    return get_variable(name, {.shape = TensorShape{5, 2},
                               .initializer = zeros_initializer(),
                               .partitioner = fixed_size_partitioner(2)});
  };
  PartitionedVariable rows_table = table("table"), shifted = table("shifted"),
                      marks = table("marks");
  Placeholder ids = placeholder(DType::kInt64, TensorShape{-1}, "ids");
  Placeholder rows = placeholder(DType::kFloat, TensorShape{-1, 2}, "rows");
  Placeholder lr = placeholder(DType::kFloat, TensorShape{}, "lr");
  Op train_op = Op::group(
      {scatter_add_op(emb, ids, rows), assign_sub_op(w, lr), assign_add_op(bias, scale),
       scatter_min_op(floor, Tensor({0, 2}), Tensor({4.f, 7.f})), count_up_to_op(step, 100),
       scatter_sub_op(rows_table, ids, rows), assign_add_op(shifted, lr),
       scatter_update_op(marks, Tensor({4, 0}), Tensor::from_vector<float>({7, 8, 9, 10}, {2, 2}))},
      "train");
  get_default_graph().add_to_collection("train_op", train_op);
  Session sess;
  sess.run(global_variables_initializer());
  const Tensor iota = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {5, 2});
  for (PartitionedVariable* p : {&rows_table, &shifted, &marks}) p->assign(iota);
  Saver saver;
  saver.save(sess, args.at(0));
  return 0;
}

int cmd_run_train(const std::vector<std::string>& args) {
  std::optional<Saver> saver = import_meta_graph(args.at(0));
  if (!saver) throw NotFoundError("interop_tool run_train: no variables in " + quoted(args.at(0)));
  Session sess;
  saver->restore(sess, args.at(1));
  std::vector<Op> ops;
  for (const std::any& item : get_default_graph().get_collection("train_op")) {
    if (item.type() != typeid(Op)) {
      throw InvalidArgumentError("interop_tool run_train: train_op item " +
                                 quoted(std::any_cast<std::string>(item)) + " is not runnable");
    }
    ops.push_back(std::any_cast<Op>(item));
  }
  std::map<int, FeedDict> steps;
  for (const TextTensor& t : read_text_file(args.at(2))) {
    const size_t slash = t.key.find('/');
    steps[std::stoi(t.key.substr(0, slash))].set({t.key.substr(slash + 1), to_tensor(t)});
  }
  for (const auto& [s, feeds] : steps) sess.run(ops, feeds);
  Output out(args.at(3));
  for (const Variable& v : global_variables()) out.write(v.op_name(), v.eval(sess));
  return 0;
}

Tensor apply_math(const std::string& op, const Tensor& x, const Tensor& y) {
  if (op == "div") return x / y;
  if (op == "floordiv") return floordiv(x, y);
  if (op == "floormod") return x % y;
  if (op == "add") return x + y;
  if (op == "sub") return x - y;
  if (op == "mul") return x * y;
  if (op == "matmul") return matmul(x, y);
  throw InvalidArgumentError("interop_tool math: unknown op " + quoted(op));
}

int cmd_math(const std::vector<std::string>& args) {
  const std::vector<TextTensor> lines = read_text_file(args.at(0));
  Output out(args.at(1));
  for (size_t i = 0; i + 1 < lines.size(); i += 2) {
    const std::string& op = lines[i].extra.at(0);
    try {
      out.write(lines[i].key, apply_math(op, to_tensor(lines[i]), to_tensor(lines[i + 1])));
    } catch (const Error& e) {
      out.write_line(hex_encode(lines[i].key.data(), lines[i].key.size()) + " error " +
                     std::string(error_code_name(e.code())));
    }
  }
  return 0;
}

Partitioner make_partitioner(const std::vector<std::string>& f) {
  const std::string& kind = f.at(3);
  if (kind == "fixed") return fixed_size_partitioner(std::stoll(f.at(4)), std::stoi(f.at(5)));
  if (kind == "axis_size") {
    return variable_axis_size_partitioner(std::stoll(f.at(4)),
                                          {.axis = std::stoi(f.at(5)),
                                           .bytes_per_string_element = std::stoll(f.at(6)),
                                           .max_shards = parse_opt_int(f.at(7))});
  }
  if (kind == "min_max") {
    return min_max_variable_partitioner({.max_partitions = std::stoll(f.at(4)),
                                         .axis = std::stoi(f.at(5)),
                                         .min_slice_size = std::stoll(f.at(6)),
                                         .bytes_per_string_element = std::stoll(f.at(7))});
  }
  throw InvalidArgumentError("interop_tool partition: unknown partitioner " + quoted(kind));
}

int cmd_partition(const std::vector<std::string>& args) {
  Output out(args.at(1));
  for_each_case(args.at(0), [&](const std::vector<std::string>& f, const std::string&) {
    const std::string id = hex_encode(f[0].data(), f[0].size());
    try {
      const DType dtype = static_cast<DType>(std::stoi(f.at(1)));
      const TensorShape shape(parse_dims(f.at(2)));
      const std::vector<int64_t> parts = make_partitioner(f)(shape, dtype);
      std::string text;
      for (int64_t p : parts) text += (text.empty() ? "" : ",") + std::to_string(p);
      std::string shapes = "-";
      if (dtype_is_numeric(dtype)) {
        reset_default_graph();
        const GetVariableResult v = get_variable("v", {.shape = shape,
                                                       .dtype = dtype,
                                                       .initializer = zeros_initializer(dtype),
                                                       .partitioner = make_partitioner(f)});
        shapes.clear();
        auto add = [&](const TensorShape& s) {
          std::string dims;
          for (int i = 0; i < s.rank(); ++i) dims += (i ? "x" : "") + std::to_string(s.dim(i));
          shapes += (shapes.empty() ? "" : ";") + dims;
        };
        if (v.is_partitioned()) {
          for (const Variable& part : v.partitioned_variable()) add(part.shape());
        } else {
          add(v.shape());
        }
      }
      out.write_line(id + " " + text + " " + shapes);
    } catch (const Error& e) {
      out.write_line(id + " error " + std::string(error_code_name(e.code())));
    }
  });
  return 0;
}

}  // namespace
}  // namespace varstate::interop

int main(int argc, char** argv) {
  using namespace varstate::interop;
  if (argc < 2) {
    std::cerr
        << "usage: interop_tool "
           "save|dump|restore|random|init|math|locking|slice|slice_assign|collection|errors|"
           "sharing|placement|export_meta|export_init_meta|import_meta|export_train|run_train|"
           "partition|optimize|moving_average|lr_schedule|init_from_checkpoint ARGS...\n";
    return 2;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (cmd == "save") return cmd_save(args);
    if (cmd == "save_chain") return cmd_save_chain(args);
    if (cmd == "dump") return cmd_dump(args);
    if (cmd == "dynamic_save") return cmd_dynamic_save(args);
    if (cmd == "dynamic_restore") return cmd_dynamic_restore(args);
    if (cmd == "dynamic_chain") return cmd_dynamic_chain(args);
    if (cmd == "restore") return cmd_restore(args);
    if (cmd == "random") return cmd_random(args);
    if (cmd == "init") return cmd_init(args);
    if (cmd == "math") return cmd_math(args);
    if (cmd == "partition") return cmd_partition(args);
    if (cmd == "locking") return cmd_locking(args);
    if (cmd == "slice") return cmd_slice(args);
    if (cmd == "slice_assign") return cmd_slice_assign(args);
    if (cmd == "collection") return cmd_collection(args);
    if (cmd == "errors") return cmd_errors(args);
    if (cmd == "sharing") return cmd_sharing(args);
    if (cmd == "placement") return cmd_placement(args);
    if (cmd == "export_meta") return cmd_export_meta(args);
    if (cmd == "import_meta") return cmd_import_meta(args);
    if (cmd == "export_init_meta") return cmd_export_init_meta(args);
    if (cmd == "export_train") return cmd_export_train(args);
    if (cmd == "run_train") return cmd_run_train(args);
    if (cmd == "optimize") return cmd_optimize(args);
    if (cmd == "moving_average") return cmd_moving_average(args);
    if (cmd == "lr_schedule") return cmd_lr_schedule(args);
    if (cmd == "init_from_checkpoint") return cmd_init_from_checkpoint(args);
    std::cerr << "interop_tool: unknown command " << cmd << "\n";
    return 2;
  } catch (const varstate::Error& e) {
    std::cerr << "interop_tool " << cmd << ": " << varstate::error_code_name(e.code()) << ": "
              << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "interop_tool " << cmd << ": " << e.what() << "\n";
    return 1;
  }
}
