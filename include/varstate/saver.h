// Saver: saves variables to checkpoints and restores them (tf.train.Saver).
//
// A Saver is built over a list of variables (keyed by their op names) or a
// map from checkpoint keys to variables. save() writes a TensorFlow V2
// tensor bundle ("my-model-1000.index" + ".data-*"; or with write_version V1
// a V1 table file, checkpoint/v1_writer.h), optionally a meta graph
// ("my-model-1000.meta"), and records the checkpoint in the directory's
// "checkpoint" state file; restore() reads any V2 or V1 checkpoint back.
//
//   Saver saver({.var_list = std::vector<Variable>{v1, v2}, .max_to_keep = 3});
//   Session sess;
//   sess.run(global_variables_initializer());
//   for (int64_t step = 0; step < 1000000; ++step) {
//     train_step();
//     if (step % 1000 == 0) saver.save(sess, "ckpt/my-model", {.global_step = step});
//   }
//   ...
//   saver.restore(sess, *latest_checkpoint("ckpt"));
//
// Partitioned variables (those with save_slice_info()) are saved as slices
// of one full tensor and restore from any partitioning, into an
// unpartitioned variable and vice versa. With `sharded`, each device's
// variables go to their own data shard, written in parallel by one thread
// per device; GPU variables are copied out through two pinned staging
// buffers per device whose device-to-host copies overlap the file writes,
// so host memory stays bounded whatever the model size.
//
// Crash safety: every file is written under a temporary name, synced
// (unless SaverOptions::sync is false) and renamed; the state file changes only after the
// checkpoint and its meta graph are durable, and old checkpoints are deleted only after that. An
// interrupted save leaves latest_checkpoint() naming the previous
// checkpoint. (Saving twice to the same prefix replaces the data before the
// index; give each save its own global_step to keep the previous one intact.)
// Each save first removes what crashed saves of its save_path left in the
// directory (temporary folders and files, data shards of a checkpoint whose
// deletion was cut short after its index) unless a save in flight in this
// process owns them; old checkpoints are deleted index first. Checksums are
// computed over a copy of each chunk, the bytes written, so a save that
// succeeds restores even while other threads update a variable without its
// lock (its values may then be torn).
//
// Incremental saves ({.incremental = true}, varstate/checkpoint_chain.h)
// write only the rows changed since the previous save, as a delta whose
// chain (its base and earlier deltas) restore() applies in order; the
// retention never deletes a base or delta that a kept checkpoint needs.
//
// Restore is all-or-nothing: the whole checkpoint is checked against the
// variables first (keys, dtypes, shapes, slice coverage), then every tensor
// is read (checksums verified) into fresh buffers on its variable's device,
// and only then are the variables assigned. A restore that throws has
// changed no variable.
//
// Asynchronous save ({.async = true}) returns once each variable has been
// copied on its own device (under its update lock), and writes in a
// background thread; the returned SaveHandle waits for it. A later save or
// restore through the same Saver first waits for the pending one.
//
// Thread safety: a Saver may be used from several threads; its saves and
// restores are serialized.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "varstate/graph.h"
#include "varstate/session.h"
#include "varstate/variable.h"

namespace varstate {

class FileSystem;
struct MetaGraphDef;

// TensorFlow's SaverDef.CheckpointFormatVersion.
enum class CheckpointFormatVersion {
  kLegacy = 0,
  kV1 = 1,
  kV2 = 2
};

// TensorFlow's SaverDef (saver.proto) as a plain struct; serialize() and
// parse() use the protobuf wire format with TensorFlow's field numbers.
struct SaverDef {
  std::string filename_tensor_name;  // "save/Const:0"
  std::string save_tensor_name;      // "save/control_dependency:0" or, sharded, "save/Identity:0"
  std::string restore_op_name;       // "save/restore_all"
  int32_t max_to_keep = 5;
  bool sharded = false;
  float keep_checkpoint_every_n_hours = 10000.0f;
  CheckpointFormatVersion version = CheckpointFormatVersion::kV2;

