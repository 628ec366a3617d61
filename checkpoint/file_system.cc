#include "checkpoint/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "base/logging.h"
#include "varstate/error.h"

namespace varstate {
namespace {

[[noreturn]] void throw_errno(const std::string& what, const std::string& path, int err) {
  std::string msg = what + " " + quoted(path) + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      throw NotFoundError(msg);
    case EACCES:
    case EPERM:
    case EROFS:
      throw PermissionDeniedError(msg);
    case EEXIST:
      throw AlreadyExistsError(msg);
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
      throw ResourceExhaustedError(msg);
    default:
      throw UnknownError(msg);
  }
}

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
    buffer_.reserve(kBufferSize);
  }
  ~PosixWritableFile() override {
    if (fd_ >= 0) {
      try {
        flush();
      } catch (const Error&) {
      }
      ::close(fd_);
    }
  }

  void append(const void* data, size_t n) override {
    check_open("append to");
    const char* p = static_cast<const char*>(data);
    if (buffer_.size() + n <= kBufferSize) {
      buffer_.insert(buffer_.end(), p, p + n);
      return;
    }
    flush();
    if (n < kBufferSize) {
      buffer_.assign(p, p + n);
    } else {
      write_all(p, n);
    }
  }

  void sync() override {
    check_open("sync");
    flush();
    if (::fsync(fd_) != 0) throw_errno("fsync", path_, errno);
  }

  void close() override {
    if (fd_ < 0) return;
    int fd = fd_;
    try {
      flush();
    } catch (...) {
      ::close(fd);
      fd_ = -1;
      throw;
    }
    fd_ = -1;
    if (::close(fd) != 0) throw_errno("close", path_, errno);
  }

  const std::string& path() const override { return path_; }

 private:
  static constexpr size_t kBufferSize = 1 << 20;

  void check_open(const char* what) const {
    if (fd_ < 0)
      throw FailedPreconditionError(std::string(what) + " " + quoted(path_) + ": file is closed");
  }

  void flush() {
    if (buffer_.empty()) return;
    write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

  void write_all(const char* p, size_t n) {
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        throw_errno("write", path_, errno);
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

  std::string path_;
  int fd_;
  std::vector<char> buffer_;
};

class PosixMappedRegion : public MappedRegion {
 public:
  PosixMappedRegion(void* base, size_t length, size_t skip, size_t n)
      : base_(base), length_(length), data_(static_cast<const std::byte*>(base) + skip), size_(n) {}
  ~PosixMappedRegion() override { ::munmap(base_, length_); }
  const std::byte* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  void* base_;
  size_t length_;
  const std::byte* data_;
  size_t size_;
};

class PosixRandomAccessFile : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  size_t read(uint64_t offset, size_t n, void* dst) const override {
    char* p = static_cast<char*>(dst);
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        throw_errno("read", path_, errno);
      }
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    return done;
  }

  std::unique_ptr<MappedRegion> map(uint64_t offset, size_t n) const override {
    if (n == 0 || offset > size_ || n > size_ - offset) return nullptr;
    static const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t start = offset / page * page;
    const size_t length = static_cast<size_t>(offset - start) + n;
    // MAP_POPULATE: the pages mapped in one call rather than one fault each.
    void* base = ::mmap(nullptr, length, PROT_READ, MAP_SHARED | MAP_POPULATE, fd_,
                        static_cast<off_t>(start));
    if (base == MAP_FAILED) return nullptr;
    return std::make_unique<PosixMappedRegion>(base, length, static_cast<size_t>(offset - start),
                                               n);
  }

  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
  uint64_t size_;
};

class PosixFileSystem : public FileSystem {
 public:
  std::unique_ptr<WritableFile> new_writable_file(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw_errno("creating", path, errno);
    return std::make_unique<PosixWritableFile>(path, fd);
  }

