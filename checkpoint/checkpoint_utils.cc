#include "varstate/checkpoint_utils.h"

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "checkpoint/saver_io_internal.h"
#include "runtime/keyed_storage.h"
#include "runtime/variable_access.h"
#include "runtime/variable_store.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/checkpoint_state.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/graph.h"

namespace varstate {
namespace {

// A checkpoint prefix, or the latest checkpoint of a directory.
std::string checkpoint_path(const std::string& ckpt_dir_or_file) {
  std::error_code error;
  if (!std::filesystem::is_directory(ckpt_dir_or_file, error)) return ckpt_dir_or_file;
  std::optional<std::string> latest = latest_checkpoint(ckpt_dir_or_file);
  if (!latest) {
    throw ValueError("Couldn't find 'checkpoint' file or checkpoints in given directory " +
                     ckpt_dir_or_file);
  }
  return *latest;
}

std::string shape_string(const std::vector<int64_t>& dims) { return TensorShape(dims).to_string(); }

// The checkpoint, opened by the first initializer that runs and shared by
// the others of one init_from_checkpoint call.
class LazyReader {
 public:
  explicit LazyReader(std::string path) : path_(std::move(path)) {}
  const CheckpointReader& get() {
    std::lock_guard lock(mu_);
    if (!reader_) reader_ = open_checkpoint(path_);
    return *reader_;
  }

 private:
  std::string path_;
  std::mutex mu_;
  std::unique_ptr<CheckpointReader> reader_;
};

// One tensor of the checkpoint and the variables it initializes: one
// variable (the whole tensor), or the parts of a partitioned one (each its
// slice).
struct Assignment {
  std::string tensor;
  std::vector<Variable> vars;
  bool sliced = false;
};

class Resolver {
 public:
  Resolver(std::string shown_path, const CheckpointReader& reader)
      : shown_path_(std::move(shown_path)), reader_(reader) {
    Graph& graph = get_default_graph();
    store_ = internal::store_variables(graph);
    partitioned_ = internal::store_partitioned_variables(graph);
  }

  // The store's variable or partitioned variable `name`.
  std::optional<Assignment> by_name(const std::string& name) const {
    if (auto it = store_.find(name); it != store_.end()) return Assignment{"", {it->second}, false};
    if (auto it = partitioned_.find(name); it != partitioned_.end()) {
      return Assignment{"", it->second.variables(), true};
    }
    return std::nullopt;
  }

  // `a` for tensor `tensor`, after checking it against the checkpoint.
  void add(std::string tensor, Assignment a, const std::string& missing_detail = "") {
    const std::optional<TensorInfo> info = reader_.find(tensor);
    if (!info) {
      throw ValueError("Tensor " + tensor + missing_detail + " is not found in " + shown_path_ +
                       " checkpoint");
    }
    const Variable& first = a.vars.front();
    if (internal::keyed_storage(first) != nullptr) {
      throw ValueError("init_from_checkpoint: " + varstate::quoted(first.op_name()) +
                       " is a dynamic variable; restore it with a Saver");
    }
    const TensorShape var_shape = first.shape();
    const std::vector<int64_t> shape =
        a.sliced ? first.save_slice_info()->full_shape
                 : std::vector<int64_t>(var_shape.dims().begin(), var_shape.dims().end());
    const std::string what = a.sliced ? "partitioned variable " + varstate::quoted(full_name(a))
                                      : "variable " + varstate::quoted(first.op_name());
    if (shape != info->shape) {
      throw ValueError("Shape of " + what + " (" + shape_string(shape) +
                       ") doesn't match with shape of tensor " + tensor + " (" +
                       shape_string(info->shape) + ") from checkpoint reader.");
    }
    if (first.dtype() != info->dtype) {
      throw ValueError("dtype of " + what + " (" + std::string(dtype_name(first.dtype())) +
                       ") doesn't match with dtype of tensor " + tensor + " (" +
                       std::string(dtype_name(info->dtype)) + ") in the checkpoint");
    }
    a.tensor = std::move(tensor);
    assignments_.push_back(std::move(a));
  }

