#include "checkpoint/checkpoint_writer.h"

#include <algorithm>
#include <utility>

#include "checkpoint/checkpoint_files.h"
#include "checkpoint/file_system.h"
#include "checkpoint/saver_io_internal.h"
#include "checkpoint/tensor_bundle.h"
#include "checkpoint/v1_writer.h"
#include "varstate/error.h"

namespace varstate {
namespace {

// A shard that is one file writer of a format (BundleWriter, V1Writer: the
// same add, add_slice and finish).
template <typename FileWriter>
class FileShard : public CheckpointWriter::Shard {
 public:
  template <typename Arg>
  FileShard(std::string path, Arg arg) : writer_(std::move(path), std::move(arg)) {}
  void add(std::string_view name, const TensorView& tensor) override { writer_.add(name, tensor); }
  void add_slice(std::string_view full_name, const std::vector<int64_t>& full_shape,
                 const TensorSlice& slice, const TensorView& tensor) override {
    writer_.add_slice(full_name, full_shape, slice, tensor);
  }
  void finish() override { writer_.finish(); }

 protected:
  FileWriter writer_;
};

// TensorFlow's V2 format: one bundle per shard (BundleWriter). GPU tensors
// are streamed through the shard's staging buffers.
class BundleCheckpointWriter final : public CheckpointWriter {
 public:
  BundleCheckpointWriter(std::string prefix, CheckpointWriterOptions options)
      : CheckpointWriter(std::move(prefix), std::move(options)) {
    if (this->options().sharded && this->options().temp_prefix.empty()) {
      temp_ = temp_prefix_for(path());
    } else {
      temp_ = this->options().temp_prefix;
    }
  }

  std::string_view format_name() const override { return "V2"; }
  bool writes_deltas() const override { return true; }
  std::vector<std::string> files() const override {
    return v2_checkpoint_files(path(), std::max(1, num_shards()), "");
  }
  bool stages_shards() const override { return options().sharded; }

  std::unique_ptr<Shard> begin_shard(int shard) const override {
    const std::string prefix =
        options().sharded ? sharded_prefix(temp_, shard, num_shards()) : path();
    return std::make_unique<BundleShard>(prefix, &file_system(), options().staging_buffer_bytes);
  }

  void commit() override {
    if (!options().sharded) return;
    if (num_shards() == 0) {
      BundleWriter empty(path(), {.file_system = &file_system()});
      empty.finish();
      return;
    }
    std::vector<std::string> shards;
    for (int k = 0; k < num_shards(); ++k) shards.push_back(sharded_prefix(temp_, k, num_shards()));
    merge_bundles(shards, path(), {.file_system = &file_system()});
  }

  void abandon() noexcept override {
    if (options().sharded) remove_temp_dir(file_system(), temp_);
  }

 private:
  class BundleShard final : public FileShard<BundleWriter> {
   public:
    BundleShard(const std::string& prefix, FileSystem* fs, size_t staging_bytes)
        : FileShard(prefix, BundleWriterOptions{.file_system = fs}), staging_(staging_bytes) {}
    void add_tensor(const std::string& name, const std::optional<SaveSliceInfo>& slice,
                    const Tensor& value) override {
      write_variable_tensor(writer_, name, slice, value, staging_);
    }

   private:
    StagingBuffers staging_;
  };

  std::string temp_;
};

// TensorFlow's V1 format: one table file per shard (V1Writer), each final
// once finished. Values are copied to the host as they are added.
class V1CheckpointWriter final : public CheckpointWriter {
 public:
  V1CheckpointWriter(std::string prefix, CheckpointWriterOptions options)
      : CheckpointWriter(std::move(prefix), std::move(options)) {}

  std::string_view format_name() const override { return "V1"; }
  bool writes_deltas() const override { return false; }
  void check_dtype(const std::string& what, DType dtype) const override {
    if (!v1_supports_dtype(dtype)) {
      throw UnimplementedError(
          "saving " + quoted(what) + " in the V1 format: it cannot hold dtype " +
          std::string(dtype_name(dtype)) + " (TensorFlow's SaveSlices neither); save V2");
    }
  }
  std::string recorded_path() const override {
    if (!options().sharded) return path();
    const std::string first = sharded_prefix(path(), 0, num_shards());
    return path() + "-?????" + first.substr(path().size() + 6);  // "-00000" -> "-?????"
  }
  std::vector<std::string> files() const override {
    if (!options().sharded) return {path()};
    std::vector<std::string> out;
    for (int k = 0; k < num_shards(); ++k) out.push_back(sharded_prefix(path(), k, num_shards()));
    return out;
  }
  bool stages_shards() const override { return false; }

  std::unique_ptr<Shard> begin_shard(int shard) const override {
    return std::make_unique<V1Shard>(
        options().sharded ? sharded_prefix(path(), shard, num_shards()) : path(), &file_system());
  }
  void commit() override {}

 private:
  class V1Shard final : public FileShard<V1Writer> {
   public:
    V1Shard(std::string path, FileSystem* fs) : FileShard(std::move(path), fs) {}
    void add_tensor(const std::string& name, const std::optional<SaveSliceInfo>& slice,
                    const Tensor& value) override {
      const Tensor host = value.to_host();
      if (slice) {
        writer_.add_slice(name, slice->full_shape, slice_of(*slice), host_view(host));
      } else {
        writer_.add(name, host_view(host));
      }
    }
  };
};

}  // namespace

CheckpointWriter::CheckpointWriter(std::string path, CheckpointWriterOptions options)
    : path_(std::move(path)),
      options_(std::move(options)),
      fs_(options_.file_system ? options_.file_system : default_file_system()) {}

void CheckpointWriter::check_dtype(const std::string& /*what*/, DType /*dtype*/) const {}

std::unique_ptr<CheckpointWriter> make_checkpoint_writer(CheckpointFormatVersion format,
                                                         const std::string& prefix,
                                                         CheckpointWriterOptions options) {
  if (!options.sharded && options.num_shards != 1) {
    throw InvalidArgumentError("writing checkpoint " + quoted(prefix) + ": " +
                               std::to_string(options.num_shards) +
                               " shards need a sharded writer");
  }
  switch (format) {
    case CheckpointFormatVersion::kV2:
      return std::make_unique<BundleCheckpointWriter>(prefix, std::move(options));
    case CheckpointFormatVersion::kV1:
      return std::make_unique<V1CheckpointWriter>(prefix, std::move(options));
    default:
      throw InvalidArgumentError("writing checkpoint " + quoted(prefix) +
                                 ": no writer for checkpoint format version " +
                                 std::to_string(static_cast<int>(format)));
  }
}

}  // namespace varstate
