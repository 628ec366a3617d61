#include "checkpoint/save_pipeline.h"

#include <algorithm>
#include <regex>
#include <span>
#include <thread>

#include "base/logging.h"
#include "checkpoint/checkpoint_files.h"
#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/delta_save_internal.h"
#include "checkpoint/file_system.h"
#include "checkpoint/keyed_checkpoint.h"
#include "checkpoint/live_save_internal.h"
#include "checkpoint/meta_graph_internal.h"
#include "checkpoint/tensor_bundle.h"
#include "runtime/variable_access.h"
#include "runtime/variable_storage.h"
#include "varstate/checkpoint_state.h"
#include "varstate/error.h"

namespace varstate::internal {
namespace {

// The links as one string ("<crc32c> <name>" each, length-prefixed), and
// back: what the committing process shares.
std::string encode_links(const std::vector<ChainRecordLink>& links) {
  std::string out;
  for (const ChainRecordLink& l : links) {
    const std::string link = std::to_string(l.index_crc32c) + " " + l.name;
    out += std::to_string(link.size()) + ":" + link;
  }
  return out;
}

std::vector<ChainRecordLink> decode_links(const std::string& encoded) {
  std::vector<ChainRecordLink> out;
  size_t pos = 0;
  while (pos < encoded.size()) {
    const size_t colon = encoded.find(':', pos);
    const size_t n = std::stoul(encoded.substr(pos, colon - pos));
    const std::string link = encoded.substr(colon + 1, n);
    const size_t space = link.find(' ');
    out.push_back(
        {link.substr(space + 1), static_cast<uint32_t>(std::stoul(link.substr(0, space)))});
    pos = colon + 1 + n;
  }
  return out;
}

// The meta graph file of a recorded checkpoint path, which for a sharded V1
// checkpoint is the pattern of its files ("model-?????-of-00002").
std::string recorded_meta_graph(const std::string& path, const std::string& suffix) {
  static const std::regex kV1Shards("-\\?\\?\\?\\?\\?-of-[0-9]{5}$");
  return meta_graph_filename(std::regex_replace(path, kV1Shards, ""), suffix);
}

}  // namespace

std::string SaveJob::recorded_path() const { return writer->recorded_path(); }

SavePipeline::SavePipeline(FileSystem* fs) : fs_(fs ? fs : default_file_system()) {}

SavePipeline::~SavePipeline() = default;

void SavePipeline::configure(SavePipelineOptions options) {
  options_ = std::move(options);
  if (!options_.clock) options_.clock = [] { return 0.0; };
  std::lock_guard lock(mu_);
  retention_.set_policy(options_.max_to_keep, options_.keep_every_n_hours, options_.clock());
}

std::string SavePipeline::meta_graph_file(const SaveRequest& request) const {
  return request.write_meta_graph
             ? meta_graph_filename(request.checkpoint, request.meta_graph_suffix)
             : "";
}

std::unique_ptr<CheckpointWriter> SavePipeline::make_writer(const SaveRequest& request,
                                                            int num_shards,
                                                            const std::string& temp_prefix) const {
  return make_checkpoint_writer(options_.format, request.checkpoint,
                                {.file_system = fs_,
                                 .num_shards = num_shards,
                                 .sharded = request.sharded,
                                 .temp_prefix = temp_prefix,
                                 .staging_buffer_bytes = options_.staging_buffer_bytes});
}

void SavePipeline::check_paths(const SaveRequest& request) const {
  check_paths(request, *make_writer(request, static_cast<int>(request.shards.size()), ""));
}

void SavePipeline::check_paths(const SaveRequest& request, const CheckpointWriter& writer) const {
  std::vector<std::string> paths = writer.files();
  const std::string meta = meta_graph_file(request);
  if (!meta.empty()) paths.push_back(meta);
  paths.push_back(state_file_path(request.checkpoint, request.latest_filename));
  check_no_directory_in_the_way(*fs_, "saving checkpoint " + quoted(request.checkpoint), paths);
}

// ---------------------------------------------------------------------------
// Steps 1-3

SaveJob SavePipeline::prepare(SaveRequest request, SaveCollective& collective) {
  SaveJob job;
  job.request = std::move(request);
  const SaveRequest& r = job.request;
  if (!r.check_paths_at_commit) check_paths(r);
  // 1. Removes what interrupted saves left (a process that died mid-save
  // leaves its temporary folder), then registers this one while in flight.
  if (collective.commits()) {
    job.live = std::make_shared<LiveSave>(*fs_, r.save_path, r.checkpoint,
                                          state_file_path(r.save_path, r.latest_filename));
  }
  // Row marks of variables held by the cluster are off until the first
  // incremental save: turned on here, before the exchanges below, every
  // update any process makes after it is marked, and every earlier one has
  // landed before the owners take their marks in plan_delta (that first
  // save is a base, which holds them).
  if (r.incremental && options_.owner_marks) start_marking(options_.items);
  // 2. One temporary prefix for every process's shards.
  const std::string temp =
      collective.share(collective.commits() && r.sharded ? temp_prefix_for(r.checkpoint) : "");
  const auto [first, total] = collective.place_shards(static_cast<int>(r.shards.size()));
  job.first_shard = first;
  job.writer = make_writer(r, total, temp);
  // 3.
  if (r.incremental) {
    if (!job.writer->writes_deltas()) {
      throw InvalidArgumentError("saving " + quoted(r.checkpoint) +
                                 " incrementally: deltas are V2 tensor bundles, the saver writes " +
                                 std::string(job.writer->format_name()));
    }
    job.delta = plan_delta(job, collective, job.error);
  }
  // The dynamic variables' keys and rows, each table's in one take; a
  // delta's changes of them were taken with its plan.
  if (job.delta && job.delta->keyed) {
    job.keyed = job.delta->keyed;
  } else if (!job.error) {
    try {
      auto keyed = std::make_shared<const KeyedExports>(options_.writes);
      if (!keyed->empty()) job.keyed = std::move(keyed);
    } catch (...) {
      job.error = std::current_exception();
    }
  }
  return job;
}

Tensor SavePipeline::copy_item(const SaveJob& job, size_t i) const {
  const Saver::Item& item = options_.writes[i];
  if (item.part != Saver::Part::kValue) return Tensor();  // job.keyed holds it
  const DeltaPlan* delta = job.delta.get();
  return copy_value(item, delta && !delta->items[i].whole ? &delta->items[i] : nullptr);
}

std::shared_ptr<DeltaPlan> SavePipeline::plan_delta(const SaveJob& job, SaveCollective& collective,
                                                    std::exception_ptr& error) {
  const std::string& checkpoint = job.request.checkpoint;
  const std::vector<Saver::Item>& writes = options_.writes;
  // A base takes the rows too: the next delta holds what changed since.
  std::vector<DirtyRows::Taken> taken;
  std::vector<TensorShape> shapes;
  std::shared_ptr<KeyedExports> keyed;
  try {
    taken = take_changed_rows(writes, options_.owner_marks, generations_, shapes);
    keyed = KeyedExports::changes(writes, keyed_generations_);
  } catch (...) {
    error = std::current_exception();
  }
  std::string links;
  if (collective.commits() && chain_ &&
      static_cast<int>(chain_->size()) <= options_.max_deltas_per_base &&
      dirname_of(checkpoint) == chain_dir_ &&
      std::none_of(chain_->begin(), chain_->end(),
                   [&](const ChainRecordLink& l) { return l.name == basename_of(checkpoint); })) {
    links = encode_links(*chain_);
  }
  links = collective.share(links);
  if (links.empty()) return nullptr;
  auto plan = std::make_shared<DeltaPlan>();
  plan->links = decode_links(links);
  int64_t delta = 0;
  int64_t full = 0;
  for (size_t i = 0; i < taken.size(); ++i) {
    plan->items.push_back(
        plan_item_delta(writes[i], shapes[i], std::move(taken[i]), options_.owner_marks));
    if (writes[i].part != Saver::Part::kValue) continue;  // counted below
    delta += delta_bytes(writes[i], shapes[i], plan->items.back());
    full += full_bytes(writes[i], shapes[i]);
  }
  if (keyed) {
    delta += keyed->delta_bytes();
    full += keyed->full_bytes();
    if (!keyed->empty()) plan->keyed = keyed;
  }
  const bool small =
      !error && (!keyed || keyed->complete()) &&
      static_cast<double>(delta) <= options_.max_delta_fraction * static_cast<double>(full);
  if (!collective.all(small)) return nullptr;
  return plan;
}

// ---------------------------------------------------------------------------
// Step 4

std::vector<Tensor> SavePipeline::snapshot(const SaveJob& job) const {
  std::vector<Tensor> out;
  out.reserve(options_.writes.size());
  for (size_t i = 0; i < options_.writes.size(); ++i) out.push_back(copy_item(job, i));
  return out;
}

void SavePipeline::write_shard(const SaveJob& job, size_t group,
                               const std::vector<Tensor>& snapshot) const {
  const int shard = job.first_shard + static_cast<int>(group);
  const DeltaPlan* delta = job.delta.get();
  std::unique_ptr<CheckpointWriter::Shard> out = job.writer->begin_shard(shard);
  // The checkpoint's first shard carries a delta's chain record (a sharded
  // save's merged index then holds it).
  if (delta != nullptr && shard == 0) {
    const std::vector<std::string> record = chain_record_strings(delta->links);
    out->add(kChainKey, TensorView{DType::kString,
                                   {static_cast<int64_t>(record.size())},
                                   {},
                                   std::span<const std::string>(record)});
  }
  for (size_t i : job.request.shards[group]) {
    const Saver::Item& item = options_.writes[i];
    if (item.part != Saver::Part::kValue) {
      // A dynamic variable's: a copy taken in prepare().
      job.keyed->write(*out, item);
      continue;
    }
    const ItemDelta* rows = delta != nullptr && !delta->items[i].whole ? &delta->items[i] : nullptr;
    if (snapshot.empty() && rows == nullptr && storage(item.variable).updates_in_place()) {
      // A blocking save reads the live buffer under the variable's lock.
      std::lock_guard lock(update_mutex(item.variable));
      out->add_tensor(item.key, item.slice, item.variable.ref());
      continue;
    }
    // An asynchronous save's snapshot holds the values (or rows) copied.
    const Tensor value = snapshot.empty() ? copy_item(job, i) : snapshot[i];
    if (rows != nullptr) {
      write_item_rows(*out, item, *rows, value);
    } else {
      out->add_tensor(item.key, item.slice, value);
    }
  }
  out->finish();
}

std::exception_ptr SavePipeline::write_shards(const SaveJob& job,
                                              const std::vector<Tensor>& snapshot) const {
  // Every value is checked before a file is written.
  try {
    for (const Saver::Item& item : options_.writes) {
      job.writer->check_dtype(item.variable.op_name(), item.variable.dtype());
    }
  } catch (...) {
    return std::current_exception();
  }
  const size_t n = job.request.shards.size();
  std::vector<std::exception_ptr> errors(n);
  auto write = [&](size_t group) {
    try {
      write_shard(job, group, snapshot);
    } catch (...) {
      errors[group] = std::current_exception();
    }
  };
  if (job.writer->stages_shards() && n > 1) {
    // Staged shards in parallel, a thread each.
    std::vector<std::thread> threads;
    for (size_t g = 0; g < n; ++g) threads.emplace_back(write, g);
    for (std::thread& t : threads) t.join();
  } else {
    // Shards written in place one after another: a failure leaves the
    // later ones as they were.
    for (size_t g = 0; g < n; ++g) {
      write(g);
      if (errors[g]) break;
    }
  }
  for (const std::exception_ptr& e : errors) {
    if (e) return e;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------
// Steps 4-6

void SavePipeline::finish(SaveJob& job, SaveCollective& collective,
                          const std::vector<Tensor>& snapshot) {
  // Until an incremental save succeeds, the next one must be a base.
  if (job.request.incremental) chain_.reset();
  // Saving again to an existing checkpoint replaces it in place; anything
  // else that fails leaves nothing new behind.
  const bool replacing = collective.commits() && checkpoint_exists(job.recorded_path(), fs_);
  std::exception_ptr error = job.error;
  if (!error) error = write_shards(job, snapshot);
  if (std::exception_ptr failed = collective.written(error)) {
    if (collective.commits()) discard(job, replacing);
    std::rethrow_exception(failed);
  }
  collective.commit([&] {
    try {
      commit(job);
    } catch (...) {
      discard(job, replacing);
      throw;
    }
  });
  if (!collective.commits()) {
    // Every process keeps the committing one's list; only that one deletes.
    std::lock_guard lock(mu_);
    if (lists()) retention_.record(job.recorded_path(), options_.clock());
    retention_.take_deletions();
  }
}

void SavePipeline::commit(const SaveJob& job) {
  const SaveRequest& r = job.request;
  CheckpointWriter& writer = *job.writer;
  const std::string recorded = writer.recorded_path();
  if (r.check_paths_at_commit) check_paths(r, writer);
  // 5.
  writer.commit();
  std::optional<std::vector<ChainRecordLink>> next_chain;
  if (r.incremental) {
    // The chain this checkpoint ends, recorded as what it needs.
    next_chain = job.delta ? job.delta->links : std::vector<ChainRecordLink>{};
    next_chain->push_back({basename_of(r.checkpoint), index_checksum(*fs_, r.checkpoint)});
    std::vector<std::string> paths;
    for (const ChainRecordLink& l : *next_chain) {
      paths.push_back(join_path(dirname_of(r.checkpoint), l.name));
    }
    std::lock_guard lock(mu_);
    needs_[recorded] = std::move(paths);
  }
  const std::string meta = meta_graph_file(r);
  if (!meta.empty()) {
    export_meta_graph_for_items({.filename = meta,
                                 .saver_def = options_.saver_def,
                                 .graph = options_.graph,
                                 .file_system = fs_},
                                options_.items);
  }
  // 6.
  record(recorded, r);
  if (r.incremental) {
    chain_ = std::move(next_chain);
    chain_dir_ = dirname_of(r.checkpoint);
  }
}

void SavePipeline::record(const std::string& checkpoint, const SaveRequest& request) {
  // The list changes only once the state file names the new checkpoint, so
  // a failed update leaves it as it was.
  CheckpointRetention next;
  {
    std::lock_guard lock(mu_);
    next = retention_;
  }
  if (lists()) next.record(checkpoint, options_.clock());
  update_checkpoint_state(
      dirname_of(checkpoint), checkpoint, next.last_paths(), request.latest_filename,
      {.save_relative_paths = options_.save_relative_paths, .file_system = fs_});
  std::lock_guard lock(mu_);
  retention_ = std::move(next);
  for (const std::string& old : retention_.take_deletions()) {
    delete_unneeded(old, request.meta_graph_suffix);
  }
}

void SavePipeline::discard(const SaveJob& job, bool replacing) {
  const SaveRequest& r = job.request;
  const std::string recorded = job.recorded_path();
  job.writer->abandon();
  {
    std::lock_guard lock(mu_);
    needs_.erase(recorded);
  }
  if (!replacing) {
    remove_failed_checkpoint(
        *fs_, recorded,
        r.write_meta_graph ? recorded_meta_graph(recorded, r.meta_graph_suffix) : "",
        r.latest_filename);
  }
}

void SavePipeline::delete_unneeded(const std::string& old, const std::string& meta_graph_suffix) {
  // Candidates: `old`, the links it needed (a recovered delta's base may
  // never have been listed here), and what was deferred before.
  std::vector<std::string> candidates = std::move(deferred_deletions_);
  candidates.push_back(old);
  if (auto it = needs_.find(old); it != needs_.end()) {
    candidates.insert(candidates.end(), it->second.begin(), it->second.end());
    needs_.erase(it);
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  deferred_deletions_.clear();
  std::vector<std::string> unneeded;
  for (const std::string& path : candidates) {
    const bool needed = std::any_of(needs_.begin(), needs_.end(), [&](const auto& entry) {
      return std::find(entry.second.begin(), entry.second.end(), path) != entry.second.end();
    });
    if (needed) {
      deferred_deletions_.push_back(path);
    } else if (path == old || checkpoint_exists(path, fs_)) {
      unneeded.push_back(path);
    }
  }
  // A chain goes newest first: a kill part-way leaves its older links whole.
  for (const std::string& path : newest_links_first(*fs_, std::move(unneeded))) {
    delete_checkpoint_files(*fs_, path, recorded_meta_graph(path, meta_graph_suffix));
  }
}

// ---------------------------------------------------------------------------
// The list of checkpoints

std::vector<std::string> SavePipeline::last_paths() const {
  std::lock_guard lock(mu_);
  return retention_.last_paths();
}

void SavePipeline::set_last(std::vector<CheckpointRetention::Entry> last) {
  std::lock_guard lock(mu_);
  retention_.set_last(std::move(last));
}

void SavePipeline::record_needs_of(const std::string& checkpoint) {
  if (!fs_->file_exists(bundle_index_filename(checkpoint))) return;
  try {
    std::optional<std::vector<ChainRecordLink>> record =
        read_chain_record(BundleReader(checkpoint, fs_));
    std::vector<std::string> links;
    if (!record) record.emplace();  // a full checkpoint needs itself
    for (const ChainRecordLink& l : *record) {
      links.push_back(join_path(dirname_of(checkpoint), l.name));
    }
    links.push_back(checkpoint);
    std::lock_guard lock(mu_);
    needs_[checkpoint] = std::move(links);
  } catch (const Error& e) {
    logger().warn("recovering checkpoint {}: {}", checkpoint, e.what());
  }
}

}  // namespace varstate::internal
