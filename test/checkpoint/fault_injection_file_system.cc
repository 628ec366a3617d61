#include "checkpoint/fault_injection_file_system.h"

#include "varstate/error.h"

namespace varstate {
namespace {

const char* op_name(FileOp op) {
  switch (op) {
    case FileOp::kCreate:
      return "create";
    case FileOp::kAppend:
      return "append";
    case FileOp::kSync:
      return "fsync";
    case FileOp::kClose:
      return "close";
    case FileOp::kRename:
      return "rename";
    case FileOp::kDelete:
      return "delete";
    case FileOp::kSyncDir:
      return "fsync of directory";
    case FileOp::kRead:
      return "read";
  }
  return "?";
}

}  // namespace

class FaultInjectionFileSystem::File : public WritableFile {
 public:
  File(FaultInjectionFileSystem* fs, std::unique_ptr<WritableFile> base)
      : fs_(fs), base_(std::move(base)) {}

  void append(const void* data, size_t n) override {
    fs_->maybe_fail(FileOp::kAppend, path());
    base_->append(data, n);
    fs_->on_append(path(), n);
  }
  void sync() override {
    fs_->maybe_fail(FileOp::kSync, path());
    base_->sync();
    fs_->on_sync(path());
  }
  void close() override {
    fs_->maybe_fail(FileOp::kClose, path());
    base_->close();
  }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultInjectionFileSystem* fs_;
  std::unique_ptr<WritableFile> base_;
};

class FaultInjectionFileSystem::ReadFile : public RandomAccessFile {
 public:
  ReadFile(FaultInjectionFileSystem* fs, std::unique_ptr<RandomAccessFile> base)
      : fs_(fs), base_(std::move(base)) {}
  size_t read(uint64_t offset, size_t n, void* dst) const override {
    fs_->maybe_fail(FileOp::kRead, path());
    return base_->read(offset, n, dst);
  }
  uint64_t size() const override { return base_->size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultInjectionFileSystem* fs_;
  std::unique_ptr<RandomAccessFile> base_;
};

FaultInjectionFileSystem::FaultInjectionFileSystem(FileSystem* base) : base_(base) {}
FaultInjectionFileSystem::~FaultInjectionFileSystem() = default;

void FaultInjectionFileSystem::fail_nth(FileOp op, int n, bool sticky) {
  std::lock_guard lock(mu_);
  faults_[op] = Fault{n, sticky};
}

void FaultInjectionFileSystem::clear_faults() {
  std::lock_guard lock(mu_);
  faults_.clear();
}

int FaultInjectionFileSystem::count(FileOp op) const {
  std::lock_guard lock(mu_);
  auto it = counts_.find(op);
  return it == counts_.end() ? 0 : it->second;
}

void FaultInjectionFileSystem::maybe_fail(FileOp op, const std::string& path) {
  std::lock_guard lock(mu_);
  ++counts_[op];
  auto it = faults_.find(op);
  if (it == faults_.end()) return;
  Fault& fault = it->second;
  if (fault.countdown > 1) {
    --fault.countdown;
    return;
  }
  if (!fault.sticky) faults_.erase(it);
  throw UnavailableError(std::string(op_name(op)) + " \"" + path + "\": injected fault");
}

void FaultInjectionFileSystem::on_append(const std::string& path, size_t n) {
  std::lock_guard lock(mu_);
  files_[path].size += n;
}

void FaultInjectionFileSystem::on_sync(const std::string& path) {
  std::lock_guard lock(mu_);
  FileState& state = files_[path];
  state.synced_size = state.size;
}

void FaultInjectionFileSystem::drop_unsynced_data() {
  std::lock_guard lock(mu_);
  for (const auto& [path, state] : files_) {
    if (!base_->file_exists(path)) continue;
    if (!state.entry_durable) {
      base_->delete_file(path);
    } else if (base_->file_size(path) > state.synced_size) {
      std::string kept = read_file_to_string(*base_, path);
      kept.resize(state.synced_size);
      auto file = base_->new_writable_file(path);
      file->append(kept);
      file->close();
    }
  }
  files_.clear();
}

std::unique_ptr<WritableFile> FaultInjectionFileSystem::new_writable_file(const std::string& path) {
  maybe_fail(FileOp::kCreate, path);
  auto file = std::make_unique<File>(this, base_->new_writable_file(path));
  std::lock_guard lock(mu_);
  files_[path] = FileState{};
  return file;
}

std::unique_ptr<RandomAccessFile> FaultInjectionFileSystem::new_random_access_file(
    const std::string& path) {
  return std::make_unique<ReadFile>(this, base_->new_random_access_file(path));
}

bool FaultInjectionFileSystem::file_exists(const std::string& path) {
  return base_->file_exists(path);
}

uint64_t FaultInjectionFileSystem::file_size(const std::string& path) {
  return base_->file_size(path);
}

void FaultInjectionFileSystem::delete_file(const std::string& path) {
  maybe_fail(FileOp::kDelete, path);
  base_->delete_file(path);
  std::lock_guard lock(mu_);
  files_.erase(path);
}

void FaultInjectionFileSystem::rename_file(const std::string& from, const std::string& to) {
  maybe_fail(FileOp::kRename, from);
  base_->rename_file(from, to);
  std::lock_guard lock(mu_);
  auto it = files_.find(from);
  if (it != files_.end()) {
    FileState state = it->second;
    files_.erase(it);
    state.entry_durable = false;
    files_[to] = state;
  }
}

std::vector<std::string> FaultInjectionFileSystem::list_dir(const std::string& dir) {
  return base_->list_dir(dir);
}

void FaultInjectionFileSystem::create_dir(const std::string& dir) { base_->create_dir(dir); }

void FaultInjectionFileSystem::delete_dir(const std::string& dir) { base_->delete_dir(dir); }

void FaultInjectionFileSystem::sync_dir(const std::string& dir) {
  maybe_fail(FileOp::kSyncDir, dir);
  base_->sync_dir(dir);
  std::lock_guard lock(mu_);
  for (auto& [path, state] : files_) {
    if (dirname_of(path) == dir) state.entry_durable = true;
  }
}

}  // namespace varstate