  // Every store variable under `scopes` (all when empty), by name, parts
  // gathered under their partitioned variable's name.
  std::set<std::string> scope_variables(const std::string& scopes) const {
    std::set<std::string> out;
    for (const auto& [name, var] : store_) {
      if (!scopes.empty() && name.rfind(scopes + "/", 0) != 0) continue;
      if (internal::keyed_storage(var) != nullptr) continue;  // dynamic: restored by a Saver
      // A part ("emb/part_1") goes under its partitioned variable.
      const size_t part = name.rfind("/part_");
      const bool is_part =
          part != std::string::npos && partitioned_.count(name.substr(0, part)) != 0;
      out.insert(is_part ? name.substr(0, part) : name);
    }
    return out;
  }

  std::vector<Assignment>& assignments() { return assignments_; }

 private:
  static std::string full_name(const Assignment& a) {
    return a.vars.front().save_slice_info()->full_name;
  }

  std::string shown_path_;
  const CheckpointReader& reader_;
  std::map<std::string, Variable> store_;
  std::map<std::string, PartitionedVariable> partitioned_;
  std::vector<Assignment> assignments_;
};

}  // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> list_variables(
    const std::string& ckpt_dir_or_file) {
  std::unique_ptr<CheckpointReader> reader = open_checkpoint(checkpoint_path(ckpt_dir_or_file));
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const TensorInfo& info : reader->list()) out.emplace_back(info.name, info.shape);
  return out;
}

Tensor load_variable(const std::string& ckpt_dir_or_file, const std::string& name) {
  std::unique_ptr<CheckpointReader> reader = open_checkpoint(checkpoint_path(ckpt_dir_or_file));
  const TensorInfo info = reader->info(name);
  return tensor_from_data(reader->read(name), TensorShape(info.shape),
                          DeviceManager::instance().cpu());
}

void init_from_checkpoint(const std::string& ckpt_dir_or_file,
                          const std::map<std::string, CheckpointTarget>& assignment_map) {
  const std::string path = checkpoint_path(ckpt_dir_or_file);
  const std::unique_ptr<CheckpointReader> reader = open_checkpoint(path);
  Resolver r(ckpt_dir_or_file, *reader);
  for (const auto& [key, target] : assignment_map) {
    if (const Variable* v = std::get_if<Variable>(&target)) {
      r.add(key, Assignment{"", {*v}, false});
      continue;
    }
    if (const PartitionedVariable* pv = std::get_if<PartitionedVariable>(&target)) {
      r.add(key, Assignment{"", pv->variables(), true});
      continue;
    }
    const std::string& name = std::get<std::string>(target);
    if (std::optional<Assignment> a = r.by_name(name)) {
      r.add(key, std::move(*a));
      continue;
    }
    // A scope: "ckpt_scope/" -> "graph_scope/" ("/" the root).
    const size_t slash = name.rfind('/');
    const std::string scopes = slash == std::string::npos ? "" : name.substr(0, slash);
    if (key.empty() || key.back() != '/') {
      throw ValueError("Assignment map with scope only name " + scopes +
                       " should map to scope only " + key +
                       ". Should be 'scope/': 'other_scope/'. (" + varstate::quoted(name) +
                       " is no variable of the default graph's get_variable store.)");
    }
    for (const std::string& var_name : r.scope_variables(scopes)) {
      std::string tensor = var_name.substr(scopes.size());
      if (name != "/") tensor = tensor.substr(1);
      if (key != "/") tensor = key + tensor;
      if (!tensor.empty() && tensor.back() == '/') tensor.pop_back();
      const std::string relative =
          var_name.size() > scopes.size() + 1 ? var_name.substr(scopes.size() + 1) : var_name;
      r.add(tensor, *r.by_name(var_name), " (" + relative + " in " + key + ")");
    }
  }
  // Everything checked: now the initializers change.
  auto shared = std::make_shared<LazyReader>(path);
  for (Assignment& a : r.assignments()) {
    for (Variable& v : a.vars) {
      const std::optional<TensorSlice> slice =
          a.sliced ? std::optional<TensorSlice>(slice_of(*v.save_slice_info())) : std::nullopt;
      internal::replace_initial_value_fn(
          v, [shared, tensor = a.tensor, slice, shape = v.shape(), device = &v.device()] {
            const CheckpointReader& ckpt = shared->get();
            return tensor_from_data(slice ? ckpt.read_slice(tensor, *slice) : ckpt.read(tensor),
                                    shape, *device);
          });
    }
  }
}

}  // namespace varstate
