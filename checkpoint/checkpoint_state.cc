#include "varstate/checkpoint_state.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "base/logging.h"
#include "checkpoint/checkpoint_files.h"
#include "checkpoint/file_system.h"
#include "checkpoint/tensor_bundle.h"
#include "proto/checkpoint_state.pb.h"
#include "varstate/error.h"

namespace varstate {
namespace {

constexpr const char* kDefaultStateFile = "checkpoint";

bool is_absolute(const std::string& p) { return !p.empty() && p[0] == '/'; }

// os.path.join(dir, p).
std::string join(const std::string& dir, const std::string& p) {
  if (is_absolute(p) || dir.empty()) return p;
  return dir.back() == '/' ? dir + p : dir + "/" + p;
}

// os.path.relpath(p, start).
std::string relative_to(const std::string& p, const std::string& start) {
  namespace fs = std::filesystem;
  fs::path rel =
      fs::absolute(p).lexically_normal().lexically_relative(fs::absolute(start).lexically_normal());
  std::string out = rel.string();
  return out.empty() ? "." : out;
}

std::string state_file_in(const std::string& dir, const std::string& latest_filename) {
  std::string name = latest_filename.empty() ? kDefaultStateFile : latest_filename;
  if (name.find('/') != std::string::npos) {
    throw ValueError("latest_filename " + name + " must not contain a path separator");
  }
  return join(dir, name);
}

class CollectFirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (error.empty())
      error =
          "line " + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  std::string error;
};

}  // namespace

std::string checkpoint_state_to_text(const CheckpointState& state) {
  tf::CheckpointState proto;
  proto.set_model_checkpoint_path(state.model_checkpoint_path);
  for (const auto& p : state.all_model_checkpoint_paths) proto.add_all_model_checkpoint_paths(p);
  for (double t : state.all_model_checkpoint_timestamps)
    proto.add_all_model_checkpoint_timestamps(t);
  proto.set_last_preserved_timestamp(state.last_preserved_timestamp);
  std::string text;
  google::protobuf::TextFormat::PrintToString(proto, &text);
  return text;
}

CheckpointState parse_checkpoint_state(std::string_view text) {
  tf::CheckpointState proto;
  google::protobuf::TextFormat::Parser parser;
  CollectFirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &proto)) {
    throw InvalidArgumentError("unparseable checkpoint state: " + errors.error);
  }
  CheckpointState state;
  state.model_checkpoint_path = proto.model_checkpoint_path();
  state.all_model_checkpoint_paths.assign(proto.all_model_checkpoint_paths().begin(),
                                          proto.all_model_checkpoint_paths().end());
  state.all_model_checkpoint_timestamps.assign(proto.all_model_checkpoint_timestamps().begin(),
                                               proto.all_model_checkpoint_timestamps().end());
  state.last_preserved_timestamp = proto.last_preserved_timestamp();
  return state;
}

std::optional<CheckpointState> get_checkpoint_state(const std::string& checkpoint_dir,
                                                    const std::string& latest_filename,
                                                    FileSystem* fs) {
  FileSystem& files = fs ? *fs : *default_file_system();
  const std::string path = state_file_in(checkpoint_dir, latest_filename);
  if (!files.file_exists(path)) return std::nullopt;
  CheckpointState state;
  try {
    state = parse_checkpoint_state(read_file_to_string(files, path));
  } catch (const Error& e) {
    logger().warn("reading checkpoint state {}: {}: Checkpoint ignored", varstate::quoted(path),
                  e.what());
    return std::nullopt;
  }
  if (state.model_checkpoint_path.empty()) {
    throw ValueError("Invalid checkpoint state loaded from " + checkpoint_dir);
  }
  state.model_checkpoint_path = join(checkpoint_dir, state.model_checkpoint_path);
  for (auto& p : state.all_model_checkpoint_paths) p = join(checkpoint_dir, p);
  return state;
}