  std::string serialize() const;
  // Throws InvalidArgumentError when `bytes` is not a SaverDef.
  static SaverDef parse(const std::string& bytes);
  bool operator==(const SaverDef&) const = default;
};

// The variables of a Saver: a list (keyed by op name, or by the full name of
// a partition's variable) or a map from checkpoint keys to variables.
using VarList = std::variant<std::vector<Variable>, std::map<std::string, Variable>>;

struct SaverOptions {
  // Default: the graph's global variables (at build time).
  std::optional<VarList> var_list;
  // Allow restoring into a variable whose shape differs from the saved one
  // but has as many elements.
  bool reshape = false;
  // One data shard per device (by Variable::placement()), written in parallel.
  bool sharded = false;
  // Number of recent checkpoints kept; 0 keeps all (and the state file
  // lists only the newest).
  int max_to_keep = 5;
  // Additionally keep one checkpoint per this many hours.
  double keep_checkpoint_every_n_hours = 10000.0;
  // Name scope of the saver's ops; default "save" (made unique in the graph).
  std::string name;
  // Restore one variable at a time within each device, bounding extra memory
  // to the largest variable (the checkpoint is then read twice: checked,
  // then assigned, to stay all-or-nothing).
  bool restore_sequentially = false;
  // Recreate a saver from a SaverDef (as_saver_def()); its max_to_keep,
  // sharded, keep_checkpoint_every_n_hours, version and name take precedence.
  std::optional<SaverDef> saver_def;
  // Resolve the variables only in build(); save/restore before that throw.
  bool defer_build = false;
  // Without variables, construct a no-op saver instead of raising.
  bool allow_empty = false;
  // V2 (tensor bundle) or V1: one SavedTensorSlices table file at the
  // checkpoint path, or with `sharded` one per device whose pattern
  // ("model-?????-of-00002") is the recorded path; V1 has no bfloat16, uint32
  // or uint64 (save() raises UnimplementedError before writing). LEGACY is
  // rejected. Every format restores.
  CheckpointFormatVersion write_version = CheckpointFormatVersion::kV2;
  // Write the state file's paths relative to its directory ("model-1000"),
  // so a checkpoint folder can be copied or moved and still resume from its
  // own files. By default they are written as given (absolute for an
  // absolute save_path), as TensorFlow does. Either form is read back
  // (get_checkpoint_state joins relative paths onto the directory).
  bool save_relative_paths = false;

  // --- beyond TensorFlow ------------------------------------------------------
  Graph* graph = nullptr;             // default: the thread's default graph
  FileSystem* file_system = nullptr;  // default: default_file_system()
  // Durability against crashes: by default every file of a save (data,
  // index, meta graph, state file) is fsync()ed before it is renamed into
  // place, and its directory synced, so a power loss leaves the previous
  // checkpoint or the new one. false trades that durability for speed, as
  // TensorFlow's Saver does (it never syncs): the files are written and
  // renamed in the same order but left in the page cache, so a crash of the
  // machine (not of the process) soon after a save can lose or tear that
  // checkpoint while the state file already names it.
  bool sync = true;
  // Bytes of each of the two pinned staging buffers per device for GPU
  // transfers.
  size_t staging_buffer_bytes = size_t{64} << 20;
  // Seconds since the Unix epoch, for checkpoint timestamps (tests inject one).
  std::function<double()> clock;
  // Incremental saves (SaveOptions::incremental): a save writes a new base
  // (a full checkpoint) instead of a delta once the chain holds this many
  // deltas, or when the delta would take more than this fraction of a full
  // save's bytes.
  int max_deltas_per_base = 10;
  double max_delta_fraction = 0.5;
};

// A global step: an integer or a scalar int32/int64 Variable.
using GlobalStep = std::variant<int64_t, Variable>;

struct SaveOptions {
  // Appended to the path: "my-model" -> "my-model-1000".
  std::optional<GlobalStep> global_step;
  // State file name in the checkpoint's directory; default "checkpoint".
  std::string latest_filename;
  std::string meta_graph_suffix = "meta";
  bool write_meta_graph = true;
  // Return after the snapshot; write in the background (SaveHandle::wait).
  bool async = false;
  // Write a delta (varstate/checkpoint_chain.h): only the rows changed since
  // this saver's previous incremental save, on top of that checkpoint, which
  // must be in the same directory. The save is a full base instead when
  // there is none (or it failed, or was to this same prefix), when the chain
  // holds max_deltas_per_base deltas, or when the delta would exceed
  // max_delta_fraction of a full save. Saves without `incremental` write
  // full checkpoints outside any chain. V2 only (InvalidArgumentError for
  // write_version V1). Savers sharing a variable should not both save it
  // incrementally: each then finds the other took its changed rows and
  // writes it whole.
  bool incremental = false;
};

// The outcome of a save. Handles are cheap to copy and share one state.
class SaveHandle {
 public:
  SaveHandle();
  // The checkpoint prefix this save writes (known at once); nullopt for an
  // empty saver.
  const std::optional<std::string>& path() const;
  // Blocks until the save has finished and returns path(); rethrows the
  // save's exception if it failed (every time it is called).
  const std::optional<std::string>& wait() const;
  // True once the save has finished (successfully or not); always true for
  // a synchronous save's handle.
  bool done() const;

  struct State;  // shared with the background writer

