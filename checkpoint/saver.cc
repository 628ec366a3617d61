#include "varstate/saver.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <limits>
#include <mutex>
#include <regex>
#include <thread>

#include "base/logging_internal.h"
#include "checkpoint/checkpoint_chain_internal.h"
#include "checkpoint/checkpoint_files.h"
#include "checkpoint/checkpoint_retention.h"
#include "checkpoint/delta_save_internal.h"
#include "checkpoint/file_system.h"
#include "checkpoint/live_save_internal.h"
#include "checkpoint/meta_graph_internal.h"
#include "checkpoint/saver_io_internal.h"
#include "checkpoint/saver_restore_internal.h"
#include "checkpoint/tensor_bundle.h"
#include "checkpoint/unsynced_file_system.h"
#include "checkpoint/v1_writer.h"
#include "runtime/gather_internal.h"
#include "runtime/variable_internal.h"
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

// The meta graph file of a recorded checkpoint path, which for a sharded V1
// checkpoint is the pattern of its files ("model-?????-of-00002").
std::string recorded_meta_graph(const std::string& path, const std::string& suffix) {
  static const std::regex kV1Shards("-\\?\\?\\?\\?\\?-of-[0-9]{5}$");
  return meta_graph_filename(std::regex_replace(path, kV1Shards, ""), suffix);
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

  // Which checkpoints are kept.
  mutable std::mutex mu;
  internal::CheckpointRetention retention;

  // Incremental saves: the chain the next delta extends (base first; the
  // last link is the previous save), unset when the next save must be a
  // base; per item, the generation of its dirty rows' last take.
  std::optional<std::vector<ChainRecordLink>> chain;
  std::string chain_dir;
  std::vector<uint64_t> generations;
  // The checkpoints each known delta needs (its links), and checkpoints
  // out of the retention list kept for a delta that needs them.
  std::map<std::string, std::vector<std::string>> needs;
  std::vector<std::string> deferred_deletions;

  void wait_pending() {
    if (worker.joinable()) worker.join();
  }

  void build();
  void check_built(const char* what) const;
  void write_checkpoint(const std::string& prefix, const std::vector<Tensor>& snapshot,
                        const internal::DeltaPlan* delta);
  void write_shard(const std::string& prefix, const std::vector<size_t>& which,
                   const std::vector<Tensor>& snapshot, const internal::DeltaPlan* delta,
                   bool with_record);
  // Takes every item's dirty rows (V2 saves) and plans a delta when
  // `incremental` and the chain allows one.
  std::shared_ptr<internal::DeltaPlan> plan_save(const std::string& checkpoint, bool incremental);
  // After `checkpoint` (a delta when `delta`) was written: the chain it
  // ends, recorded as the checkpoint's needs.
  std::vector<ChainRecordLink> chain_after(const std::string& checkpoint,
                                           const internal::DeltaPlan* delta);
  // Deletes `old` (out of the retention list) unless a kept delta needs it,
  // then the deferred ones no longer needed.
  void delete_unneeded(const std::string& old, const std::string& meta_graph_suffix);
  void write_v1(const std::string& prefix, const std::vector<Tensor>& snapshot);
  // The path a save to `prefix` records: the prefix, or for a sharded V1
  // checkpoint the pattern of its files ("model-?????-of-00002"), as
  // TensorFlow records it.
  std::string recorded_path(const std::string& prefix) const;
  std::map<std::string, std::vector<size_t>> items_by_device() const;
  void finish_save(const std::string& checkpoint, const SaveOptions& options);
  // Every file a save of `checkpoint` writes or replaces, the state file
  // included, for check_no_directory_in_the_way.
  std::vector<std::string> files_of_save(const std::string& checkpoint,
                                         const SaveOptions& options) const;
  // The steps of Saver::save.
  void check_initialized(const std::string& checkpoint) const;
  // Writes the checkpoint (from `snapshot`, or the live variables when
  // empty) and its meta graph, then records it.
  void save_files(const std::string& checkpoint, const SaveOptions& options,
                  const std::vector<Tensor>& snapshot, std::shared_ptr<internal::DeltaPlan> delta);
  // Snapshots the variables, then runs save_files on `worker`, reporting
  // to `state`; `live` stays registered until it ends.
  void save_in_background(std::shared_ptr<SaveHandle::State> state,
                          std::shared_ptr<internal::LiveSave> live, const std::string& checkpoint,
                          const SaveOptions& options, std::shared_ptr<internal::DeltaPlan> delta);
  void restore(const std::string& save_path);
  // After a restart: the links a recovered delta needs, read from its record.
  void record_needs_of(const std::string& checkpoint);
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

// The saver's items from options.var_list, or the graph's global variables,
// in list order; a variable may appear once.
std::vector<Saver::Item> items_from_var_list(const SaverOptions& options, Graph& graph) {
  using Item = Saver::Item;
  std::vector<Item> out;
  if (options.var_list &&
      std::holds_alternative<std::map<std::string, Variable>>(*options.var_list)) {
    const auto& m = std::get<std::map<std::string, Variable>>(*options.var_list);
    for (const auto& [key, var] : m) {
      if (key.empty()) throw ValueError("var_list holds an empty checkpoint key");
      for (const Item& other : out) {
        if (other.variable.same_as(var)) {
          throw ValueError(
              "The same saveable will be restored with two names: " + quoted(other.key) + " and " +
              quoted(key) + " (variable " + quoted(var.op_name()) + ")");
        }
      }
      out.push_back({key, var, var.save_slice_info()});
    }
  } else {
    std::vector<Variable> list = options.var_list
                                     ? std::get<std::vector<Variable>>(*options.var_list)
                                     : graph.get_collection_variables(GraphKeys::GLOBAL_VARIABLES);
    for (const Variable& var : list) {
      for (const Item& other : out) {
        if (other.variable.same_as(var)) {
          throw ValueError("The variable " + quoted(var.op_name()) + " appears twice in var_list");
        }
      }
      const auto& slice = var.save_slice_info();
      out.push_back({slice ? slice->full_name : var.op_name(), var, slice});
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
  retention.set_policy(def.max_to_keep, static_cast<double>(def.keep_checkpoint_every_n_hours),
                       clock());
  built = true;
}

// ---------------------------------------------------------------------------
// Saving

void Saver::Impl::write_shard(const std::string& prefix, const std::vector<size_t>& which,
                              const std::vector<Tensor>& snapshot, const internal::DeltaPlan* delta,
                              bool with_record) {
  BundleWriter writer(prefix, {.file_system = fs});
  StagingBuffers staging(options.staging_buffer_bytes);
  if (delta != nullptr && with_record) {
    const std::vector<std::string> record = chain_record_strings(delta->links);
    writer.add(kChainKey, TensorView{DType::kString,
                                     {static_cast<int64_t>(record.size())},
                                     {},
                                     std::span<const std::string>(record)});
  }
  for (size_t i : which) {
    const Item& item = items[i];
    const internal::ItemDelta* rows =
        delta != nullptr && !delta->items[i].whole ? &delta->items[i] : nullptr;
    if (!snapshot.empty()) {
      // An asynchronous save's snapshot holds the rows already gathered.
      if (rows != nullptr) {
        internal::write_item_rows(writer, item, *rows, snapshot[i], staging);
      } else {
        write_variable_tensor(writer, item.key, item.slice, snapshot[i], staging);
      }
      continue;
    }
    // A blocking save reads the live buffer under the variable's lock.
    std::lock_guard lock(internal::update_mutex(item.variable));
    if (rows != nullptr) {
      internal::write_item_rows(writer, item, *rows,
                                internal::gather_rows(item.variable.ref(), rows->rows), staging);
    } else {
      write_variable_tensor(writer, item.key, item.slice, item.variable.ref(), staging);
    }
  }
  writer.finish();
}

std::map<std::string, std::vector<size_t>> Saver::Impl::items_by_device() const {
  std::map<std::string, std::vector<size_t>> by_device;
  for (size_t i = 0; i < items.size(); ++i) by_device[items[i].variable.placement()].push_back(i);
  return by_device;
}

std::string Saver::Impl::recorded_path(const std::string& prefix) const {
  if (def.version != CheckpointFormatVersion::kV1 || !def.sharded) return prefix;
  const std::string first = sharded_prefix(prefix, 0, static_cast<int>(items_by_device().size()));
  return prefix + "-?????" + first.substr(prefix.size() + 6);  // "-00000" -> "-?????"
}

// TensorFlow's V1 format: one table file, or with `sharded` one per device
// ("<prefix>-0000i-of-0000n"). Everything is checked before a file is written.
void Saver::Impl::write_v1(const std::string& prefix, const std::vector<Tensor>& snapshot) {
  for (const Item& item : items) {
    if (!v1_supports_dtype(item.variable.dtype())) {
      throw UnimplementedError("saving " + quoted(item.variable.op_name()) +
                               " in the V1 format: it "
                               "cannot hold dtype " +
                               std::string(dtype_name(item.variable.dtype())) +
                               " (TensorFlow's SaveSlices neither); save V2");
    }
  }
  std::map<std::string, std::vector<size_t>> groups;
  if (def.sharded) {
    groups = items_by_device();
  } else {
    for (size_t i = 0; i < items.size(); ++i) groups[""].push_back(i);
  }
  const int n = static_cast<int>(groups.size());
  int shard = 0;
  for (const auto& [device, which] : groups) {
    V1Writer writer(def.sharded ? sharded_prefix(prefix, shard++, n) : prefix, fs);
    for (size_t i : which) {
      const Item& item = items[i];
      Tensor value;
      if (snapshot.empty()) {
        std::lock_guard lock(internal::update_mutex(item.variable));
        value = item.variable.ref().to_host();
      } else {
        value = snapshot[i].to_host();
      }
      if (item.slice) {
        writer.add_slice(item.key, item.slice->full_shape, slice_of(*item.slice), host_view(value));
      } else {
        writer.add(item.key, host_view(value));
      }
    }
    writer.finish();
  }
}

void Saver::Impl::write_checkpoint(const std::string& prefix, const std::vector<Tensor>& snapshot,
                                   const internal::DeltaPlan* delta) {
  if (def.version == CheckpointFormatVersion::kV1) return write_v1(prefix, snapshot);
  if (!def.sharded) {
    std::vector<size_t> all(items.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    write_shard(prefix, all, snapshot, delta, true);
    return;
  }
  // One shard per device, in the order of the devices' canonical names.
  const std::map<std::string, std::vector<size_t>> by_device = items_by_device();
  const int n = static_cast<int>(by_device.size());
  const std::string temp = temp_prefix_for(prefix);
  std::vector<std::string> shard_prefixes;
  std::vector<std::exception_ptr> errors(by_device.size());
  std::vector<std::thread> threads;
  int shard = 0;
  for (const auto& [device, which] : by_device) {
    shard_prefixes.push_back(sharded_prefix(temp, shard, n));
    threads.emplace_back(
        [this, &errors, &snapshot, delta, shard, p = shard_prefixes.back(), w = &which] {
          try {
            write_shard(p, *w, snapshot, delta, shard == 0);
          } catch (...) {
            errors[static_cast<size_t>(shard)] = std::current_exception();
          }
        });
    ++shard;
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) {
      remove_temp_dir(*fs, temp);
      std::rethrow_exception(e);
    }
  }
  try {
    merge_bundles(shard_prefixes, prefix, {.file_system = fs});
  } catch (...) {
    remove_temp_dir(*fs, temp);
    throw;
  }
}

void Saver::Impl::finish_save(const std::string& checkpoint, const SaveOptions& save_options) {
  // The list changes only once the state file names the new checkpoint, so
  // a failed update leaves the saver as it was.
  internal::CheckpointRetention next;
  {
    std::lock_guard lock(mu);
    next = retention;
  }
  // TensorFlow lists no checkpoint without max_to_keep.
  if (def.max_to_keep > 0) next.record(checkpoint, clock());
  update_checkpoint_state(dirname_of(checkpoint), checkpoint, next.last_paths(),
                          save_options.latest_filename,
                          {.save_relative_paths = options.save_relative_paths, .file_system = fs});
  std::lock_guard lock(mu);
  retention = std::move(next);
  for (const std::string& old : retention.take_deletions()) {
    delete_unneeded(old, save_options.meta_graph_suffix);
  }
}

void Saver::Impl::delete_unneeded(const std::string& old, const std::string& meta_graph_suffix) {
  // Candidates: `old`, the links it needed (a recovered delta's base may
  // never have been listed here), and what was deferred before.
  std::vector<std::string> candidates = std::move(deferred_deletions);
  candidates.push_back(old);
  if (auto it = needs.find(old); it != needs.end()) {
    candidates.insert(candidates.end(), it->second.begin(), it->second.end());
    needs.erase(it);
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  deferred_deletions.clear();
  std::vector<std::string> unneeded;
  for (const std::string& path : candidates) {
    const bool needed = std::any_of(needs.begin(), needs.end(), [&](const auto& entry) {
      return std::find(entry.second.begin(), entry.second.end(), path) != entry.second.end();
    });
    if (needed) {
      deferred_deletions.push_back(path);
    } else if (path == old || checkpoint_exists(path, fs)) {
      unneeded.push_back(path);
    }
  }
  // A chain goes newest first: a kill part-way leaves its older links whole.
  for (const std::string& path : newest_links_first(*fs, std::move(unneeded))) {
    delete_checkpoint_files(*fs, path, recorded_meta_graph(path, meta_graph_suffix));
  }
}

std::shared_ptr<internal::DeltaPlan> Saver::Impl::plan_save(const std::string& checkpoint,
                                                            bool incremental) {
  if (!incremental) return nullptr;
  if (def.version != CheckpointFormatVersion::kV2) {
    throw InvalidArgumentError("saving " + quoted(checkpoint) +
                               " incrementally: deltas are V2 tensor bundles, the saver "
                               "writes V1");
  }
  generations.resize(items.size(), 0);
  std::vector<internal::DirtyRows::Taken> taken;
  std::vector<TensorShape> shapes;
  for (size_t i = 0; i < items.size(); ++i) {
    std::lock_guard lock(internal::update_mutex(items[i].variable));
    shapes.push_back(items[i].variable.shape());
    const int64_t rows = shapes.back().rank() > 0 ? shapes.back().dim(0) : 1;
    taken.push_back(internal::dirty_rows(items[i].variable).take(rows, generations[i]));
    generations[i] = taken.back().generation;
  }
  const bool extends =
      chain && static_cast<int>(chain->size()) <= options.max_deltas_per_base &&
      std::none_of(chain->begin(), chain->end(),
                   [&](const ChainRecordLink& l) { return l.name == basename_of(checkpoint); }) &&
      dirname_of(checkpoint) == chain_dir;
  if (!extends) return nullptr;
  auto plan = std::make_shared<internal::DeltaPlan>();
  plan->links = *chain;
  int64_t delta = 0;
  int64_t full = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    plan->items.push_back(internal::plan_item_delta(items[i], shapes[i], std::move(taken[i])));
    delta += internal::delta_bytes(items[i], shapes[i], plan->items.back());
    full += internal::full_bytes(items[i], shapes[i]);
  }
  if (static_cast<double>(delta) > options.max_delta_fraction * static_cast<double>(full)) {
    return nullptr;
  }
  return plan;
}

std::vector<ChainRecordLink> Saver::Impl::chain_after(const std::string& checkpoint,
                                                      const internal::DeltaPlan* delta) {
  std::vector<ChainRecordLink> links = delta ? delta->links : std::vector<ChainRecordLink>{};
  links.push_back({basename_of(checkpoint), index_checksum(*fs, checkpoint)});
  return links;
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

  // 1. Validate everything before reading data.
  std::vector<RestoreStep> steps;
  steps.reserve(items.size());
  for (const Item& item : items) steps.push_back(plan_restore(item, *reader, options.reshape));

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

std::vector<std::string> Saver::Impl::files_of_save(const std::string& checkpoint,
                                                    const SaveOptions& save_options) const {
  std::vector<std::string> files{
      state_file_path(checkpoint, save_options.latest_filename),
      save_options.write_meta_graph
          ? meta_graph_filename(checkpoint, save_options.meta_graph_suffix)
          : ""};
  const int n = def.sharded ? static_cast<int>(items_by_device().size()) : 1;
  if (def.version == CheckpointFormatVersion::kV1) {
    for (int k = 0; k < n; ++k)
      files.push_back(def.sharded ? sharded_prefix(checkpoint, k, n) : checkpoint);
  } else {
    for (const std::string& f : v2_checkpoint_files(checkpoint, n, "")) files.push_back(f);
  }
  std::erase(files, std::string());
  return files;
}

void Saver::Impl::save_files(const std::string& checkpoint, const SaveOptions& save_options,
                             const std::vector<Tensor>& snapshot,
                             std::shared_ptr<internal::DeltaPlan> delta) {
  const std::string recorded = recorded_path(checkpoint);
  // Saving again to an existing checkpoint replaces it in place; anything
  // else that fails leaves nothing new behind.
  const bool replacing = checkpoint_exists(recorded, fs);
  // Until an incremental save succeeds, the next one must be a base.
  std::optional<std::vector<ChainRecordLink>> next_chain;
  if (save_options.incremental) chain.reset();
  try {
    write_checkpoint(checkpoint, snapshot, delta.get());
    if (save_options.incremental) {
      next_chain = chain_after(checkpoint, delta.get());
      std::vector<std::string> links;
      for (const ChainRecordLink& l : *next_chain) {
        links.push_back(join_path(dirname_of(checkpoint), l.name));
      }
      std::lock_guard lock(mu);
      needs[recorded] = std::move(links);
    }
    if (save_options.write_meta_graph) {
      ExportMetaGraphOptions meta{
          .filename = meta_graph_filename(checkpoint, save_options.meta_graph_suffix),
          .saver_def = def,
          .graph = graph,
          .file_system = fs};
      export_meta_graph_for_items(meta, items);
    }
    finish_save(recorded, save_options);
    if (save_options.incremental) {
      chain = std::move(next_chain);
      chain_dir = dirname_of(checkpoint);
    }
  } catch (...) {
    {
      std::lock_guard lock(mu);
      needs.erase(recorded);
    }
    if (!replacing) {
      remove_failed_checkpoint(*fs, recorded,
                               save_options.write_meta_graph
                                   ? recorded_meta_graph(recorded, save_options.meta_graph_suffix)
                                   : "",
                               save_options.latest_filename);
    }
    throw;
  }
}

void Saver::Impl::save_in_background(std::shared_ptr<SaveHandle::State> state,
                                     std::shared_ptr<internal::LiveSave> live,
                                     const std::string& checkpoint, const SaveOptions& save_options,
                                     std::shared_ptr<internal::DeltaPlan> delta) {
  // Snapshot: a device-side copy of each variable (of a delta's rows),
  // taken under its lock.
  std::vector<Tensor> snapshot;
  snapshot.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    std::lock_guard lock(internal::update_mutex(items[i].variable));
    if (delta && !delta->items[i].whole) {
      snapshot.push_back(internal::gather_rows(items[i].variable.ref(), delta->items[i].rows));
    } else {
      snapshot.push_back(items[i].variable.ref().clone());
    }
  }
  state->done = false;
  worker = std::thread(
      [this, state, live, checkpoint, save_options, delta, snapshot = std::move(snapshot)] {
        try {
          try {
            save_files(checkpoint, save_options, snapshot, delta);
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
  check_no_directory_in_the_way(*s.fs, "saving checkpoint " + quoted(checkpoint),
                                s.files_of_save(checkpoint, options));

  // Removes what crashed saves left, then registers this one while in flight.
  auto live = std::make_shared<internal::LiveSave>(
      *s.fs, save_path, checkpoint, state_file_path(save_path, options.latest_filename));
  auto state = std::make_shared<SaveHandle::State>();
  state->path = s.recorded_path(checkpoint);
  std::shared_ptr<internal::DeltaPlan> delta = s.plan_save(checkpoint, options.incremental);
  if (options.async) {
    s.save_in_background(state, std::move(live), checkpoint, options, std::move(delta));
    return SaveHandle(state);
  }
  try {
    s.save_files(checkpoint, options, {}, std::move(delta));
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

std::vector<std::string> Saver::last_checkpoints() const {
  std::lock_guard lock(impl_->mu);
  return impl_->retention.last_paths();
}

void Saver::set_last_checkpoints(const std::vector<std::string>& last_checkpoints) {
  std::vector<std::pair<std::string, double>> last;
  for (const auto& p : last_checkpoints)
    last.emplace_back(p, std::numeric_limits<double>::infinity());
  set_last_checkpoints_with_time(last);
}

void Saver::set_last_checkpoints_with_time(
    const std::vector<std::pair<std::string, double>>& last_checkpoints_with_time) {
  std::lock_guard lock(impl_->mu);
  impl_->retention.set_last(last_checkpoints_with_time);
}

void Saver::Impl::record_needs_of(const std::string& checkpoint) {
  if (!fs->file_exists(bundle_index_filename(checkpoint))) return;
  try {
    std::optional<std::vector<ChainRecordLink>> record =
        read_chain_record(BundleReader(checkpoint, fs));
    std::vector<std::string> links;
    if (!record) record.emplace();  // a full checkpoint needs itself
    for (const ChainRecordLink& l : *record)
      links.push_back(join_path(dirname_of(checkpoint), l.name));
    links.push_back(checkpoint);
    std::lock_guard lock(mu);
    needs[checkpoint] = std::move(links);
  } catch (const Error& e) {
    logger().warn("recovering checkpoint {}: {}", checkpoint, e.what());
  }
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
    impl_->record_needs_of(path);
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