void update_checkpoint_state(const std::string& save_dir, const std::string& model_checkpoint_path,
                             const std::vector<std::string>& all_model_checkpoint_paths,
                             const std::string& latest_filename,
                             const UpdateCheckpointStateOptions& options) {
  FileSystem& files = options.file_system ? *options.file_system : *default_file_system();
  const std::string path = state_file_in(save_dir, latest_filename);

  CheckpointState state;
  state.model_checkpoint_path = model_checkpoint_path;
  state.all_model_checkpoint_paths = all_model_checkpoint_paths;
  if (options.save_relative_paths) {
    if (is_absolute(state.model_checkpoint_path)) {
      state.model_checkpoint_path = relative_to(state.model_checkpoint_path, save_dir);
    }
    for (auto& p : state.all_model_checkpoint_paths) {
      if (is_absolute(p)) p = relative_to(p, save_dir);
    }
  }
  if (state.all_model_checkpoint_paths.empty() ||
      state.all_model_checkpoint_paths.back() != state.model_checkpoint_path) {
    state.all_model_checkpoint_paths.push_back(state.model_checkpoint_path);
  }
  if (!options.all_model_checkpoint_timestamps.empty() &&
      options.all_model_checkpoint_timestamps.size() != state.all_model_checkpoint_paths.size()) {
    throw ValueError("Checkpoint timestamps, if provided, must match checkpoint paths (got " +
                     std::to_string(state.all_model_checkpoint_paths.size()) + " paths and " +
                     std::to_string(options.all_model_checkpoint_timestamps.size()) +
                     " timestamps)");
  }
  state.all_model_checkpoint_timestamps = options.all_model_checkpoint_timestamps;
  state.last_preserved_timestamp = options.last_preserved_timestamp;
  // A relative save_dir: store paths relative to it, so the directory can move.
  if (!is_absolute(save_dir)) {
    if (!is_absolute(state.model_checkpoint_path)) {
      state.model_checkpoint_path = relative_to(state.model_checkpoint_path, save_dir);
    }
    for (auto& p : state.all_model_checkpoint_paths) {
      if (!is_absolute(p)) p = relative_to(p, save_dir);
    }
  }
  if (path == state.model_checkpoint_path) {
    throw InvalidArgumentError("Save path '" + model_checkpoint_path +
                               "' conflicts with path used for checkpoint state.  Please use a "
                               "different save path.");
  }
  try {
    write_file_atomically(files, path, checkpoint_state_to_text(state));
  } catch (...) {
    rethrow_with_context("updating checkpoint state " + varstate::quoted(path));
  }
}

bool checkpoint_exists(const std::string& prefix, FileSystem* fs) {
  FileSystem& files = fs ? *fs : *default_file_system();
  if (files.file_exists(bundle_index_filename(prefix))) {
    // A V2 checkpoint needs its data shards too (an interrupted deletion or
    // copy can leave an index without them): every shard of some count N.
    const std::vector<std::string> data = match_files(files, prefix + ".data-?????-of-?????");
    std::set<int> counts;
    for (const std::string& f : data) counts.insert(std::atoi(f.c_str() + f.size() - 5));
    for (int n : counts) {
      bool all = n > 0;
      for (int k = 0; all && k < n; ++k)
        all = files.file_exists(bundle_data_filename(prefix, k, n));
      if (all) return true;
    }
    return false;
  }
  return !match_files(files, prefix).empty();
}

std::optional<std::string> latest_checkpoint(const std::string& checkpoint_dir,
                                             const std::string& latest_filename, FileSystem* fs) {
  std::optional<CheckpointState> state = get_checkpoint_state(checkpoint_dir, latest_filename, fs);
  if (!state || state->model_checkpoint_path.empty()) return std::nullopt;
  if (checkpoint_exists(state->model_checkpoint_path, fs)) return state->model_checkpoint_path;
  logger().error("Couldn't match files for checkpoint {}", state->model_checkpoint_path);
  return std::nullopt;
}

void remove_checkpoint(const std::string& prefix, const std::string& meta_graph_suffix,
                       FileSystem* fs) {
  FileSystem& files = fs ? *fs : *default_file_system();
  delete_checkpoint_files(
      files, prefix,
      meta_graph_suffix.empty() ? std::string() : meta_graph_filename(prefix, meta_graph_suffix));
}

}  // namespace varstate