 private:
  friend class Saver;
  explicit SaveHandle(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

class Saver {
 public:
  // Builds the saver unless options.defer_build. Throws ValueError for a
  // duplicate key or variable (a variable twice, two variables with the same
  // name, the same slice of a partitioned tensor twice, slices mixed with a
  // whole tensor under one key), ValueError for no variables unless
  // allow_empty, InvalidArgumentError for write_version LEGACY.
  explicit Saver(SaverOptions options = {});
  ~Saver();  // waits for a pending asynchronous save
  Saver(Saver&&) noexcept;
  Saver& operator=(Saver&&) noexcept;

  // Resolves the variables and the SaverDef (once; later calls do nothing).
  // Throws as the constructor.
  void build();

  // Saves the variables (which must be initialized: FailedPreconditionError
  // otherwise) to `save_path` + "-<global_step>" and returns the handle; its
  // path() is that prefix, or nullopt for an empty saver. Writes the meta
  // graph "<prefix>.<meta_graph_suffix>" unless !write_meta_graph, then the
  // state file, then deletes checkpoints beyond max_to_keep. Throws
  // ValueError when latest_filename has a '/' or names save_path itself,
  // FailedPreconditionError when not built or when a directory is where the
  // save must write a file (the state file, the index, a data shard, the
  // meta graph; the message names it), and the file layer's errors
  // (synchronously, or from SaveHandle::wait() for an async save). A failed
  // save removes what it wrote (unless it was saving over an existing
  // checkpoint of the same path) and leaves the state file and the list of
  // last_checkpoints() as they were.
  SaveHandle save(const Session& sess, const std::string& save_path,
                  const SaveOptions& options = {});

  // Restores every variable from the checkpoint `save_path` (V2 prefix or V1
  // file/pattern). Throws ValueError when nothing is at save_path;
  // NotFoundError naming key and checkpoint for a missing key or a
  // partitioned tensor whose saved slices do not cover a variable;
  // InvalidArgumentError naming the variable for a dtype mismatch or (unless
  // reshape) a shape mismatch; DataLossError naming file and tensor for
  // corrupt data. On any error no variable has changed.
  void restore(const Session& sess, const std::string& save_path);

  // Not-yet-deleted checkpoints this saver wrote, oldest first.
  std::vector<std::string> last_checkpoints() const;
  // Replaces that list; the paths get an infinite timestamp (deprecated in
  // TensorFlow: prefer set_last_checkpoints_with_time).
  void set_last_checkpoints(const std::vector<std::string>& last_checkpoints);
  // Replaces that list with (path, Unix-seconds timestamp) pairs.
  void set_last_checkpoints_with_time(
      const std::vector<std::pair<std::string, double>>& last_checkpoints_with_time);
  // After a crash or restart: keeps those of `checkpoint_paths` whose files
  // exist, with their modification times as timestamps. Pass the previous
  // run's list, get_checkpoint_state(dir)->all_model_checkpoint_paths, so
  // that max_to_keep spans restarts: the next save deletes the oldest of
  // them beyond max_to_keep (without it they stay on disk, unlisted).
  void recover_last_checkpoints(const std::vector<std::string>& checkpoint_paths);

  SaverDef as_saver_def() const;
  SaverDef to_proto() const { return as_saver_def(); }
  // A saver over the graph's global variables configured by `saver_def`.
  static Saver from_proto(const SaverDef& saver_def, Graph* graph = nullptr);

  // Builds the meta graph of this saver's graph (variables, the collections
  // in collection_list or all when nullopt, this saver's SaverDef and save
  // node) and writes it to `filename` when not empty (text format when
  // as_text). Throws the file layer's errors.
  MetaGraphDef export_meta_graph(
      const std::string& filename = "",
      const std::optional<std::vector<std::string>>& collection_list = std::nullopt,
      bool as_text = false) const;

  // What is saved: checkpoint key, variable, and for a partition its slice.
  // A dynamic variable (varstate/dynamic_variable.h) is two items: its keys
  // ("<name>-keys", int64 [n] ascending) and its rows ("<name>-values",
  // [n, dim] in that order), taken together; one with a row cap or expiry
  // also saves each key's last update step ("<name>-versions") and update
  // count ("<name>-counts"), int64 [n] in key order.
  enum class Part : uint8_t {
    kValue,     // the variable's value (or its slice)
    kKeys,      // a dynamic variable's keys
    kRows,      // a dynamic variable's rows
    kVersions,  // its keys' last update steps
    kCounts,    // its keys' update counts
  };
  struct Item {
    std::string key;
    Variable variable;
    std::optional<SaveSliceInfo> slice;
    Part part = Part::kValue;
  };
  // The saver's items (empty before build()), sorted by key.
  std::vector<Item> items() const;
  bool is_built() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace varstate
