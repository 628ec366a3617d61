#include "varstate/saver.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "base/logging.h"
#include "checkpoint/checkpoint_chain.h"
#include "checkpoint/checkpoint_files.h"
#include "checkpoint/file_system.h"
#include "checkpoint/keyed_checkpoint.h"
#include "checkpoint/meta_graph_internal.h"
#include "checkpoint/save_pipeline.h"
#include "checkpoint/saver_io_internal.h"
#include "checkpoint/saver_restore_internal.h"
#include "checkpoint/tensor_bundle.h"
#include "checkpoint/unsynced_file_system.h"
#include "runtime/keyed_storage.h"
#include "runtime/variable_access.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/checkpoint_state.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/meta_graph.h"

namespace varstate {
namespace {

double system_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

int64_t step_value(const GlobalStep& step) {
  if (const auto* i = std::get_if<int64_t>(&step)) return *i;
  const Variable& v = std::get<Variable>(step);
  Tensor host = v.value().to_host();
  if (host.num_elements() != 1) {
    throw InvalidArgumentError("global_step variable " + quoted(v.op_name()) +
                               " must be a scalar, has shape " + host.shape().to_string());
  }
  if (host.dtype() == DType::kInt32) return host.scalar<int32_t>();
  if (host.dtype() == DType::kInt64) return host.scalar<int64_t>();
  throw TypeError("global_step variable " + quoted(v.op_name()) + " must be int32 or int64, is " +
                  std::string(dtype_name(host.dtype())));
}

}  // namespace

// ---------------------------------------------------------------------------
// SaveHandle

struct SaveHandle::State {
  std::optional<std::string> path;
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;

  void finish(std::exception_ptr e) {
    std::lock_guard lock(mu);
    error = std::move(e);
    done = true;
    cv.notify_all();
  }
};

SaveHandle::SaveHandle() : state_(std::make_shared<State>()) { state_->done = true; }

const std::optional<std::string>& SaveHandle::path() const { return state_->path; }

const std::optional<std::string>& SaveHandle::wait() const {
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
  return state_->path;
}

bool SaveHandle::done() const {
  std::lock_guard lock(state_->mu);
  return state_->done;
}

// ---------------------------------------------------------------------------
// Saver::Impl

struct Saver::Impl {
  SaverOptions options;
  Graph* graph = nullptr;
  FileSystem* fs = nullptr;
  std::unique_ptr<FileSystem> unsynced_fs;  // fs without syncs, when !options.sync
  std::function<double()> clock;

  bool built = false;
  bool empty = false;
  std::vector<Item> items;
  SaverDef def;

  // Serializes saves and restores.
  std::mutex op_mu;
  std::thread worker;  // the pending asynchronous save, if any

  // The steps of a save, its chain and the checkpoints kept.
  std::unique_ptr<internal::SavePipeline> pipeline;

  void wait_pending() {
    if (worker.joinable()) worker.join();
  }

