#include "checkpoint/table_internal.h"

#include <leveldb/env.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/table.h>
#include <leveldb/table_builder.h>

#include <exception>

#include "checkpoint/crc32c.h"
#include "checkpoint/varint_internal.h"
#include "varstate/error.h"

namespace varstate {
namespace {

constexpr size_t kFooterSize = 48;
constexpr size_t kBlockTrailerSize = 5;
constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;

// Forwards LevelDB's writes to a WritableFile, keeping the first exception so
// that the caller can rethrow it with its class intact.
class TableSink : public leveldb::WritableFile {
 public:
  explicit TableSink(varstate::WritableFile* file) : file_(file) {}

  leveldb::Status Append(const leveldb::Slice& data) override {
    return guard([&] { file_->append(data.data(), data.size()); });
  }
  leveldb::Status Close() override { return leveldb::Status::OK(); }
  leveldb::Status Flush() override { return leveldb::Status::OK(); }
  leveldb::Status Sync() override { return leveldb::Status::OK(); }

  void rethrow_if_failed() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  template <typename Fn>
  leveldb::Status guard(Fn&& fn) {
    if (error_) return leveldb::Status::IOError("earlier write failed");
    try {
      fn();
      return leveldb::Status::OK();
    } catch (...) {
      error_ = std::current_exception();
      return leveldb::Status::IOError(file_->path());
    }
  }

  varstate::WritableFile* file_;
  std::exception_ptr error_;
};

// One varint from the front of *in, which then starts after it.
bool decode_varint64(std::string_view* in, uint64_t* v) {
  const auto* p = reinterpret_cast<const std::byte*>(in->data());
  const auto* end = p + in->size();
  if (!internal::get_varint64(p, end, v)) return false;
  in->remove_prefix(static_cast<size_t>(p - reinterpret_cast<const std::byte*>(in->data())));
  return true;
}

}  // namespace

void write_table_atomically(FileSystem& fs, const std::string& path,
                            const std::vector<std::pair<std::string, std::string>>& entries) {
  write_atomically(fs, path, [&](WritableFile& file, const std::string& tmp) {
    TableSink sink(&file);
    leveldb::Options options;
    options.block_size = kTableBlockSize;
    options.block_restart_interval = kTableRestartInterval;
    options.compression = leveldb::kNoCompression;
    leveldb::TableBuilder builder(options, &sink);
    for (const auto& [key, value] : entries) builder.Add(key, value);
    leveldb::Status status = builder.Finish();
    sink.rethrow_if_failed();
    if (!status.ok())
      throw InternalError("writing table " + quoted(tmp) + ": " + status.ToString());
  });
}

// Serves LevelDB's block reads. Refuses reads past the end of the file, so a
// corrupt block handle can never make a read overrun LevelDB's buffer.
class TableReader::File : public leveldb::RandomAccessFile {
 public:
  explicit File(std::unique_ptr<varstate::RandomAccessFile> file) : file_(std::move(file)) {}

  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result,
                       char* scratch) const override {
    uint64_t size = file_->size();
    if (offset > size || n > size - offset) {
      return leveldb::Status::Corruption("truncated block read");
    }
    try {
      size_t got = file_->read(offset, n, scratch);
      *result = leveldb::Slice(scratch, got);
      return leveldb::Status::OK();
    } catch (const std::exception& e) {
      return leveldb::Status::IOError(e.what());
    }
  }

  uint64_t size() const { return file_->size(); }
  const varstate::RandomAccessFile& file() const { return *file_; }

 private:
  std::unique_ptr<varstate::RandomAccessFile> file_;
};

TableReader::TableReader(FileSystem& fs, const std::string& path)
    : path_(path), file_(std::make_unique<File>(fs.new_random_access_file(path))) {
  const uint64_t size = file_->size();
  auto corrupt = [&](const std::string& why) {
    return DataLossError("reading table " + quoted(path_) + " (" + std::to_string(size) +
                         " bytes): " + why);
  };
  // Check the footer's handles before LevelDB allocates buffers from them.
  if (size < kFooterSize) throw corrupt("file too short to be an sstable");
  char footer[kFooterSize];
  if (file_->file().read(size - kFooterSize, kFooterSize, footer) != kFooterSize) {
    throw corrupt("truncated footer read");
  }
  uint64_t magic = 0;
  for (int i = 7; i >= 0; --i) magic = (magic << 8) | static_cast<uint8_t>(footer[40 + i]);
  if (magic != kTableMagic) throw corrupt("not an sstable (bad magic number)");
  std::string_view handles(footer, 40);
  for (int i = 0; i < 2; ++i) {
    uint64_t offset = 0, length = 0;
    if (!decode_varint64(&handles, &offset) || !decode_varint64(&handles, &length) ||
        offset > size || length > size - offset || size - offset - length < kBlockTrailerSize) {
      throw corrupt("bad block handle");
    }
    if (i == 0) {
      // LevelDB never reads the metaindex block of a table without filters;
      // check its checksum anyway so that no corrupt byte goes unnoticed.
      std::string block(length + kBlockTrailerSize, '\0');
      if (file_->file().read(offset, block.size(), block.data()) != block.size()) {
        throw corrupt("truncated block read");
      }
      uint32_t stored = 0;
      for (int k = 3; k >= 0; --k)
        stored = (stored << 8) | static_cast<uint8_t>(block[length + 1 + k]);
      if (crc32c::unmask(stored) != crc32c::value(block.data(), length + 1)) {
        throw corrupt("block checksum mismatch");
      }
    }
  }

  leveldb::Options options;
  options.paranoid_checks = true;
  leveldb::Table* table = nullptr;
  leveldb::Status status = leveldb::Table::Open(options, file_.get(), size, &table);
  if (!status.ok()) throw corrupt(status.ToString());
  table_.reset(table);
}

TableReader::~TableReader() = default;

void TableReader::for_each(
    const std::function<void(std::string_view, std::string_view)>& fn) const {
  leveldb::ReadOptions options;
  options.verify_checksums = true;
  std::unique_ptr<leveldb::Iterator> it(table_->NewIterator(options));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    fn(std::string_view(it->key().data(), it->key().size()),
       std::string_view(it->value().data(), it->value().size()));
  }
  if (!it->status().ok()) {
    throw DataLossError("reading table " + quoted(path_) + ": " + it->status().ToString());
  }
}

std::optional<std::string> TableReader::get(std::string_view key) const {
  leveldb::ReadOptions options;
  options.verify_checksums = true;
  std::unique_ptr<leveldb::Iterator> it(table_->NewIterator(options));
  it->Seek(leveldb::Slice(key.data(), key.size()));
  if (!it->status().ok()) {
    throw DataLossError("reading table " + quoted(path_) + ": " + it->status().ToString());
  }
  if (!it->Valid() || std::string_view(it->key().data(), it->key().size()) != key) {
    return std::nullopt;
  }
  return it->value().ToString();
}

}  // namespace varstate
