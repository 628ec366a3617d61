// The steps of a save, for Saver and DistributedSaver. Internal.
//
// One routine, run by every process that writes a part of a checkpoint, in
// this order:
//
//   1. live save: the committing process removes what interrupted saves of
//      the path left and registers this one while it runs (LiveSave);
//   2. temporary prefix: picked by the committing process, where every
//      process's shards go until the commit;
//   3. delta plan (incremental saves): each process takes the changed rows
//      of the variables it writes; the committing process decides whether
//      the save extends its chain, and it is a base when any process's
//      delta would be too large;
//   4. shards: each process writes its shards through a CheckpointWriter
//      (checkpoint/checkpoint_writer.h), the checkpoint's first shard
//      carrying a delta's chain record;
//   5. commit: the committing process makes the shards the checkpoint
//      (CheckpointWriter::commit: the merged index), writes the meta graph,
//      then the state file;
//   6. retention: the committing process deletes the checkpoints beyond
//      max_to_keep that no kept checkpoint needs (newest link first); every
//      process keeps the same list.
//
// A SaveCollective supplies the points where processes agree: nothing in a
// single process (LocalSave, for Saver), the MPI exchanges of rank 0's
// choices and of every task's outcome for DistributedSaver. A save that
// fails in steps 4-6 on any process fails on every process; the committing
// process removes what it wrote (unless the state file already lists it)
// and the next incremental save is a base.
//
// Durability is the writer's and the state file's: every file is written
// under a temporary name, synced and renamed, the index after its data,
// the meta graph before the state file, and the state file names the new
// checkpoint only once it is complete.
//
// Not thread-safe, except last_paths(), set_last() and record_needs_of(),
// which may run while finish() runs on another thread (an asynchronous
// save); the owner serializes prepare() and finish().
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_chain.h"
#include "checkpoint/checkpoint_retention.h"
#include "varstate/saver.h"
#include "varstate/tensor.h"

namespace varstate {

class CheckpointWriter;
class FileSystem;
class Graph;

namespace internal {

class KeyedExports;
class KeyedTable;
class LiveSave;
struct DeltaPlan;

// The points of a save where the processes writing one checkpoint agree.
// Every process calls each at the same point of the same save.
class SaveCollective {
 public:
  virtual ~SaveCollective() = default;
  // Whether this process sweeps, commits and deletes (rank 0; a Saver's
  // only process).
  virtual bool commits() const = 0;
  // The committing process's `value` (the others' is ignored), on every
  // process.
  virtual std::string share(const std::string& value) = 0;
  // Whether `ok` holds on every process.
  virtual bool all(bool ok) = 0;
  // This process writes `count` shards: the checkpoint's index of its
  // first, and how many the processes write in all (in rank order).
  virtual std::pair<int, int> place_shards(int count) = 0;
  // After every process wrote its shards (`error`: this one's failure, or
  // null): null when every process succeeded, else what this process
  // throws once the committing one has removed what the save wrote (its
  // own error, or one naming the processes that failed).
  virtual std::exception_ptr written(std::exception_ptr error) = 0;
  // Runs `body` (the commit) on the committing process; throws on every
  // process when it threw.
  virtual void commit(const std::function<void()>& body) = 0;
};

// One process writing the whole checkpoint: nothing to agree on.
class LocalSave final : public SaveCollective {
 public:
  bool commits() const override { return true; }
  std::string share(const std::string& value) override { return value; }
  bool all(bool ok) override { return ok; }
  std::pair<int, int> place_shards(int count) override { return {0, count}; }
  std::exception_ptr written(std::exception_ptr error) override { return error; }
  void commit(const std::function<void()>& body) override { body(); }
};

struct SavePipelineOptions {
  // Every variable of the saver (the meta graph's save node), and those
  // this process writes (all of them in a single process).
  std::vector<Saver::Item> items;
  std::vector<Saver::Item> writes;
  SaverDef saver_def;  // for the meta graph
  Graph* graph = nullptr;
  CheckpointFormatVersion format = CheckpointFormatVersion::kV2;
  size_t staging_buffer_bytes = size_t{64} << 20;
  // Retention: the newest max_to_keep checkpoints (all when <= 0) and one
  // every keep_every_n_hours, counted with `clock` (seconds). Without
  // max_to_keep, a Saver lists no checkpoint (TensorFlow's rule), a
  // DistributedSaver every one (`list_without_max_to_keep`).
  int max_to_keep = 5;
  double keep_every_n_hours = 10000.0;
  bool list_without_max_to_keep = false;
  std::function<double()> clock;
  bool save_relative_paths = false;  // in the state file
  // Incremental saves: a base after this many deltas, or when a process's
  // delta would exceed this fraction of its full share.
  int max_deltas_per_base = 10;
  double max_delta_fraction = 0.5;
  // The changed rows of a variable held by the cluster come from its
  // owner's marks (this process owns it), turned on by the first
  // incremental save; otherwise such a variable goes whole into a delta.
  bool owner_marks = false;
};

// One save.
struct SaveRequest {
  std::string save_path;   // as given: whose leftovers step 1 removes
  std::string checkpoint;  // the prefix written: save_path[-<step>]
  std::string latest_filename;
  bool write_meta_graph = true;
  std::string meta_graph_suffix = "meta";
  bool incremental = false;
  // This process's shards, each the indices of the writes it holds; with
  // `sharded` every shard is a file (or bundle) of its own, otherwise the
  // checkpoint is the one shard, written in place.
  std::vector<std::vector<size_t>> shards;
  bool sharded = false;
  // Adds one shard holding writes [0, count).
  void add_shard_of_all(size_t count) {
    shards.emplace_back(count);
    std::iota(shards.back().begin(), shards.back().end(), size_t{0});
  }
  // When the paths the save writes are checked for a directory in the way:
  // before anything (a single process), or on the committing process
  // before it commits, where its error is every process's.
  bool check_paths_at_commit = false;
};

// A save between prepare() and finish().
struct SaveJob {
  SaveRequest request;
  std::shared_ptr<LiveSave> live;  // on the committing process
  std::shared_ptr<CheckpointWriter> writer;
  int first_shard = 0;
  std::shared_ptr<DeltaPlan> delta;  // null: a full checkpoint
  // The dynamic variables' keys and rows, or a delta's changes of them,
  // taken in prepare() (null when none is written).
  std::shared_ptr<const KeyedExports> keyed;
  // A failure to take the changed rows: the save fails in finish().
  std::exception_ptr error;

