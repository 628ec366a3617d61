// The "checkpoint" state file: which checkpoints of a directory exist and
// which is the newest.
//
// TensorFlow's CheckpointState in protobuf text format, e.g.
//   model_checkpoint_path: "model.ckpt-2000"
//   all_model_checkpoint_paths: "model.ckpt-1000"
//   all_model_checkpoint_paths: "model.ckpt-2000"
// Paths are stored as given (relative ones relative to the directory) and
// returned by get_checkpoint_state() with relative paths joined onto the
// directory. The file is replaced atomically, so readers see the old or the
// new state, never a mix.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace varstate {

class FileSystem;

struct CheckpointState {
  std::string model_checkpoint_path;                    // newest checkpoint prefix
  std::vector<std::string> all_model_checkpoint_paths;  // oldest first, ends with the newest
  std::vector<double> all_model_checkpoint_timestamps;  // Unix seconds; empty or one per path
  double last_preserved_timestamp = 0;
};

// The text format of `state`, as TensorFlow writes it.
std::string checkpoint_state_to_text(const CheckpointState& state);
// Parses the text format; throws InvalidArgumentError on malformed text.
CheckpointState parse_checkpoint_state(std::string_view text);

// Reads "<checkpoint_dir>/<latest_filename>" ("checkpoint" when empty).
// Returns nullopt when the file is missing, unreadable or unparseable (logged
// as a warning). Throws ValueError("Invalid checkpoint state loaded from
// <dir>") when it names no model_checkpoint_path.
std::optional<CheckpointState> get_checkpoint_state(const std::string& checkpoint_dir,
                                                    const std::string& latest_filename = "",
                                                    FileSystem* fs = nullptr);

struct UpdateCheckpointStateOptions {
  // One per checkpoint path when given.
  std::vector<double> all_model_checkpoint_timestamps;
  double last_preserved_timestamp = 0;
  // Store absolute paths relative to save_dir.
  bool save_relative_paths = false;
  FileSystem* file_system = nullptr;  // default_file_system() when null
};

// Writes the state file of `save_dir` atomically. `model_checkpoint_path` is
// appended to `all_model_checkpoint_paths` unless it is already last. When
// save_dir is relative, relative paths are rewritten relative to it. Throws
// ValueError when timestamps do not match the paths or latest_filename holds
// a '/', InvalidArgumentError when the checkpoint path is the state file's
// own path, and the file layer's errors.
void update_checkpoint_state(const std::string& save_dir, const std::string& model_checkpoint_path,
                             const std::vector<std::string>& all_model_checkpoint_paths = {},
                             const std::string& latest_filename = "",
                             const UpdateCheckpointStateOptions& options = {});

// The newest checkpoint prefix of `checkpoint_dir` if its files exist
// ("<prefix>.index" for V2, or files matching "<prefix>" for V1), else
// nullopt (logging an error when the state names missing files).
std::optional<std::string> latest_checkpoint(const std::string& checkpoint_dir,
                                             const std::string& latest_filename = "",
                                             FileSystem* fs = nullptr);

// True when a V2 index with all its data shards, or V1 files, exist for
// `prefix`.
bool checkpoint_exists(const std::string& prefix, FileSystem* fs = nullptr);

// tf.compat.v1.train.remove_checkpoint: deletes checkpoint `prefix` — a V2
// index (first, so that a deletion cut short never leaves an index without
// its data), its data shards and "<prefix>.<meta_graph_suffix>" (none when
// the suffix is empty), or the V1 files matching `prefix`. A file that
// cannot be deleted is logged and skipped; the state file is not changed.
void remove_checkpoint(const std::string& prefix, const std::string& meta_graph_suffix = "meta",
                       FileSystem* fs = nullptr);

}  // namespace varstate