  void build();
  void check_built(const char* what) const;
  std::map<std::string, std::vector<size_t>> items_by_device() const;
  // The steps of Saver::save.
  void check_initialized(const std::string& checkpoint) const;
  internal::SaveRequest request_for(const std::string& save_path, const std::string& checkpoint,
                                    const SaveOptions& options) const;
  // Snapshots the variables, then finishes `job` on `worker`, reporting to
  // `state`.
  void save_in_background(std::shared_ptr<SaveHandle::State> state, internal::SaveJob job);
  void restore(const std::string& save_path);
};

void Saver::Impl::check_built(const char* what) const {
  if (!built) {
    throw FailedPreconditionError(
        std::string(what) +
        ": the saver was created with defer_build and "
        "build() has not been called (save and restore ops weren't built)");
  }
}

namespace {

// The items of `var` under `key`: its value, or a dynamic variable's keys
// and rows.
void push_item(std::vector<Saver::Item>& out, const std::string& key, const Variable& var) {
  using Part = Saver::Part;
  if (const internal::KeyedStorage* keyed = internal::keyed_storage(var)) {
    out.push_back({key + internal::kKeysSuffix, var, std::nullopt, Part::kKeys});
    out.push_back({key + internal::kValuesSuffix, var, std::nullopt, Part::kRows});
    if (keyed->member() == 0 && keyed->table().tracking()) {
      out.push_back({key + internal::kVersionsSuffix, var, std::nullopt, Part::kVersions});
      out.push_back({key + internal::kCountsSuffix, var, std::nullopt, Part::kCounts});
    }
    return;
  }
  out.push_back({key, var, var.save_slice_info()});
}

// The saver's items from options.var_list, or the graph's global variables,
// in list order; a variable may appear once.
std::vector<Saver::Item> items_from_var_list(const SaverOptions& options, Graph& graph) {
  using Item = Saver::Item;
  std::vector<Item> out;
  if (options.var_list &&
      std::holds_alternative<std::map<std::string, Variable>>(*options.var_list)) {
    const auto& m = std::get<std::map<std::string, Variable>>(*options.var_list);
    std::unordered_map<const void*, std::string> keys;  // each variable's key
    for (const auto& [key, var] : m) {
      if (key.empty()) throw ValueError("var_list holds an empty checkpoint key");
      if (auto [it, added] = keys.emplace(internal::identity(var), key); !added) {
        throw ValueError(
            "The same saveable will be restored with two names: " + quoted(it->second) + " and " +
            quoted(key) + " (variable " + quoted(var.op_name()) + ")");
      }
      push_item(out, key, var);
    }
  } else {
    std::vector<Variable> list = options.var_list
                                     ? std::get<std::vector<Variable>>(*options.var_list)
                                     : graph.get_collection_variables(GraphKeys::GLOBAL_VARIABLES);
    std::unordered_set<const void*> seen;
    for (const Variable& var : list) {
      if (!seen.insert(internal::identity(var)).second) {
        throw ValueError("The variable " + quoted(var.op_name()) + " appears twice in var_list");
      }
      const auto& slice = var.save_slice_info();
      push_item(out, slice ? slice->full_name : var.op_name(), var);
    }
  }
  return out;
}

// Sorts the items by key and checks the keys: unique for whole tensors;
// slices of one tensor share a key but must not repeat a slice or mix with
// a whole tensor, and their save_slice_info must be consistent.
void sort_and_check_keys(std::vector<Saver::Item>& out) {
  using Item = Saver::Item;
  std::sort(out.begin(), out.end(), [](const Item& a, const Item& b) {
    if (a.key != b.key) return a.key < b.key;
    return (a.slice ? a.slice->var_offset : std::vector<int64_t>{}) <
           (b.slice ? b.slice->var_offset : std::vector<int64_t>{});
  });
  for (size_t i = 1; i < out.size(); ++i) {
    const Item& a = out[i - 1];
    const Item& b = out[i];
    if (a.key != b.key) continue;
    if (!a.slice && !b.slice)
      throw ValueError("At least two variables have the same name: " + a.key);
    if (!a.slice || !b.slice)
      throw ValueError("Mixing slices and non-slices with the same name: " + a.key);
    if (a.slice->full_shape != b.slice->full_shape) {
      throw ValueError("Partitions of " + quoted(a.key) + " disagree on the full shape: " +
                       shape_string(a.slice->full_shape) + " (" + a.variable.op_name() + ") vs " +
                       shape_string(b.slice->full_shape) + " (" + b.variable.op_name() + ")");
    }
    if (a.slice->var_offset == b.slice->var_offset) {
      throw ValueError("The same slice " + shape_string(a.slice->var_offset) + " of " +
                       quoted(a.key) + " appears twice: " + quoted(a.variable.op_name()) + " and " +
                       quoted(b.variable.op_name()));
    }
  }
  for (const Item& item : out) {
    if (item.slice && (item.slice->var_offset.size() != item.slice->full_shape.size() ||
                       item.slice->var_shape.size() != item.slice->full_shape.size())) {
      throw ValueError("variable " + quoted(item.variable.op_name()) +
                       " has an inconsistent save_slice_info: "
                       "full shape " +
                       shape_string(item.slice->full_shape) + ", offset " +
                       shape_string(item.slice->var_offset) + ", shape " +
                       shape_string(item.slice->var_shape));
    }
  }
}

// The name scope of the saver's ops: the one of saver_def's filename
// tensor, else a fresh one named after options.name.
std::string saver_scope(const SaverOptions& options, Graph& graph) {
  std::string scope;
  if (options.saver_def && !options.saver_def->filename_tensor_name.empty()) {
    scope = options.saver_def->filename_tensor_name;
    auto slash = scope.rfind('/');
    scope = slash == std::string::npos ? std::string("save") : scope.substr(0, slash);
  } else {
    scope = graph.unique_name(options.name.empty() ? "save" : options.name);
  }
  return scope;
}

// The SaverDef: options.saver_def (LEGACY read as V2), else one from the
// options; its tensor and op names in `scope`.
SaverDef make_saver_def(const SaverOptions& options, const std::string& scope) {
  SaverDef d;
  if (options.saver_def) {
    d = *options.saver_def;
    if (d.version == CheckpointFormatVersion::kLegacy) {
      logger().warn("saver_def {} asks for checkpoint format version LEGACY; writing V2",
                    d.filename_tensor_name);
      d.version = CheckpointFormatVersion::kV2;
    }
  } else {
    d.max_to_keep = options.max_to_keep;
    d.sharded = options.sharded;
    d.keep_checkpoint_every_n_hours = static_cast<float>(options.keep_checkpoint_every_n_hours);
    d.version = options.write_version;
  }
  d.filename_tensor_name = scope + "/Const:0";
  d.save_tensor_name = scope + (d.sharded ? "/Identity:0" : "/control_dependency:0");
  d.restore_op_name = scope + "/restore_all";
  return d;
}

}  // namespace

void Saver::Impl::build() {
  if (built) return;
  if (options.write_version == CheckpointFormatVersion::kLegacy) {
    throw InvalidArgumentError("Saver: write_version must be V1 or V2, got LEGACY");
  }
  std::vector<Item> out = items_from_var_list(options, *graph);
  sort_and_check_keys(out);
  if (out.empty() && !options.allow_empty) throw ValueError("No variables to save");
  const SaverDef d = make_saver_def(options, saver_scope(options, *graph));

  items = std::move(out);
  empty = items.empty();
  def = d;
  pipeline->configure({.items = items,
                       .writes = items,
                       .saver_def = def,
                       .graph = graph,
                       .format = def.version,
                       .staging_buffer_bytes = options.staging_buffer_bytes,
                       .max_to_keep = def.max_to_keep,
                       .keep_every_n_hours = static_cast<double>(def.keep_checkpoint_every_n_hours),
                       .clock = clock,
                       .save_relative_paths = options.save_relative_paths,
                       .max_deltas_per_base = options.max_deltas_per_base,
                       .max_delta_fraction = options.max_delta_fraction});
  built = true;
}

// ---------------------------------------------------------------------------
// Saving

std::map<std::string, std::vector<size_t>> Saver::Impl::items_by_device() const {
  std::map<std::string, std::vector<size_t>> by_device;
  for (size_t i = 0; i < items.size(); ++i) by_device[items[i].variable.placement()].push_back(i);
  return by_device;
}

internal::SaveRequest Saver::Impl::request_for(const std::string& save_path,
                                               const std::string& checkpoint,
                                               const SaveOptions& save_options) const {
  internal::SaveRequest request{.save_path = save_path,
                                .checkpoint = checkpoint,
                                .latest_filename = save_options.latest_filename,
                                .write_meta_graph = save_options.write_meta_graph,
                                .meta_graph_suffix = save_options.meta_graph_suffix,
                                .incremental = save_options.incremental,
                                .sharded = def.sharded};
  if (def.sharded) {
    // One shard per device, in the order of the devices' canonical names.
    for (auto& [device, which] : items_by_device()) request.shards.push_back(std::move(which));
  } else {
    request.add_shard_of_all(items.size());
  }
  return request;
}

// ---------------------------------------------------------------------------
// Restoring

namespace {

using internal::plan_read_groups;
using internal::plan_restore;
using internal::RestoreStep;

Tensor read_step(const RestoreStep& step, const CheckpointReader& reader) {
  const Saver::Item& item = *step.item;
  Device& device = item.variable.device();
  // The fast path: a V2 tensor stored whole, read straight into its buffer
  // (a host buffer first for a GPU variable, then one staged copy).
  // A chain (incremental checkpoint) likewise, its delta rows applied in
  // place; a partition reads only its region of the base and deltas.
  const auto* bundle = dynamic_cast<const BundleReader*>(&reader);
  const auto* chain = dynamic_cast<const ChainReader*>(&reader);
  if (!step.region && item.variable.dtype() != DType::kString && (bundle || chain)) {
    Tensor host(item.variable.dtype(), step.shape,
                device.is_cpu() ? device : DeviceManager::instance().cpu());
    std::span<std::byte> dst(static_cast<std::byte*>(host.raw_data()), host.nbytes());
    if (bundle ? bundle->read_into(item.key, dst) : chain->read_into(item.key, dst)) {
      return host.on(device);
    }
  }
  if (chain && step.region) {
    return tensor_from_data(chain->read_region(item.key, *step.region), step.shape, device);
  }
  TensorData data = step.region ? reader.read_slice(item.key, *step.region) : reader.read(item.key);
  return tensor_from_data(data, step.shape, device);
}

void assign_restored(const Saver::Item& item, const Tensor& value) {
  std::lock_guard lock(internal::update_mutex(item.variable));
  Variable var = item.variable;
  internal::set_value(var, value);
}

// Runs body(group) for each group on its own thread (inline for one group)
// and rethrows the first error.
template <typename Body>
void for_each_group(size_t num_groups, const Body& body) {
  if (num_groups == 1) {
    body(size_t{0});
    return;
  }
  std::vector<std::exception_ptr> errors(num_groups);
  std::vector<std::thread> threads;
  for (size_t g = 0; g < num_groups; ++g) {
    threads.emplace_back([&, g] {
      try {
        body(g);
      } catch (...) {
        errors[g] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace

void Saver::Impl::restore(const std::string& save_path) {
  std::unique_ptr<CheckpointReader> reader = internal::open_for_restore(save_path, fs);

  // 1. Validate everything before reading data. Dynamic variables are read
  // and checked whole here, and change with the others at the end.
  std::vector<RestoreStep> steps;
  steps.reserve(items.size());
  for (const Item& item : items) {
    if (item.part == Part::kValue) steps.push_back(plan_restore(item, *reader, options.reshape));
  }
  internal::KeyedRestore keyed(items, *reader);

  // 2. Per device, in parallel: read into fresh tensors on that device, in
  // the groups plan_read_groups() makes.
  const std::vector<std::vector<size_t>> groups =
      plan_read_groups(steps, options.restore_sequentially);

  if (!options.restore_sequentially) {
    std::vector<Tensor> restored(steps.size());
    for_each_group(groups.size(), [&](size_t g) {
      for (size_t i : groups[g]) restored[i] = read_step(steps[i], *reader);
    });
    // 3. Every tensor is read and checked: assign.
    for (size_t i = 0; i < steps.size(); ++i) assign_restored(*steps[i].item, restored[i]);
    keyed.apply();
    return;
  }
  // Sequentially: one variable's data in memory at a time. A first pass
  // verifies every tensor, so that the second, assigning pass cannot stop
  // half-way on corrupt data.
  for_each_group(groups.size(), [&](size_t g) {
    for (size_t i : groups[g]) read_step(steps[i], *reader);
  });
  for_each_group(groups.size(), [&](size_t g) {
    for (size_t i : groups[g]) assign_restored(*steps[i].item, read_step(steps[i], *reader));
  });
  keyed.apply();
}

// ---------------------------------------------------------------------------
// Saver

Saver::Saver(SaverOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.graph = options.graph ? options.graph : &get_default_graph();
  s.fs = options.file_system ? options.file_system : default_file_system();
  if (!options.sync) {
    s.unsynced_fs = internal::unsynced_file_system(*s.fs);
    s.fs = s.unsynced_fs.get();
  }
  s.clock = options.clock ? options.clock : std::function<double()>(system_seconds);
  s.pipeline = std::make_unique<internal::SavePipeline>(s.fs);
  s.options = std::move(options);
  if (!s.options.defer_build) s.build();
}

Saver::~Saver() {
  if (impl_) impl_->wait_pending();
}

Saver::Saver(Saver&&) noexcept = default;

Saver& Saver::operator=(Saver&& other) noexcept {
  if (this != &other) {
    if (impl_) impl_->wait_pending();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

void Saver::build() {
  std::lock_guard lock(impl_->op_mu);
  impl_->build();
}

bool Saver::is_built() const { return impl_->built; }

std::vector<Saver::Item> Saver::items() const { return impl_->items; }

namespace {

// Checks `latest_filename` against `save_path` (ValueError).
void check_latest_filename(const std::string& save_path, const std::string& latest_filename) {
  if (latest_filename.find('/') != std::string::npos) {
    throw ValueError("'latest_filename' must not contain path components: " +
                     quoted(latest_filename));
  }
  const std::string state_file = state_file_path(save_path, latest_filename);
  if (save_path == state_file) {
    throw ValueError("'latest_filename' collides with 'save_path': " +
                     quoted(basename_of(state_file)) + " and " + quoted(save_path));
  }
}

}  // namespace

void Saver::Impl::check_initialized(const std::string& checkpoint) const {
  for (const Item& item : items) {
    if (!item.variable.is_initialized()) {
      throw FailedPreconditionError("saving " + quoted(checkpoint) +
                                    ": Attempting to use uninitialized value " +
                                    item.variable.op_name());
    }
  }
}

void Saver::Impl::save_in_background(std::shared_ptr<SaveHandle::State> state,
                                     internal::SaveJob job) {
  // Snapshot: a device-side copy of each variable (of a delta's rows),
  // taken under its lock.
  std::vector<Tensor> snapshot = pipeline->snapshot(job);
  state->done = false;
  worker =
      std::thread([this, state, job = std::move(job), snapshot = std::move(snapshot)]() mutable {
        try {
          try {
            internal::LocalSave local;
            pipeline->finish(job, local, snapshot);
          } catch (...) {
            rethrow_with_context("saving checkpoint " + quoted(*state->path) + " (asynchronously)");
          }
          state->finish(nullptr);
        } catch (...) {
          state->finish(std::current_exception());
        }
      });
}

SaveHandle Saver::save(const Session& /*sess*/, const std::string& save_path,
                       const SaveOptions& options) {
  Impl& s = *impl_;
  std::lock_guard op(s.op_mu);
  s.check_built("Saver::save");
  s.wait_pending();
  check_latest_filename(save_path, options.latest_filename);
  if (s.empty) return SaveHandle();
  if (!s.fs->file_exists(dirname_of(save_path))) {
    throw ValueError("Parent directory of " + save_path + " doesn't exist, can't save.");
  }
  const std::string checkpoint =
      options.global_step ? save_path + "-" + std::to_string(step_value(*options.global_step))
                          : save_path;
  s.check_initialized(checkpoint);

  // Checks the paths, removes what crashed saves left, registers this save
  // while in flight, and plans a delta.
  internal::LocalSave local;
  internal::SaveJob job = s.pipeline->prepare(s.request_for(save_path, checkpoint, options), local);
  if (job.error) std::rethrow_exception(job.error);
  auto state = std::make_shared<SaveHandle::State>();
  state->path = job.recorded_path();
  if (options.async) {
    s.save_in_background(state, std::move(job));
    return SaveHandle(state);
  }
  try {
    s.pipeline->finish(job, local);
  } catch (...) {
    rethrow_with_context("saving checkpoint " + quoted(checkpoint));
  }
  state->done = true;  // wait() and done() treat every handle alike
  return SaveHandle(state);
}

void Saver::restore(const Session& /*sess*/, const std::string& save_path) {
  Impl& s = *impl_;
  std::lock_guard op(s.op_mu);
  s.check_built("Saver::restore");
  s.wait_pending();
  if (s.empty) return;
  s.restore(save_path);
}

std::vector<std::string> Saver::last_checkpoints() const { return impl_->pipeline->last_paths(); }

void Saver::set_last_checkpoints(const std::vector<std::string>& last_checkpoints) {
  std::vector<std::pair<std::string, double>> last;
  for (const auto& p : last_checkpoints)
    last.emplace_back(p, std::numeric_limits<double>::infinity());
  set_last_checkpoints_with_time(last);
}

void Saver::set_last_checkpoints_with_time(
    const std::vector<std::pair<std::string, double>>& last_checkpoints_with_time) {
  impl_->pipeline->set_last(last_checkpoints_with_time);
}

void Saver::recover_last_checkpoints(const std::vector<std::string>& checkpoint_paths) {
  std::vector<std::pair<std::string, double>> found;
  for (const std::string& path : checkpoint_paths) {
    std::vector<std::string> files;
    if (impl_->fs->file_exists(bundle_index_filename(path))) {
      files.push_back(bundle_index_filename(path));
    } else {
      files = match_files(*impl_->fs, path);
    }
    if (files.empty()) continue;
    struct stat st {};
    double mtime = 0;
    if (::stat(files.front().c_str(), &st) == 0) {
      mtime =
          static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
    }
    found.emplace_back(path, mtime);
    impl_->pipeline->record_needs_of(path);
  }
  set_last_checkpoints_with_time(found);
}

SaverDef Saver::as_saver_def() const {
  impl_->check_built("Saver::as_saver_def");
  return impl_->def;
}

Saver Saver::from_proto(const SaverDef& saver_def, Graph* graph) {
  return Saver(SaverOptions{.saver_def = saver_def, .graph = graph});
}

MetaGraphDef Saver::export_meta_graph(
    const std::string& filename, const std::optional<std::vector<std::string>>& collection_list,
    bool as_text) const {
  impl_->check_built("Saver::export_meta_graph");
  ExportMetaGraphOptions options{.filename = filename,
                                 .saver_def = impl_->def,
                                 .collection_list = collection_list,
                                 .as_text = as_text,
                                 .graph = impl_->graph,
                                 .file_system = impl_->fs};
  return export_meta_graph_for_items(options, impl_->items);
}

}  // namespace varstate
