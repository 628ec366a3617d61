// DistributedSaver: checkpoints of a Cluster's variables, written by every
// task in parallel (varstate/cluster.h).
//
//   DistributedSaver saver(cluster);                 // the graph's global variables
//   saver.save("/shared/ckpt/model", step);          // every task calls it
//   saver.restore(*latest_checkpoint("/shared/ckpt"));
//
// save() is collective. Each task writes the variables it holds (those
// placed on it; the variables local to every process are written by rank
// 0) into its own V2 bundle shard, in parallel, under a temporary prefix.
// When every task has succeeded, rank 0 merges the shards' indexes into the
// checkpoint ("<prefix>.index" + ".data-0000k-of-0000n", TensorFlow's V2
// format, readable by Saver and TensorFlow), then writes the directory's
// "checkpoint" state file, then deletes checkpoints beyond max_to_keep:
// the single-process Saver's crash-safety contract. Rank 0 also writes the
// meta graph "<prefix>.meta" before the state file (export_meta_graph of its
// graph with this saver's save node: every variable, its collections and
// their update Ops), so import_meta_graph recreates the model and a saver
// for this checkpoint in a fresh program. A task that fails or
// dies mid-save leaves no index for the new checkpoint and the state file
// naming the previous one. The directory must be on a file system every
// task sees (one machine, or a shared mount).
//
// restore() is collective and starts with a barrier, so what any task wrote
// before it (a chief's initializer) lands before the restored values: every
// task restores the variables it holds (and each process its local
// variables) with Saver::restore's checks, reading only their slices from
// the stored pieces that overlap them, so a checkpoint written by N tasks
// restores into M tasks, into a different partitioning, and into a single
// process with a plain Saver, without any task gathering a whole table.
// Partitioned variables are stored as slices of one full tensor, as Saver
// stores them.
//
// A save on rank 0 first removes what interrupted saves of the same path
// left in the directory (temporary folders, as Saver does). A save that
// fails on rank 0 while committing (a directory where the index, a data
// shard, the meta graph or the state file goes is reported by name before
// anything is merged) removes what it wrote and leaves the state file and
// last_checkpoints() as they were.
//
// restore() is all-or-nothing across tasks: first every task verifies its
// share of the checkpoint without changing a variable (the files present,
// every key with its dtype and shape or slice coverage, every byte read
// into fresh buffers and covered by a verified crc32c: a stored piece that
// several tasks need rows of is read once, each task its rows, and its
// checksum verified by joining theirs after one exchange); only when
// every task has succeeded does any task assign. If one fails, no variable
// changes on any task and every task raises the same AbortedError, naming
// the failing task(s) and the first failing task's error (which names the
// file: a missing shard, a checksum mismatch in "<prefix>.data-0000k-of-
// 0000n"). A failure after that point (the transport failing mid-assign)
// can leave some variables restored; a second restore repairs them.
//
// Errors of save(): a failure on any task raises AbortedError on every
// task naming the failing task(s) (the failing task itself raises its own
// error).
//
// Incremental saves (save(path, {.incremental = true}), the single-process
// Saver's chains, varstate/checkpoint_chain.h): each task writes, into its
// shard, only the rows of its variables changed since this saver's
// previous save, and rank 0's merged index records the chain (the
// checkpoints it applies to), so the result is an ordinary delta that
// Saver, compact_checkpoint and `varstate inspect` read too. The changed
// rows are marked where they live: every task's update of a variable held
// by the cluster marks the rows it writes in the owner's storage (one byte
// a row, next to the value; a whole-value update marks every row), and the
// owner takes and clears the marks when it saves; a process's local
// variables use their own marks (rank 0 writes them). Let one incremental
// saver save a given variable: two would each see only the rows changed
// since the other's save. The marks cost one more (small) transfer per
// remote sparse update; they are off until a saver's first incremental
// save (always a base) turns them on, so other programs do not pay it. Rank 0 decides, for all
// tasks, when a save writes a base instead: no chain yet (the first save, or after a failed one), a
// chain of max_deltas_per_base deltas, a checkpoint in another directory, or a task whose delta
// would exceed max_delta_fraction of its full share. max_to_keep never deletes a base or delta that
// a kept checkpoint needs. restore() of a delta verifies the whole chain (every link present with
// its recorded index checksum, every tensor read and its checksum checked) on every task before any
// variable changes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "varstate/cluster.h"
#include "varstate/saver.h"
#include "varstate/variable.h"

namespace varstate {

class FileSystem;

struct DistributedSaverOptions {
  // Default: the graph's global variables (at construction).
  std::optional<std::vector<Variable>> var_list = std::nullopt;
  // Recent checkpoints kept (0 keeps all).
  int max_to_keep = 5;
  // Rank 0 writes "<prefix>.<meta_graph_suffix>" with every save.
  bool write_meta_graph = true;
  std::string meta_graph_suffix = "meta";
  Graph* graph = nullptr;             // default: the thread's default graph
  FileSystem* file_system = nullptr;  // default: default_file_system()
  // Incremental saves: a base after this many deltas, or when a task's
  // delta would exceed this fraction of its full share (as SaverOptions).
  int max_deltas_per_base = 10;
  double max_delta_fraction = 0.5;
};

// The options of one save (the fields of Saver's SaveOptions it supports).
struct DistributedSaveOptions {
  std::optional<int64_t> global_step = std::nullopt;  // appended as "-<step>"
  std::string latest_filename = "";                   // default "checkpoint"
  // A delta of this saver's chain, or a new base (see above).
  bool incremental = false;
};

class DistributedSaver {
 public:
  // Same variables, in the same order, on every task.
  explicit DistributedSaver(Cluster& cluster, DistributedSaverOptions options = {});
  ~DistributedSaver();
  DistributedSaver(const DistributedSaver&) = delete;
  DistributedSaver& operator=(const DistributedSaver&) = delete;

  // Collective. Saves to save_path (+ "-<global_step>") and returns that
  // prefix on every task.
  std::string save(const std::string& save_path, std::optional<int64_t> global_step = std::nullopt,
                   const std::string& latest_filename = "");
  std::string save(const std::string& save_path, const DistributedSaveOptions& options);
  // Collective. Restores every variable from the checkpoint `save_path`.
  void restore(const std::string& save_path);
  // Checkpoints this saver keeps, oldest first: the newest max_to_keep it
  // saved, or was given by the calls below. The same list on every task.
  std::vector<std::string> last_checkpoints() const;
  // Collective. Replaces that list with rank 0's `last_checkpoints` (the
  // other tasks' argument is ignored), as Saver::set_last_checkpoints.
  void set_last_checkpoints(const std::vector<std::string>& last_checkpoints);
  // Collective. After a restart: keeps those of rank 0's `checkpoint_paths`
  // whose files exist (checked on rank 0), so that max_to_keep spans
  // restarts; without it the previous run's checkpoints stay on disk,
  // unlisted. Pass get_checkpoint_state(dir)->all_model_checkpoint_paths:
  //   if (auto state = get_checkpoint_state(dir))
  //     saver.recover_last_checkpoints(state->all_model_checkpoint_paths);
  void recover_last_checkpoints(const std::vector<std::string>& checkpoint_paths);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace varstate
