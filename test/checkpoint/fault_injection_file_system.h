// A FileSystem for tests that fails chosen operations and simulates crashes.
//
// It forwards to a base FileSystem and can (1) make the n-th next call of an
// operation (append, sync, rename, ...) throw UnavailableError, and (2)
// simulate a machine crash with drop_unsynced_data(): every file written
// through it loses what was appended after its last sync(), and files whose
// creation was not made durable by a sync_dir() of their directory
// disappear. Tests use it to check that a failed or interrupted save leaves
// the previous checkpoint readable. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "checkpoint/file_system.h"

namespace varstate {

enum class FileOp {
  kCreate,   // new_writable_file
  kAppend,   // WritableFile::append
  kSync,     // WritableFile::sync
  kClose,    // WritableFile::close
  kRename,   // rename_file
  kDelete,   // delete_file
  kSyncDir,  // sync_dir
  kRead,     // RandomAccessFile::read
};

class FaultInjectionFileSystem : public FileSystem {
 public:
  // `base` must outlive this object.
  explicit FaultInjectionFileSystem(FileSystem* base);
  ~FaultInjectionFileSystem() override;

  // The n-th (1-based) call of `op` from now on throws UnavailableError
  // ("injected fault"); so does every later one when `sticky`.
  void fail_nth(FileOp op, int n, bool sticky = false);
  // Removes every pending fault.
  void clear_faults();
  // Number of calls of `op` so far.
  int count(FileOp op) const;

  // Simulates a crash: truncates every file written through this object to
  // its last synced size and deletes files created since the last sync_dir()
  // of their directory.
  void drop_unsynced_data();

  std::unique_ptr<WritableFile> new_writable_file(const std::string& path) override;
  std::unique_ptr<RandomAccessFile> new_random_access_file(const std::string& path) override;
  bool file_exists(const std::string& path) override;
  uint64_t file_size(const std::string& path) override;
  void delete_file(const std::string& path) override;
  void rename_file(const std::string& from, const std::string& to) override;
  std::vector<std::string> list_dir(const std::string& dir) override;
  void create_dir(const std::string& dir) override;
  void delete_dir(const std::string& dir) override;
  void sync_dir(const std::string& dir) override;

 private:
  class File;
  class ReadFile;
  struct FileState {
    uint64_t size = 0;           // bytes appended
    uint64_t synced_size = 0;    // bytes made durable by sync()
    bool entry_durable = false;  // directory entry synced
  };
  struct Fault {
    int countdown;
    bool sticky;
  };

  // Counts a call of `op` and throws if a fault is due.
  void maybe_fail(FileOp op, const std::string& path);
  void on_append(const std::string& path, size_t n);
  void on_sync(const std::string& path);

  FileSystem* base_;
  mutable std::mutex mu_;
  std::map<FileOp, int> counts_;
  std::map<FileOp, Fault> faults_;
  std::map<std::string, FileState> files_;
};

}  // namespace varstate