  // The path the state file records.
  std::string recorded_path() const;
};

class SavePipeline {
 public:
  // Saves through `fs` (default_file_system() when null).
  explicit SavePipeline(FileSystem* fs);
  ~SavePipeline();
  SavePipeline(const SavePipeline&) = delete;
  SavePipeline& operator=(const SavePipeline&) = delete;

  // The variables and policies; before the first save. Keeps the list of
  // checkpoints.
  void configure(SavePipelineOptions options);

  // Throws FailedPreconditionError `saving checkpoint "<prefix>": ...` when
  // a path the save writes (its files, meta graph and state file) is a
  // directory, which no rename can replace.
  void check_paths(const SaveRequest& request) const;

  // Steps 1-3. Throws InvalidArgumentError for an incremental save in a
  // format without deltas.
  SaveJob prepare(SaveRequest request, SaveCollective& collective);
  // A copy of what `job` writes (each value, or a delta's rows), taken now:
  // finish() then writes it while the variables change.
  std::vector<Tensor> snapshot(const SaveJob& job) const;
  // Steps 4-6, from `snapshot` (or the live variables when empty). Throws
  // what the collective throws; a single process's own error as it is.
  void finish(SaveJob& job, SaveCollective& collective, const std::vector<Tensor>& snapshot = {});

  // The kept checkpoints, oldest first.
  std::vector<std::string> last_paths() const;
  void set_last(std::vector<CheckpointRetention::Entry> last);
  // After a restart: the checkpoints `checkpoint` needs (the links its
  // chain record names, and itself), so that retention keeps them.
  // Logs a warning for a checkpoint that does not open.
  void record_needs_of(const std::string& checkpoint);

 private:
  std::shared_ptr<DeltaPlan> plan_delta(const SaveJob& job, SaveCollective& collective,
                                        std::exception_ptr& error);
  // A copy of what write `i` saves in `job`.
  Tensor copy_item(const SaveJob& job, size_t i) const;
  std::exception_ptr write_shards(const SaveJob& job, const std::vector<Tensor>& snapshot) const;
  void write_shard(const SaveJob& job, size_t group, const std::vector<Tensor>& snapshot) const;
  void check_paths(const SaveRequest& request, const CheckpointWriter& writer) const;
  void commit(const SaveJob& job);
  void record(const std::string& checkpoint, const SaveRequest& request);
  void discard(const SaveJob& job, bool replacing);
  void delete_unneeded(const std::string& old, const std::string& meta_graph_suffix);
  std::string meta_graph_file(const SaveRequest& request) const;
  // Whether the list of checkpoints takes a new one.
  bool lists() const { return options_.max_to_keep > 0 || options_.list_without_max_to_keep; }
  std::unique_ptr<CheckpointWriter> make_writer(const SaveRequest& request, int num_shards,
                                                const std::string& temp_prefix) const;

  FileSystem* fs_;
  SavePipelineOptions options_;

  // Incremental saves: per write, the generation of its dirty rows' last
  // take, and per dynamic variable's table its changes'. On the committing process: the chain the
  // next delta extends (base first; the last link is the previous save), unset when the next save
  // must be a base.
  std::vector<uint64_t> generations_;
  std::map<const KeyedTable*, uint64_t> keyed_generations_;
  std::optional<std::vector<ChainRecordLink>> chain_;
  std::string chain_dir_;

  // Which checkpoints are kept; the checkpoints each known checkpoint
  // needs (its links and itself); those out of the list kept for a
  // checkpoint that needs them.
  mutable std::mutex mu_;
  CheckpointRetention retention_;
  std::map<std::string, std::vector<std::string>> needs_;
  std::vector<std::string> deferred_deletions_;
};

}  // namespace internal
}  // namespace varstate
