// The files of one checkpoint on a FileSystem, for Saver and
// DistributedSaver. Internal.
//
// A V2 checkpoint "<prefix>" is "<prefix>.index", its data shards
// "<prefix>.data-0000k-of-0000n" and, when written, its meta graph; a V1
// checkpoint is the file "<prefix>" (or its shards "<prefix>-0000k-of-0000n").
// A sharded save writes its shards under a temporary prefix
// (temp_prefix_for: "<prefix>_temp_<hex>/part") before merging them.
// Both removals are best effort (best_effort_delete): a file that cannot be
// deleted is logged and skipped, since they run where the caller reports
// its own error or success.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace varstate {

class FileSystem;

// The checkpoint state file a save to `save_path` updates: `latest_filename`
// (default "checkpoint") in save_path's directory.
std::string state_file_path(const std::string& save_path, const std::string& latest_filename);

// "<checkpoint>.<suffix>", without a V1 sharded suffix "-?????-of-00002".
std::string meta_graph_filename(const std::string& checkpoint, const std::string& suffix);

// Removes the temporary directory of a sharded save whose temporary prefix
// is `temp_prefix` ("<dir>/part"), and every file in it. Never throws.
void remove_temp_dir(FileSystem& fs, const std::string& temp_prefix);

// `prefixes` in the order to delete them in: each delta of an incremental
// chain before the links it needs (the newest first), so that a deletion
// cut short leaves every remaining checkpoint whole and restorable. Each
// prefix's chain record is read from its index; one that cannot be read
// goes first. Never throws.
std::vector<std::string> newest_links_first(FileSystem& fs, std::vector<std::string> prefixes);

// The names (in `dir`) of the checkpoints that the state file
// `latest_filename` (default "checkpoint") of `dir` lists, and of every link
// a listed delta needs: what a save or a compaction must not replace or
// delete. By name: a listed path in another directory (a copied folder's
// absolute paths) names the file of that name in `dir`. Empty when there is
// no state file; throws as get_checkpoint_state for an unreadable one.
std::set<std::string> kept_by_state_file(FileSystem& fs, const std::string& dir,
                                         const std::string& latest_filename);

// Deletes checkpoint `prefix`: its index first (a deletion cut short then
// leaves data files that no longer pass for a checkpoint, never an index
// without its data), its data shards, `meta_graph_file`, and without an
// index the V1 files matching `prefix`. Throws only when the directory
// cannot be listed.
void delete_checkpoint_files(FileSystem& fs, const std::string& prefix,
                             const std::string& meta_graph_file);

// The files a V2 save of `prefix` with `num_shards` data shards creates:
// its index, its data shards and, unless empty, `meta_graph_file`.
std::vector<std::string> v2_checkpoint_files(const std::string& prefix, int num_shards,
                                             const std::string& meta_graph_file);

// Validation before a save or compaction writes anything: throws
// FailedPreconditionError "<what>: <path> is a directory, ..." for the first
// of `paths` (the files it will create or replace, a save's state file
// included) that is a directory, since no rename can replace it. `what`
// names the operation: `saving checkpoint "ckpt/model-1"`.
void check_no_directory_in_the_way(FileSystem& fs, const std::string& what,
                                   const std::vector<std::string>& paths);

// After a save of `checkpoint` failed: deletes what it wrote (as
// delete_checkpoint_files) unless the state file `latest_filename` of its
// directory lists it, which happens when only the steps after the state
// file's rename failed. A checkpoint that existed before the save is the
// caller's to keep. Never throws.
void remove_failed_checkpoint(FileSystem& fs, const std::string& checkpoint,
                              const std::string& meta_graph_file,
                              const std::string& latest_filename);

}  // namespace varstate