  std::unique_ptr<RandomAccessFile> new_random_access_file(const std::string& path) override {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
    // writer; it is refused below, as every other non-regular file. Reads
    // of a regular file ignore the flag.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw_errno("opening", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      throw_errno("stat", path, err);
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      throw InvalidArgumentError("opening " + quoted(path) + ": " +
                                 (S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file"));
    }
    return std::make_unique<PosixRandomAccessFile>(path, fd, static_cast<uint64_t>(st.st_size));
  }

  bool file_exists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }

  uint64_t file_size(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) throw_errno("stat", path, errno);
    return static_cast<uint64_t>(st.st_size);
  }

  void delete_file(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) throw_errno("deleting", path, errno);
  }

  void rename_file(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      throw_errno("renaming to " + quoted(to) + " from", from, errno);
    }
  }

  std::vector<std::string> list_dir(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) throw_errno("listing", dir, errno);
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  void create_dir(const std::string& dir) override {
    if (dir.empty() || dir == "." || dir == "/") return;
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return;
      throw AlreadyExistsError("creating directory " + quoted(dir) + ": a file has that name");
    }
    std::string parent = dirname_of(dir);
    if (parent != dir) create_dir(parent);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      throw_errno("creating directory", dir, errno);
    }
  }

  void delete_dir(const std::string& dir) override {
    if (::rmdir(dir.c_str()) != 0) throw_errno("deleting directory", dir, errno);
  }

  void sync_dir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw_errno("opening directory", dir, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) throw_errno("fsync of directory", dir, err);
  }
};

}  // namespace

FileSystem* default_file_system() {
  static PosixFileSystem fs;
  return &fs;
}

std::string dirname_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string basename_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir == ".") return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

void best_effort_delete(FileSystem& fs, const std::string& path) {
  try {
    if (fs.file_exists(path)) fs.delete_file(path);
  } catch (const Error& e) {
    logger().warn("could not delete {}: {}", path, e.what());
  }
}

std::string temp_file_name(const std::string& path) {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return path + ".tempstate" + std::to_string(gen());
}

void commit_temp_file(FileSystem& fs, std::unique_ptr<WritableFile> file,
                      const std::string& temp_path, const std::string& path) {
  file->sync();
  file->close();
  file.reset();
  fs.rename_file(temp_path, path);
}

void write_file_atomically(FileSystem& fs, const std::string& path, std::string_view contents) {
  write_atomically(fs, path,
                   [&](WritableFile& file, const std::string&) { file.append(contents); });
}

void write_atomically(
    FileSystem& fs, const std::string& path,
    const std::function<void(WritableFile& file, const std::string& temp_path)>& fill) {
  std::string tmp = temp_file_name(path);
  try {
    auto file = fs.new_writable_file(tmp);
    fill(*file, tmp);
    commit_temp_file(fs, std::move(file), tmp, path);
  } catch (...) {
    best_effort_delete(fs, tmp);
    throw;
  }
  fs.sync_dir(dirname_of(path));
}

std::string read_file_to_string(FileSystem& fs, const std::string& path) {
  auto file = fs.new_random_access_file(path);
  std::string out(file->size(), '\0');
  size_t n = file->read(0, out.size(), out.data());
  out.resize(n);
  return out;
}

std::vector<std::string> match_files(FileSystem& fs, const std::string& pattern) {
  size_t slash = pattern.find_last_of('/');
  std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : pattern.substr(0, slash));
  std::string base = slash == std::string::npos ? pattern : pattern.substr(slash + 1);
  if (base.find_first_of("*?[") == std::string::npos) {
    if (fs.file_exists(pattern)) return {pattern};
    return {};
  }
  std::vector<std::string> names;
  try {
    names = fs.list_dir(dir);
  } catch (const NotFoundError&) {
    return {};
  }
  std::vector<std::string> out;
  for (const std::string& name : names) {
    if (::fnmatch(base.c_str(), name.c_str(), FNM_PERIOD) == 0) {
      out.push_back(slash == std::string::npos ? name : pattern.substr(0, slash + 1) + name);
    }
  }
  return out;
}

}  // namespace varstate
