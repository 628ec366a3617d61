#include "varstate/distributed_saver.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <thread>

#include "checkpoint/checkpoint_chain_internal.h"
#include "checkpoint/checkpoint_files.h"
#include "checkpoint/checkpoint_retention.h"
#include "checkpoint/delta_save_internal.h"
#include "checkpoint/file_system.h"
#include "checkpoint/live_save_internal.h"
#include "checkpoint/meta_graph_internal.h"
#include "checkpoint/restore_share.h"
#include "checkpoint/saver_io_internal.h"
#include "checkpoint/tensor_bundle.h"
#include "distributed/cluster_internal.h"
#include "distributed/distributed_delta.h"
#include "varstate/checkpoint_state.h"
#include "varstate/error.h"
#include "varstate/graph.h"

namespace varstate {
namespace {

using internal::ClusterAccess;

// The tasks whose flag is 0, e.g. "/job:ps/task:1, /job:worker/task:0".
std::string failed_tasks(Cluster& cluster, const std::vector<int>& ok) {
  std::string out;
  for (size_t r = 0; r < ok.size(); ++r) {
    if (ok[r]) continue;
    if (!out.empty()) out += ", ";
    out += cluster.task_name_of_rank(static_cast<int>(r));
  }
  return out;
}

bool all_ok(const std::vector<int>& ok) {
  for (int v : ok) {
    if (!v) return false;
  }
  return true;
}

// A list of paths as one string for broadcast: each "<length>:<path>".
std::string encode_paths(const std::vector<std::string>& paths) {
  std::string out;
  for (const std::string& p : paths) out += std::to_string(p.size()) + ":" + p;
  return out;
}

std::vector<std::string> decode_paths(const std::string& encoded) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < encoded.size()) {
    const size_t colon = encoded.find(':', pos);
    const size_t n = std::stoul(encoded.substr(pos, colon - pos));
    out.push_back(encoded.substr(colon + 1, n));
    pos = colon + 1 + n;
  }
  return out;
}

// A task's vote in a restore: "1" and its range checksums (little-endian),
// or "0" when its read failed.
std::string encode_vote(bool ok, const std::vector<uint32_t>& checksums) {
  std::string out(ok ? "1" : "0");
  for (uint32_t c : checksums) {
    for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>((c >> (8 * b)) & 0xff));
  }
  return out;
}

std::vector<uint32_t> decode_checksums(const std::string& vote) {
  std::vector<uint32_t> out;
  for (size_t i = 1; i + 4 <= vote.size(); i += 4) {
    uint32_t c = 0;
    for (int b = 0; b < 4; ++b) c |= uint32_t{static_cast<unsigned char>(vote[i + b])} << (8 * b);
    out.push_back(c);
  }
  return out;
}

// The shards of one save: one per task that writes, in rank order.
struct ShardPlan {
  std::vector<std::string> prefixes;
  int mine = -1;  // this task's shard, -1 when it writes none
};

}  // namespace

struct DistributedSaver::Impl {
  Cluster* cluster = nullptr;
  DistributedSaverOptions options;
  FileSystem* fs = nullptr;
  std::vector<Saver::Item> items;           // every variable's key and slice
  std::vector<Saver::Item> writes;          // what this task writes
  internal::CheckpointRetention retention;  // recorded checkpoints (rank 0)
  Graph* graph = nullptr;
  SaverDef saver_def;
  // Incremental saves. Per item of `writes`, the generation of its local
  // dirty rows' last take. Rank 0 only: the chain the next delta extends
  // (base first; the last link is the previous save), unset when the next
  // save must be a base; the checkpoints each known checkpoint needs (its
  // links and itself), and those out of the retention list kept for a
  // checkpoint that needs them.
  std::vector<uint64_t> generations;
  std::optional<std::vector<ChainRecordLink>> chain;
  std::string chain_dir;
  std::map<std::string, std::vector<std::string>> needs;
  std::vector<std::string> deferred_deletions;

  std::string meta_graph_filename(const std::string& prefix) const {
    return prefix + "." + options.meta_graph_suffix;
  }

