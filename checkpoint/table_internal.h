// The LevelDB-format tables ("SSTables") that hold a V2 bundle's index and a
// V1 checkpoint, read and written with LevelDB's Table/TableBuilder through
// our FileSystem. Internal to the checkpoint module.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/file_system.h"

namespace leveldb {
class Table;
}

namespace varstate {

// TensorFlow's table settings: 256 KiB blocks, restart interval 16, no
// compression (readable by every TensorFlow version).
inline constexpr size_t kTableBlockSize = 256 * 1024;
inline constexpr int kTableRestartInterval = 16;

// Writes `entries` (keys strictly increasing, bytewise) as a table to
// `path`, durably: temp file, sync, rename, sync of the directory.
void write_table_atomically(FileSystem& fs, const std::string& path,
                            const std::vector<std::pair<std::string, std::string>>& entries);

// A table opened for reading. Block checksums are verified on every read;
// Snappy-compressed blocks (written by some TensorFlow versions) are read.
// Errors are DataLossError naming the file. Thread-safe.
class TableReader {
 public:
  // Throws NotFoundError for a missing file and DataLossError for one that
  // is not a table.
  TableReader(FileSystem& fs, const std::string& path);
  ~TableReader();

  // Calls fn(key, value) for every entry in key order.
  void for_each(const std::function<void(std::string_view, std::string_view)>& fn) const;
  // The value stored under `key`, if any.
  std::optional<std::string> get(std::string_view key) const;

  const std::string& path() const { return path_; }

 private:
  class File;
  std::string path_;
  std::unique_ptr<File> file_;
  std::unique_ptr<leveldb::Table> table_;
};

}  // namespace varstate
