#include "checkpoint/unsynced_file_system.h"

#include <string>
#include <utility>
#include <vector>

namespace varstate::internal {
namespace {

class UnsyncedWritableFile : public WritableFile {
 public:
  explicit UnsyncedWritableFile(std::unique_ptr<WritableFile> file) : file_(std::move(file)) {}
  void append(const void* data, size_t n) override { file_->append(data, n); }
  void sync() override {}
  void close() override { file_->close(); }
  const std::string& path() const override { return file_->path(); }

 private:
  std::unique_ptr<WritableFile> file_;
};

class UnsyncedFileSystem : public FileSystem {
 public:
  explicit UnsyncedFileSystem(FileSystem& base) : base_(base) {}

  std::unique_ptr<WritableFile> new_writable_file(const std::string& path) override {
    return std::make_unique<UnsyncedWritableFile>(base_.new_writable_file(path));
  }
  std::unique_ptr<RandomAccessFile> new_random_access_file(const std::string& path) override {
    return base_.new_random_access_file(path);
  }
  bool file_exists(const std::string& path) override { return base_.file_exists(path); }
  uint64_t file_size(const std::string& path) override { return base_.file_size(path); }
  void delete_file(const std::string& path) override { base_.delete_file(path); }
  void rename_file(const std::string& from, const std::string& to) override {
    base_.rename_file(from, to);
  }
  std::vector<std::string> list_dir(const std::string& dir) override { return base_.list_dir(dir); }
  void create_dir(const std::string& dir) override { base_.create_dir(dir); }
  void delete_dir(const std::string& dir) override { base_.delete_dir(dir); }
  void sync_dir(const std::string&) override {}

 private:
  FileSystem& base_;
};

}  // namespace

std::unique_ptr<FileSystem> unsynced_file_system(FileSystem& base) {
  return std::make_unique<UnsyncedFileSystem>(base);
}

}  // namespace varstate::internal
