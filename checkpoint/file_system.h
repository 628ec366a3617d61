// The file layer under checkpoints.
//
// Every byte a checkpoint reads or writes goes through a FileSystem, so tests
// can substitute one that fails a chosen write, fsync or rename, or that
// forgets data not yet synced (FaultInjectionFileSystem), and check that the
// previous checkpoint survives. default_file_system() is the POSIX one.
//
// Durable replacement of a file is: write a temporary file next to it
// (temp_file_name), sync() it, close() it, rename_file() it over the final
// name, then sync_dir() the directory. write_atomically() does that for
// contents written by a callback, write_file_atomically() for a whole
// string, and commit_temp_file() ends it for a file written step by step.
//
// Errors are thrown as varstate exceptions naming the path and the system
// error: NotFoundError (no such file), PermissionDeniedError,
// AlreadyExistsError, ResourceExhaustedError (disk full), UnknownError (other
// I/O failures). FileSystem objects are thread-safe; a single WritableFile
// must not be used by two threads at once, a RandomAccessFile may.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace varstate {

// A file being written sequentially. Appends may be buffered until sync()
// or close(). Destroying an unclosed file closes it, ignoring errors.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual void append(const void* data, size_t n) = 0;
  void append(std::string_view s) { append(s.data(), s.size()); }
  // Makes everything appended so far durable (fsync).
  virtual void sync() = 0;
  // Flushes and closes; later calls other than close() are errors.
  virtual void close() = 0;
  virtual const std::string& path() const = 0;
};

// Bytes of a file mapped read-only into memory (RandomAccessFile::map):
// valid until the region is destroyed.
class MappedRegion {
 public:
  virtual ~MappedRegion() = default;
  virtual const std::byte* data() const = 0;
  virtual size_t size() const = 0;
};

// A file read at arbitrary offsets. Thread-safe.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to n bytes at `offset` into dst; returns the number read, which
  // is less than n only at the end of the file.
  virtual size_t read(uint64_t offset, size_t n, void* dst) const = 0;
  // Maps bytes [offset, offset + n) read-only, their pages faulted in (read
  // from disk unless cached), so that a reader can checksum them and copy
  // them later without a buffer of its own. nullptr where this file cannot
  // be mapped (the default, a range past the end, a failed mmap): callers
  // then read(). Checkpoint files are never rewritten in place, so the
  // mapped bytes stay the bytes read; a file truncated while mapped would
  // fault on access (SIGBUS).
  virtual std::unique_ptr<MappedRegion> map(uint64_t /*offset*/, size_t /*n*/) const {
    return nullptr;
  }
  virtual uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Creates (or truncates) `path` for writing.
  virtual std::unique_ptr<WritableFile> new_writable_file(const std::string& path) = 0;
  virtual std::unique_ptr<RandomAccessFile> new_random_access_file(const std::string& path) = 0;

  virtual bool file_exists(const std::string& path) = 0;
  virtual uint64_t file_size(const std::string& path) = 0;
  virtual void delete_file(const std::string& path) = 0;
  // Atomically replaces `to` with `from` (POSIX rename).
  virtual void rename_file(const std::string& from, const std::string& to) = 0;
  // Names (not paths) of the entries of `dir`, sorted, without "." and "..".
  virtual std::vector<std::string> list_dir(const std::string& dir) = 0;
  // Creates `dir` and any missing parents; no error if it exists.
  virtual void create_dir(const std::string& dir) = 0;
  // Removes an empty directory.
  virtual void delete_dir(const std::string& dir) = 0;
  // Makes creations, renames and deletions inside `dir` durable.
  virtual void sync_dir(const std::string& dir) = 0;
};

// The process-wide POSIX file system.
FileSystem* default_file_system();

// The directory part of `path` ("." when it has none).
std::string dirname_of(const std::string& path);

// The last component of `path` (all of it when it has no '/').
std::string basename_of(const std::string& path);

// `name` in directory `dir`: `name` alone when `dir` is empty or ".".
std::string join_path(const std::string& dir, const std::string& name);

// Deletes `path` if it exists. Never throws: a failure is logged, for
// clean-up paths where the caller reports its own error (or success).
void best_effort_delete(FileSystem& fs, const std::string& path);

// A fresh temporary name next to `path`: "<path>.tempstate<random u64>",
// TensorFlow's convention.
std::string temp_file_name(const std::string& path);

// Replaces `path` with `contents` durably: temp file, sync, rename, sync of
// the directory. On failure the old file is untouched and the temp file is
// removed (best effort).
void write_file_atomically(FileSystem& fs, const std::string& path, std::string_view contents);

// Replaces `path` durably with what fill(file, temp_path) writes to the
// temporary file: sync, rename, sync of the directory. On failure the old
// file is untouched and the temp file is removed (best effort).
void write_atomically(
    FileSystem& fs, const std::string& path,
    const std::function<void(WritableFile& file, const std::string& temp_path)>& fill);

// Syncs and closes `file` (written at `temp_path`), then renames it over
// `path`. The caller syncs the directory and removes the temp file on failure.
void commit_temp_file(FileSystem& fs, std::unique_ptr<WritableFile> file,
                      const std::string& temp_path, const std::string& path);

// The whole content of `path`.
std::string read_file_to_string(FileSystem& fs, const std::string& path);

// Paths matching `pattern`, whose last component may hold the wildcards '*'
// and '?' (fnmatch rules); sorted. A pattern without wildcards matches the
// file itself if it exists.
std::vector<std::string> match_files(FileSystem& fs, const std::string& pattern);

}  // namespace varstate