  // The steps of save().
  ShardPlan plan_shards(const std::string& temp);
  // Takes this task's changed rows; the plan of a delta when every task
  // agrees this save extends rank 0's chain (null: a base).
  // A failure to take them goes to `error` (the save then fails).
  std::shared_ptr<internal::DeltaPlan> plan_delta(const std::string& prefix,
                                                  std::exception_ptr& error);
  std::exception_ptr write_shard(const std::string& shard_prefix, const internal::DeltaPlan* delta,
                                 bool with_record) const;
  std::string commit(const std::string& prefix, const ShardPlan& shards, const std::string& temp,
                     const DistributedSaveOptions& save_options, const internal::DeltaPlan* delta);
  // Rank 0, after `prefix` was committed: the chain it ends and its needs.
  void record_chain(const std::string& prefix, const internal::DeltaPlan* delta);
  // Rank 0: what a checkpoint on disk needs, from its chain record.
  void record_needs_of(const std::string& prefix);
  // Rank 0: deletes `old` (out of the retention list) unless a kept
  // checkpoint needs it, then the deferred ones no longer needed.
  void delete_unneeded(const std::string& old);
  // Rank 0's `paths` (those that exist when `only_existing`) become every
  // task's list.
  void agree_on_last(const std::vector<std::string>& paths, bool only_existing);
};

DistributedSaver::DistributedSaver(Cluster& cluster, DistributedSaverOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.cluster = &cluster;
  m.fs = options.file_system ? options.file_system : default_file_system();
  Graph& graph = options.graph ? *options.graph : get_default_graph();
  // The keys and slices exactly as Saver assigns them (and its checks for
  // duplicates); by default the graph's global variables.
  SaverOptions key_options{.allow_empty = true, .graph = &graph, .file_system = m.fs};
  if (options.var_list) key_options.var_list = *options.var_list;
  Saver keys(std::move(key_options));
  m.items = keys.items();
  m.saver_def = keys.as_saver_def();
  m.graph = &graph;
  for (const Saver::Item& item : m.items) {
    const int owner = ClusterAccess::owner_rank(item.variable);
    if (owner == cluster.rank() || (owner < 0 && cluster.rank() == 0)) m.writes.push_back(item);
  }
  m.retention.set_policy(options.max_to_keep, std::numeric_limits<double>::infinity(), 0);
  m.options = std::move(options);
}

DistributedSaver::~DistributedSaver() = default;

std::vector<std::string> DistributedSaver::last_checkpoints() const {
  return impl_->retention.last_paths();
}

void DistributedSaver::Impl::agree_on_last(const std::vector<std::string>& paths,
                                           bool only_existing) {
  std::string decided;
  if (cluster->rank() == 0) {
    std::vector<std::string> kept;
    for (const std::string& p : paths) {
      if (!only_existing || checkpoint_exists(p, fs)) kept.push_back(p);
    }
    decided = encode_paths(kept);
  }
  std::vector<internal::CheckpointRetention::Entry> last;
  for (const std::string& p : decode_paths(ClusterAccess::broadcast(*cluster, decided, 0))) {
    last.emplace_back(p, 0.0);
    if (cluster->rank() == 0) record_needs_of(p);
  }
  retention.set_last(std::move(last));
}

void DistributedSaver::set_last_checkpoints(const std::vector<std::string>& last_checkpoints) {
  impl_->agree_on_last(last_checkpoints, false);
}

void DistributedSaver::recover_last_checkpoints(const std::vector<std::string>& checkpoint_paths) {
  impl_->agree_on_last(checkpoint_paths, true);
}

ShardPlan DistributedSaver::Impl::plan_shards(const std::string& temp) {
  const std::vector<int> writers = ClusterAccess::allgather(*cluster, writes.empty() ? 0 : 1);
  int n = 0;
  for (int w : writers) n += w;
  ShardPlan plan;
  for (size_t r = 0, k = 0; r < writers.size(); ++r) {
    if (!writers[r]) continue;
    if (static_cast<int>(r) == cluster->rank()) plan.mine = static_cast<int>(k);
    ++k;
  }
  for (int k = 0; k < n; ++k) plan.prefixes.push_back(sharded_prefix(temp, k, n));
  return plan;
}

