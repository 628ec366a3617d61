#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <utility>
#include <vector>

#include "checkpoint/fault_injection_file_system.h"
#include "checkpoint/file_system.h"
#include "checkpoint_test_util.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/error.h"

using namespace varstate;
using varstate::testing::TempDir;

TEST_CASE("posix file system basics", "[file_system]") {
  TempDir dir;
  FileSystem& fs = *default_file_system();
  const std::string path = dir / "a/b/file.bin";
  fs.create_dir(dirname_of(path));
  {
    auto f = fs.new_writable_file(path);
    f->append("hello ");
    std::string big(3 << 20, 'x');  // larger than the write buffer
    f->append(big);
    f->append("!");
    f->sync();
    f->close();
  }
  CHECK(fs.file_exists(path));
  CHECK(fs.file_size(path) == 6 + (3u << 20) + 1);
  auto r = fs.new_random_access_file(path);
  char buf[8];
  CHECK(r->read(0, 6, buf) == 6);
  CHECK(std::string(buf, 6) == "hello ");
  CHECK(r->read(r->size() - 2, 8, buf) == 2);  // short read at the end
  CHECK(std::string(buf, 2) == "x!");
  CHECK(fs.list_dir(dir / "a/b") == std::vector<std::string>{"file.bin"});
  fs.rename_file(path, dir / "a/renamed");
  CHECK_FALSE(fs.file_exists(path));
  CHECK(match_files(fs, dir / "a/ren*") == std::vector<std::string>{dir / "a/renamed"});
  CHECK(match_files(fs, dir / "a/nothing?").empty());
  fs.delete_file(dir / "a/renamed");
  fs.delete_dir(dir / "a/b");
  CHECK_THROWS_AS(fs.new_random_access_file(dir / "missing"), NotFoundError);
  CHECK_THROWS_AS(fs.delete_file(dir / "missing"), NotFoundError);
}

TEST_CASE("a posix file maps a byte range read-only; past the end it does not", "[file_system]") {
  TempDir dir;
  FileSystem& fs = *default_file_system();
  const std::string path = dir / "mapped.bin";
  std::string contents(3 * 4096 + 100, '\0');
  for (size_t i = 0; i < contents.size(); ++i) contents[i] = static_cast<char>(i * 7 % 251);
  write_file_atomically(fs, path, contents);
  auto file = fs.new_random_access_file(path);
  for (const auto& [offset, n] : std::vector<std::pair<uint64_t, size_t>>{
           {0, 1}, {5, 4096}, {4096, 4096}, {4095, 2 * 4096 + 100}, {0, contents.size()}}) {
    CAPTURE(offset, n);
    std::unique_ptr<MappedRegion> region = file->map(offset, n);
    REQUIRE(region != nullptr);
    REQUIRE(region->size() == n);
    CHECK(std::memcmp(region->data(), contents.data() + offset, n) == 0);
  }
  CHECK(file->map(0, contents.size() + 1) == nullptr);
  CHECK(file->map(contents.size(), 1) == nullptr);
  CHECK(file->map(1, 0) == nullptr);
}

TEST_CASE("readers refuse a named pipe or a directory instead of waiting on it",
          "[file_system][reliability]") {
  TempDir dir;
  FileSystem& fs = *default_file_system();
  const std::string fifo = dir / "model.index";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Opening a FIFO for reading blocks until a writer comes: it must fail at once.
  CHECK_THROWS_WITH(fs.new_random_access_file(fifo),
                    Catch::Contains("not a regular file") && Catch::Contains("model.index"));
  CHECK_THROWS_AS(open_checkpoint(dir / "model"), InvalidArgumentError);
  CHECK_THROWS_WITH(fs.new_random_access_file(dir.path()), Catch::Contains("is a directory"));
}

TEST_CASE("write_file_atomically replaces the file", "[file_system]") {
  TempDir dir;
  FileSystem& fs = *default_file_system();
  write_file_atomically(fs, dir / "f", "one");
  write_file_atomically(fs, dir / "f", "two");
  CHECK(read_file_to_string(fs, dir / "f") == "two");
  CHECK(fs.list_dir(dir.path()) == std::vector<std::string>{"f"});  // no temp files left
}

TEST_CASE("fault injection fails the chosen call and keeps the old file", "[file_system][fault]") {
  TempDir dir;
  FaultInjectionFileSystem fs(default_file_system());
  write_file_atomically(fs, dir / "f", "old");
  for (FileOp op :
       {FileOp::kCreate, FileOp::kAppend, FileOp::kSync, FileOp::kClose, FileOp::kRename}) {
    CAPTURE(static_cast<int>(op));
    fs.fail_nth(op, 1);
    CHECK_THROWS_AS(write_file_atomically(fs, dir / "f", "new"), UnavailableError);
    CHECK(read_file_to_string(fs, dir / "f") == "old");
    CHECK(fs.list_dir(dir.path()) == std::vector<std::string>{"f"});
  }
  fs.fail_nth(FileOp::kAppend, 2);
  auto f = fs.new_writable_file(dir / "g");
  f->append("a");
  CHECK_THROWS_WITH(f->append("b"), Catch::Contains("injected fault") && Catch::Contains("/g"));
  f->append("c");  // only the 2nd call failed
  CHECK(fs.count(FileOp::kAppend) >= 3);
}

TEST_CASE("drop_unsynced_data simulates a crash", "[file_system][fault]") {
  TempDir dir;
  FaultInjectionFileSystem fs(default_file_system());
  write_file_atomically(fs, dir / "durable", "kept");
  {
    auto f = fs.new_writable_file(dir / "partly");
    f->append("synced");
    f->sync();
    fs.sync_dir(dir.path());
    f->append(" lost");
    f->close();
  }
  {
    auto f = fs.new_writable_file(dir / "unlinked");  // directory never synced
    f->append("gone");
    f->sync();
    f->close();
  }
  fs.drop_unsynced_data();
  CHECK(read_file_to_string(fs, dir / "durable") == "kept");
  CHECK(read_file_to_string(fs, dir / "partly") == "synced");
  CHECK_FALSE(fs.file_exists(dir / "unlinked"));
}
