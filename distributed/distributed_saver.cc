#include "varstate/distributed_saver.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <utility>

#include "checkpoint/restore_share.h"
#include "checkpoint/save_pipeline.h"
#include "distributed/cluster_collectives.h"
#include "runtime/keyed_storage.h"
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

// The collective points of one save (internal::SaveCollective): rank 0
// sweeps, decides and commits; every exchange is over the whole cluster.
class ClusterSave final : public internal::SaveCollective {
 public:
  ClusterSave(Cluster& cluster, std::string prefix)
      : cluster_(cluster), prefix_(std::move(prefix)) {}

  bool commits() const override { return cluster_.rank() == 0; }
  std::string share(const std::string& value) override {
    return ClusterAccess::broadcast(cluster_, value, 0);
  }
  bool all(bool ok) override { return all_ok(ClusterAccess::allgather(cluster_, ok ? 1 : 0)); }
  // One shard per task that writes, in rank order.
  std::pair<int, int> place_shards(int count) override {
    const std::vector<int> counts = ClusterAccess::allgather(cluster_, count);
    int first = 0, total = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      if (static_cast<int>(r) < cluster_.rank()) first += counts[r];
      total += counts[r];
    }
    return {first, total};
  }
  std::exception_ptr written(std::exception_ptr error) override {
    const std::vector<int> ok = ClusterAccess::allgather(cluster_, error ? 0 : 1);
    if (all_ok(ok)) return nullptr;
    if (error) return error;
    return std::make_exception_ptr(AbortedError("distributed save to " + quoted(prefix_) +
                                                " failed on " + failed_tasks(cluster_, ok) +
                                                "; the previous checkpoint stays the latest"));
  }
  // Rank 0's failure (what failed, "" on success) becomes every task's.
  void commit(const std::function<void()>& body) override {
    std::string failure;
    if (commits()) {
      try {
        body();
      } catch (const std::exception& e) {
        failure = e.what()[0] != '\0' ? e.what() : "unknown error";
      }
    }
    failure = ClusterAccess::broadcast(cluster_, failure, 0);
    if (!failure.empty()) {
      throw AbortedError("distributed save to " + quoted(prefix_) + ": committing on " +
                         cluster_.task_name_of_rank(0) + " failed: " + failure);
    }
  }

 private:
  Cluster& cluster_;
  std::string prefix_;
};

}  // namespace

struct DistributedSaver::Impl {
  Cluster* cluster = nullptr;
  FileSystem* fs = nullptr;         // null: default_file_system()
  std::vector<Saver::Item> items;   // every variable's key and slice
  std::vector<Saver::Item> writes;  // what this task writes
  // The steps of save(), the chain (rank 0) and the recorded checkpoints
  // (rank 0's list on every task).
  std::unique_ptr<internal::SavePipeline> pipeline;
  bool write_meta_graph = true;
  std::string meta_graph_suffix;

  // Rank 0's `paths` (those that exist when `only_existing`) become every
  // task's list.
  void agree_on_last(const std::vector<std::string>& paths, bool only_existing);
};

DistributedSaver::DistributedSaver(Cluster& cluster, DistributedSaverOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.cluster = &cluster;
  m.fs = options.file_system;
  Graph& graph = options.graph ? *options.graph : get_default_graph();
  // The keys and slices exactly as Saver assigns them (and its checks for
  // duplicates); by default the graph's global variables.
  SaverOptions key_options{.allow_empty = true, .graph = &graph, .file_system = m.fs};
  if (options.var_list) key_options.var_list = *options.var_list;
  Saver keys(std::move(key_options));
  m.items = keys.items();
  // A dynamic variable's tensors are written by rank 0 (its table's
  // export gathers the rows from the tasks holding them), as are the
  // variables of no task.
  for (const Saver::Item& item : m.items) {
    const int owner = ClusterAccess::owner_rank(item.variable);
    if (owner == cluster.rank() || (owner < 0 && cluster.rank() == 0)) m.writes.push_back(item);
  }
  m.write_meta_graph = options.write_meta_graph;
  m.meta_graph_suffix = options.meta_graph_suffix;
  m.pipeline = std::make_unique<internal::SavePipeline>(m.fs);
  m.pipeline->configure({.items = m.items,
                         .writes = m.writes,
                         .saver_def = keys.as_saver_def(),
                         .graph = &graph,
                         .max_to_keep = options.max_to_keep,
                         .keep_every_n_hours = std::numeric_limits<double>::infinity(),
                         .list_without_max_to_keep = true,
                         .max_deltas_per_base = options.max_deltas_per_base,
                         .max_delta_fraction = options.max_delta_fraction,
                         .owner_marks = true});
}

DistributedSaver::~DistributedSaver() = default;

std::vector<std::string> DistributedSaver::last_checkpoints() const {
  return impl_->pipeline->last_paths();
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
    if (cluster->rank() == 0) pipeline->record_needs_of(p);
  }
  pipeline->set_last(std::move(last));
}

void DistributedSaver::set_last_checkpoints(const std::vector<std::string>& last_checkpoints) {
  impl_->agree_on_last(last_checkpoints, false);
}

void DistributedSaver::recover_last_checkpoints(const std::vector<std::string>& checkpoint_paths) {
  impl_->agree_on_last(checkpoint_paths, true);
}

std::string DistributedSaver::save(const std::string& save_path, std::optional<int64_t> global_step,
                                   const std::string& latest_filename) {
  return save(save_path, {.global_step = global_step, .latest_filename = latest_filename});
}

std::string DistributedSaver::save(const std::string& save_path,
                                   const DistributedSaveOptions& options) {
  Impl& m = *impl_;
  const std::string prefix =
      options.global_step ? save_path + "-" + std::to_string(*options.global_step) : save_path;
  // Every task writes its variables' shard in parallel under one temporary
  // prefix; rank 0 merges them, then writes the meta graph and the state
  // file, and deletes what max_to_keep lets go.
  internal::SaveRequest request{.save_path = save_path,
                                .checkpoint = prefix,
                                .latest_filename = options.latest_filename,
                                .write_meta_graph = m.write_meta_graph,
                                .meta_graph_suffix = m.meta_graph_suffix,
                                .incremental = options.incremental,
                                .sharded = true,
                                .check_paths_at_commit = true};
  if (!m.writes.empty()) request.add_shard_of_all(m.writes.size());
  ClusterSave collective(*m.cluster, prefix);
  internal::SaveJob job = m.pipeline->prepare(std::move(request), collective);
  m.pipeline->finish(job, collective);
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
    // A dynamic variable held by cluster tasks is restored once, by rank 0
    // (its table routes the keys to their tasks); one local to each
    // process, like any local variable, by every task.
    const internal::KeyedStorage* keyed = internal::keyed_storage(item.variable);
    if (keyed != nullptr && keyed->table().remote()) ranks.push_back(0);
    const bool every_task = ranks.empty();
    for (int r = 0; every_task && r < cluster.size(); ++r) ranks.push_back(r);
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