std::shared_ptr<internal::DeltaPlan> DistributedSaver::Impl::plan_delta(const std::string& prefix,
                                                                        std::exception_ptr& error) {
  // A base takes the marks too: the next delta holds what changed since.
  std::vector<internal::DirtyRows::Taken> taken;
  try {
    taken = internal::take_changed_rows(writes, generations);
  } catch (...) {
    error = std::current_exception();
  }
  std::string links;
  if (cluster->rank() == 0 && chain &&
      static_cast<int>(chain->size()) <= options.max_deltas_per_base &&
      dirname_of(prefix) == chain_dir &&
      std::none_of(chain->begin(), chain->end(),
                   [&](const ChainRecordLink& l) { return l.name == basename_of(prefix); })) {
    links = internal::encode_links(*chain);
  }
  links = ClusterAccess::broadcast(*cluster, links, 0);
  if (links.empty()) return nullptr;
  auto plan = std::make_shared<internal::DeltaPlan>();
  plan->links = internal::decode_links(links);
  double delta = 0, full = 0;
  for (size_t i = 0; i < taken.size(); ++i) {
    const TensorShape shape = writes[i].variable.shape();
    plan->items.push_back(
        internal::plan_item_delta(writes[i], shape, std::move(taken[i]), /*owner_marks=*/true));
    delta += static_cast<double>(internal::delta_bytes(writes[i], shape, plan->items.back()));
    full += static_cast<double>(internal::full_bytes(writes[i], shape));
  }
  const bool small = !error && delta <= options.max_delta_fraction * full;
  if (!all_ok(ClusterAccess::allgather(*cluster, small ? 1 : 0))) return nullptr;
  return plan;
}

