#include "varstate/distributed_saver.h"

#include <exception>

#include "checkpoint/file_system.h"
#include "checkpoint/live_save_internal.h"
#include "checkpoint/meta_graph_internal.h"
#include "checkpoint/tensor_bundle.h"
#include "distributed/cluster_internal.h"
#include "varstate/checkpoint_state.h"
#include "varstate/error.h"
#include "varstate/graph.h"
#include "varstate/session.h"

namespace varstate {
namespace {

using internal::ClusterAccess;

TensorSlice slice_of(const SaveSliceInfo& info) {
  std::vector<TensorSlice::Extent> extents;
  for (size_t d = 0; d < info.var_offset.size(); ++d)
    extents.push_back({info.var_offset[d], info.var_shape[d]});
  return TensorSlice(std::move(extents));
}

TensorView view_of(const Tensor& host) {
  return TensorView{
      host.dtype(),
      host.shape().dims(),
      std::span<const std::byte>(static_cast<const std::byte*>(host.raw_data()), host.nbytes()),
      {}};
}

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

}  // namespace

struct DistributedSaver::Impl {
  Cluster* cluster = nullptr;
  DistributedSaverOptions options;
  FileSystem* fs = nullptr;
  std::vector<Saver::Item> items;   // every variable's key and slice
  std::vector<Saver::Item> writes;  // what this task writes
  std::unique_ptr<Saver> restorer;  // over what this task restores
  std::vector<std::string> last;    // recorded checkpoints (rank 0)
  Graph* graph = nullptr;
  SaverDef saver_def;

  std::string meta_graph_filename(const std::string& prefix) const {
    return prefix + "." + options.meta_graph_suffix;
  }

  void delete_checkpoint(const std::string& prefix) {
    // The index first: data files without an index are no checkpoint.
    std::vector<std::string> files{bundle_index_filename(prefix)};
    for (const std::string& f : match_files(*fs, prefix + ".data-?????-of-?????"))
      files.push_back(f);
    files.push_back(meta_graph_filename(prefix));
    for (const std::string& f : files) {
      try {
        if (fs->file_exists(f)) fs->delete_file(f);
      } catch (const Error&) {
      }
    }
  }

  void remove_temp(const std::string& temp_prefix) {
    const std::string dir = dirname_of(temp_prefix);
    try {
      for (const std::string& name : fs->list_dir(dir)) fs->delete_file(dir + "/" + name);
      fs->delete_dir(dir);
    } catch (const Error&) {
    }
  }
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
  std::vector<Variable> restores;
  for (const Saver::Item& item : m.items) {
    const int owner = ClusterAccess::owner_rank(item.variable);
    if (owner == cluster.rank() || (owner < 0 && cluster.rank() == 0)) m.writes.push_back(item);
    if (owner == cluster.rank() || owner < 0) restores.push_back(item.variable);
  }
  m.restorer = std::make_unique<Saver>(SaverOptions{
      .var_list = restores, .allow_empty = true, .graph = &graph, .file_system = m.fs});
  m.options = std::move(options);
}

DistributedSaver::~DistributedSaver() = default;

std::vector<std::string> DistributedSaver::last_checkpoints() const { return impl_->last; }

std::string DistributedSaver::save(const std::string& save_path, std::optional<int64_t> global_step,
                                   const std::string& latest_filename) {
  Impl& m = *impl_;
  Cluster& cluster = *m.cluster;
  const std::string prefix =
      global_step ? save_path + "-" + std::to_string(*global_step) : save_path;
  // Rank 0 removes what interrupted saves left (a task that died mid-save
  // leaves its temporary folder), then registers this save while in flight.
  std::optional<internal::LiveSave> live;
  if (cluster.rank() == 0) {
    const std::string dir = dirname_of(prefix);
    const std::string state = latest_filename.empty() ? "checkpoint" : latest_filename;
    live.emplace(*m.fs, save_path, prefix, dir.empty() || dir == "." ? state : dir + "/" + state);
  }
  // One temporary prefix for all tasks, picked by rank 0.
  const std::string temp =
      ClusterAccess::broadcast(cluster, cluster.rank() == 0 ? temp_prefix_for(prefix) : "", 0);
  const std::vector<int> writers = ClusterAccess::allgather(cluster, m.writes.empty() ? 0 : 1);
  std::vector<std::string> shard_prefixes;
  int n = 0;
  for (int w : writers) n += w;
  int my_shard = -1;
  for (size_t r = 0, k = 0; r < writers.size(); ++r) {
    if (!writers[r]) continue;
    if (static_cast<int>(r) == cluster.rank()) my_shard = static_cast<int>(k);
    ++k;
  }
  for (int k = 0; k < n; ++k) shard_prefixes.push_back(sharded_prefix(temp, k, n));

  // Every task writes its shard in parallel.
  std::exception_ptr error;
  if (my_shard >= 0) {
    try {
      BundleWriter writer(shard_prefixes[static_cast<size_t>(my_shard)], {.file_system = m.fs});
      for (const Saver::Item& item : m.writes) {
        const Tensor host = item.variable.read_value().to_host();
        if (item.slice) {
          writer.add_slice(item.key, item.slice->full_shape, slice_of(*item.slice), view_of(host));
        } else {
          writer.add(item.key, view_of(host));
        }
      }
      writer.finish();
    } catch (...) {
      error = std::current_exception();
    }
  }
  const std::vector<int> written = ClusterAccess::allgather(cluster, error ? 0 : 1);
  if (!all_ok(written)) {
    if (cluster.rank() == 0) m.remove_temp(temp);
    if (error) std::rethrow_exception(error);
    throw AbortedError("distributed save to " + quoted(prefix) + " failed on " +
                       failed_tasks(cluster, written) +
                       "; the previous checkpoint stays the latest");
  }

  // Rank 0 commits: the merged index, then the state file.
  std::string failure;
  if (cluster.rank() == 0) {
    try {
      if (n > 0) {
        merge_bundles(shard_prefixes, prefix, {.file_system = m.fs});
      } else {
        BundleWriter empty(prefix, {.file_system = m.fs});
        empty.finish();
      }
      if (m.options.write_meta_graph) {
        export_meta_graph_for_items({.filename = m.meta_graph_filename(prefix),
                                     .saver_def = m.saver_def,
                                     .graph = m.graph,
                                     .file_system = m.fs},
                                    m.items);
      }
      std::erase(m.last, prefix);
      m.last.push_back(prefix);
      std::vector<std::string> to_delete;
      if (m.options.max_to_keep > 0) {
        while (static_cast<int>(m.last.size()) > m.options.max_to_keep) {
          to_delete.push_back(m.last.front());
          m.last.erase(m.last.begin());
        }
      }
      update_checkpoint_state(dirname_of(prefix), prefix, m.last, latest_filename,
                              {.file_system = m.fs});
      for (const std::string& old : to_delete) m.delete_checkpoint(old);
    } catch (const std::exception& e) {
      failure = e.what();
      if (failure.empty()) failure = "unknown error";
      m.remove_temp(temp);
    }
  }
  failure = ClusterAccess::broadcast(cluster, failure, 0);
  if (!failure.empty()) {
    throw AbortedError("distributed save to " + quoted(prefix) + ": committing on " +
                       cluster.task_name_of_rank(0) + " failed: " + failure);
  }
  return prefix;
}

void DistributedSaver::restore(const std::string& save_path) {
  Impl& m = *impl_;
  Cluster& cluster = *m.cluster;
  std::exception_ptr error;
  try {
    Session session;
    m.restorer->restore(session, save_path);
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