std::exception_ptr DistributedSaver::Impl::write_shard(const std::string& shard_prefix,
                                                       const internal::DeltaPlan* delta,
                                                       bool with_record) const {
  try {
    BundleWriter writer(shard_prefix, {.file_system = fs});
    StagingBuffers unused(0);  // the values are host tensors
    if (delta != nullptr && with_record) {
      const std::vector<std::string> record = chain_record_strings(delta->links);
      writer.add(kChainKey, TensorView{DType::kString,
                                       {static_cast<int64_t>(record.size())},
                                       {},
                                       std::span<const std::string>(record)});
    }
    for (size_t i = 0; i < writes.size(); ++i) {
      const Saver::Item& item = writes[i];
      if (delta != nullptr && !delta->items[i].whole) {
        internal::write_item_rows(writer, item, delta->items[i],
                                  internal::read_rows(item, delta->items[i].rows), unused);
      } else {
        write_variable_tensor(writer, item.key, item.slice, item.variable.read_value().to_host(),
                              unused);
      }
    }
    writer.finish();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

// Rank 0: the merged index, the meta graph, then the state file; then the
// checkpoints beyond max_to_keep go. Returns what failed ("" on success).
std::string DistributedSaver::Impl::commit(const std::string& prefix, const ShardPlan& shards,
                                           const std::string& temp,
                                           const DistributedSaveOptions& save_options,
                                           const internal::DeltaPlan* delta) {
  const std::string& latest_filename = save_options.latest_filename;
  // Until an incremental save succeeds, the next one must be a base.
  if (save_options.incremental) chain.reset();
  const std::string meta = options.write_meta_graph ? meta_graph_filename(prefix) : "";
  const bool replacing = checkpoint_exists(prefix, fs);
  try {
    const int num_shards = std::max<int>(1, static_cast<int>(shards.prefixes.size()));
    std::vector<std::string> files = v2_checkpoint_files(prefix, num_shards, meta);
    files.push_back(state_file_path(prefix, latest_filename));
    check_no_directory_in_the_way(*fs, "saving checkpoint " + quoted(prefix), files);
    if (!shards.prefixes.empty()) {
      merge_bundles(shards.prefixes, prefix, {.file_system = fs});
    } else {
      BundleWriter empty(prefix, {.file_system = fs});
      empty.finish();
    }
    if (options.write_meta_graph) {
      export_meta_graph_for_items(
          {.filename = meta, .saver_def = saver_def, .graph = graph, .file_system = fs}, items);
    }
    // The list changes only once the state file names the new checkpoint.
    internal::CheckpointRetention next = retention;
    next.record(prefix, 0);
    update_checkpoint_state(dirname_of(prefix), prefix, next.last_paths(), latest_filename,
                            {.file_system = fs});
    retention = std::move(next);
    if (save_options.incremental) record_chain(prefix, delta);
    for (const std::string& old : retention.take_deletions()) delete_unneeded(old);
  } catch (const std::exception& e) {
    remove_temp_dir(*fs, temp);
    if (!replacing) remove_failed_checkpoint(*fs, prefix, meta, latest_filename);
    return e.what()[0] != '\0' ? e.what() : "unknown error";
  }
  return "";
}

void DistributedSaver::Impl::record_chain(const std::string& prefix,
                                          const internal::DeltaPlan* delta) {
  std::vector<ChainRecordLink> links = delta ? delta->links : std::vector<ChainRecordLink>{};
  links.push_back({basename_of(prefix), index_checksum(*fs, prefix)});
  std::vector<std::string> paths;
  for (const ChainRecordLink& l : links) paths.push_back(join_path(dirname_of(prefix), l.name));
  needs[prefix] = std::move(paths);
  chain = std::move(links);
  chain_dir = dirname_of(prefix);
}

void DistributedSaver::Impl::record_needs_of(const std::string& prefix) {
  try {
    if (!fs->file_exists(bundle_index_filename(prefix))) return;
    std::optional<std::vector<ChainRecordLink>> record =
        read_chain_record(BundleReader(prefix, fs));
    std::vector<std::string> paths;
    for (const ChainRecordLink& l : record.value_or(std::vector<ChainRecordLink>{})) {
      paths.push_back(join_path(dirname_of(prefix), l.name));
    }
    paths.push_back(prefix);
    needs[prefix] = std::move(paths);
  } catch (const Error&) {
    // Unreadable: it restores nothing, so it keeps nothing either.
  }
}

void DistributedSaver::Impl::delete_unneeded(const std::string& old) {
  deferred_deletions.push_back(old);
  std::vector<std::string> needed;
  for (const std::string& kept : retention.last_paths()) {
    auto it = needs.find(kept);
    if (it != needs.end()) needed.insert(needed.end(), it->second.begin(), it->second.end());
  }
  std::vector<std::string> still, unneeded;
  for (const std::string& path : deferred_deletions) {
    if (std::find(needed.begin(), needed.end(), path) != needed.end()) {
      still.push_back(path);
      continue;
    }
    needs.erase(path);
    unneeded.push_back(path);
  }
  deferred_deletions = std::move(still);
  // A chain goes newest first: a kill part-way leaves its older links whole.
  for (const std::string& path : newest_links_first(*fs, std::move(unneeded))) {
    delete_checkpoint_files(*fs, path, meta_graph_filename(path));
  }
}

std::string DistributedSaver::save(const std::string& save_path, std::optional<int64_t> global_step,
                                   const std::string& latest_filename) {
  return save(save_path, {.global_step = global_step, .latest_filename = latest_filename});
}

std::string DistributedSaver::save(const std::string& save_path,
                                   const DistributedSaveOptions& options) {
  Impl& m = *impl_;
  Cluster& cluster = *m.cluster;
  const std::string& latest_filename = options.latest_filename;
  const std::string prefix =
      options.global_step ? save_path + "-" + std::to_string(*options.global_step) : save_path;
  // Rank 0 removes what interrupted saves left (a task that died mid-save
  // leaves its temporary folder), then registers this save while in flight.
  std::optional<internal::LiveSave> live;
  if (cluster.rank() == 0) {
    live.emplace(*m.fs, save_path, prefix, state_file_path(prefix, latest_filename));
  }
  // Row marks are off until the first incremental save: turned on here,
  // before plan_shards' allgather, every update any task makes after it is
  // marked, and every earlier one has landed before the owners take their
  // marks below (that first save is a base, which holds them).
  if (options.incremental) internal::start_marking(m.items);
  // One temporary prefix for all tasks, picked by rank 0; every task writes
  // its shard in parallel.
  const std::string temp =
      ClusterAccess::broadcast(cluster, cluster.rank() == 0 ? temp_prefix_for(prefix) : "", 0);
  const ShardPlan shards = m.plan_shards(temp);
  std::exception_ptr error;
  std::shared_ptr<internal::DeltaPlan> delta;
  if (options.incremental) delta = m.plan_delta(prefix, error);
  if (!error && shards.mine >= 0) {
    // The first shard carries a delta's chain record into the merged index.
    error = m.write_shard(shards.prefixes[static_cast<size_t>(shards.mine)], delta.get(),
                          shards.mine == 0);
  }
  const std::vector<int> written = ClusterAccess::allgather(cluster, error ? 0 : 1);
  if (!all_ok(written)) {
    if (cluster.rank() == 0) remove_temp_dir(*m.fs, temp);
    // The rows taken for this save are lost with it: the next is a base.
    if (options.incremental) m.chain.reset();
    if (error) std::rethrow_exception(error);
    throw AbortedError("distributed save to " + quoted(prefix) + " failed on " +
                       failed_tasks(cluster, written) +
                       "; the previous checkpoint stays the latest");
  }
  const std::string failure = ClusterAccess::broadcast(
      cluster, cluster.rank() == 0 ? m.commit(prefix, shards, temp, options, delta.get()) : "", 0);
  if (!failure.empty()) {
    throw AbortedError("distributed save to " + quoted(prefix) + ": committing on " +
                       cluster.task_name_of_rank(0) + " failed: " + failure);
  }
  if (cluster.rank() != 0) {
    // Every task keeps rank 0's list; only rank 0 deletes.
    m.retention.record(prefix, 0);
    m.retention.take_deletions();
  }
  return prefix;
}

void DistributedSaver::restore(const std::string& save_path) {
  Impl& m = *impl_;
  Cluster& cluster = *m.cluster;
  // What other tasks wrote to these variables before restoring (the chief's
  // initializer, say) must not land after this task's restored values.
  cluster.barrier();
  // 1. Every task reads its share, checksumming its ranges of the pieces
  // shared with other tasks; one exchange of the checksums lets every task
  // verify every such piece, and all agree before any variable changes.
  std::vector<internal::ShareItem> all;
  for (const Saver::Item& item : m.items) {
    const int owner = ClusterAccess::owner_rank(item.variable);
    std::vector<int> ranks;
    if (owner >= 0) ranks.push_back(owner);
    for (int r = 0; owner < 0 && r < cluster.size(); ++r) ranks.push_back(r);
    all.push_back({item, std::move(ranks)});
  }
  // The cores are shared by the tasks that read (those holding variables).
  std::vector<bool> reads(static_cast<size_t>(cluster.size()), false);
  for (const internal::ShareItem& s : all) {
    for (int r : s.ranks) reads[static_cast<size_t>(r)] = true;
  }
  const int readers =
      std::max<int>(1, static_cast<int>(std::count(reads.begin(), reads.end(), true)));
  const int threads =
      std::clamp<int>(static_cast<int>(std::thread::hardware_concurrency()) / readers, 1, 4);
  internal::RestoreShare share(std::move(all), cluster.rank(), save_path, m.fs, threads);
  std::vector<uint32_t> checksums;
  std::string failure;
  try {
    checksums = share.read();
  } catch (const std::exception& e) {
    failure = e.what()[0] != '\0' ? e.what() : "unknown error";
  }
  const std::vector<std::string> votes =
      ClusterAccess::allgather_bytes(cluster, encode_vote(failure.empty(), checksums));
  std::vector<int> verified;
  for (const std::string& v : votes) verified.push_back(!v.empty() && v[0] == '1' ? 1 : 0);
  const std::string no_change = ", no variable changed: ";
  if (!all_ok(verified)) {
    const int first =
        static_cast<int>(std::find(verified.begin(), verified.end(), 0) - verified.begin());
    const std::string reason =
        ClusterAccess::broadcast(cluster, cluster.rank() == first ? failure : "", first);
    throw AbortedError("distributed restore from " + quoted(save_path) + " failed on " +
                       failed_tasks(cluster, verified) + no_change + reason);
  }
  std::vector<std::vector<uint32_t>> by_rank;
  for (const std::string& v : votes) by_rank.push_back(decode_checksums(v));
  if (const auto bad = share.verify(by_rank)) {
    std::vector<int> ok(verified.size(), 1);
    for (int r : bad->ranks) ok[static_cast<size_t>(r)] = 0;
    throw AbortedError("distributed restore from " + quoted(save_path) + " failed on " +
                       failed_tasks(cluster, ok) + no_change + bad->message);
  }
  // 2. Every task assigns its variables.
  std::exception_ptr error;
  try {
    share.assign();
  } catch (...) {
    error = std::current_exception();
  }
  const std::vector<int> restored = ClusterAccess::allgather(cluster, error ? 0 : 1);
  if (error) std::rethrow_exception(error);
  if (!all_ok(restored)) {
    throw AbortedError("distributed restore from " + quoted(save_path) + " failed on " +
                       failed_tasks(cluster, restored));
  }
}

}  // namespace varstate
