#include <catch2/catch.hpp>

#include <filesystem>

#include "checkpoint/fault_injection_file_system.h"
#include "checkpoint/tensor_bundle.h"
#include "checkpoint_test_util.h"
#include "varstate/error.h"

using namespace varstate;
using varstate::testing::read_file;
using varstate::testing::TempDir;
using varstate::testing::write_file;

namespace {

const std::vector<float> kA{1, 2, 3, 4};
const std::vector<float> kB{5, 6};

void write_ab(const std::string& prefix, FileSystem* fs = nullptr, float scale = 1) {
  BundleWriter w(prefix, {.file_system = fs});
  std::vector<float> a = kA, b = kB;
  for (float& x : a) x *= scale;
  for (float& x : b) x *= scale;
  w.add("a", TensorData::from_values<float>({2, 2}, a).view());
  w.add("b", TensorData::from_values<float>({2}, b).view());
  w.add("s", TensorData::from_values<std::string>({2}, {"xy", "z"}).view());
  w.finish();
}

}  // namespace

TEST_CASE("a flipped data byte is a DataLossError naming file and tensor", "[bundle][corruption]") {
  TempDir dir;
  const std::string prefix = dir / "ckpt";
  write_ab(prefix);
  const std::string data_path = prefix + ".data-00000-of-00001";
  const std::string original = read_file(data_path);
  // a: [0,16), b: [16,24), s: [24,33) = 2 varints, 4-byte checksum, "xyz".
  REQUIRE(original.size() == 33);
  const std::pair<size_t, std::string> cases[] = {
      {5, "\"a\""}, {17, "\"b\""}, {24, "\"s\""}, {27, "\"s\""}, {32, "\"s\""}};
  for (const auto& [offset, tensor] : cases) {
    CAPTURE(offset);
    std::string bytes = original;
    bytes[offset] = static_cast<char>(bytes[offset] ^ 0x10);
    write_file(data_path, bytes);
    BundleReader reader(prefix);
    std::string name = tensor.substr(1, 1);
    CHECK_THROWS_AS(reader.read(name), DataLossError);
    CHECK_THROWS_WITH(reader.read(name), Catch::Contains("reading " + tensor) &&
                                             Catch::Contains("ckpt.data-00000-of-00001"));
    // The other tensors still read.
    if (name != "a") CHECK(reader.read("a").values<float>() == kA);
  }
  std::string bytes = original;
  bytes[5] ^= 0x10;
  write_file(data_path, bytes);
  CHECK_THROWS_WITH(BundleReader(prefix).read("a"),
                    Catch::Contains("crc32c mismatch (expected 0x") && Catch::Contains(", got 0x"));
}

TEST_CASE("truncated and missing shards", "[bundle][corruption]") {
  TempDir dir;
  const std::string prefix = dir / "ckpt";
  write_ab(prefix);
  const std::string data_path = prefix + ".data-00000-of-00001";
  std::filesystem::resize_file(data_path, 20);
  BundleReader reader(prefix);
  CHECK(reader.read("a").values<float>() == kA);
  CHECK_THROWS_AS(reader.read("b"), DataLossError);
  CHECK_THROWS_WITH(reader.read("b"), Catch::Contains("truncated") && Catch::Contains("\"b\"") &&
                                          Catch::Contains("ckpt.data-00000-of-00001"));

  std::filesystem::remove(data_path);
  BundleReader no_data(prefix);  // the index alone opens; reads fail
  CHECK(no_data.list().size() == 3);
  CHECK_THROWS_AS(no_data.read("a"), NotFoundError);
  CHECK_THROWS_WITH(no_data.read("a"), Catch::Contains("ckpt.data-00000-of-00001"));

  CHECK_THROWS_AS(BundleReader(dir / "nothing"), NotFoundError);
  CHECK_THROWS_WITH(BundleReader(dir / "nothing"), Catch::Contains("nothing.index"));
}

TEST_CASE("corrupt or truncated index", "[bundle][corruption]") {
  TempDir dir;
  const std::string prefix = dir / "ckpt";
  write_ab(prefix);
  const std::string index_path = prefix + ".index";
  const std::string original = read_file(index_path);
  for (size_t offset = 0; offset < original.size(); ++offset) {
    CAPTURE(offset);
    std::string bytes = original;
    bytes[offset] = static_cast<char>(bytes[offset] ^ 0x01);
    write_file(index_path, bytes);
    // Every flipped bit is caught by a block CRC, the footer checks or the
    // parsers (padding bytes of the footer are not covered).
    try {
      BundleReader reader(prefix);
      for (const auto& info : reader.list()) reader.read(info.name);
      CHECK(offset >= original.size() - 48);
    } catch (const DataLossError&) {
    } catch (const InvalidArgumentError&) {
    }
  }
  write_file(index_path, original.substr(0, original.size() - 1));
  CHECK_THROWS_AS(BundleReader(prefix), DataLossError);
  write_file(index_path, "short");
  CHECK_THROWS_WITH(BundleReader(prefix),
                    Catch::Contains("too short") && Catch::Contains("ckpt.index"));
}

TEST_CASE("failed writes leave the previous checkpoint intact", "[bundle][fault]") {
  TempDir dir;
  FaultInjectionFileSystem fs(default_file_system());
  const std::string previous = dir / "model-1";
  const std::string next = dir / "model-2";
  write_ab(previous, &fs);
  const std::string index_before = read_file(previous + ".index");
  const std::string data_before = read_file(previous + ".data-00000-of-00001");
  // Fail each step of the next save, then crash (drop what was not synced).
  for (FileOp op : {FileOp::kCreate, FileOp::kAppend, FileOp::kSync, FileOp::kClose,
                    FileOp::kRename, FileOp::kSyncDir}) {
    for (int nth = 1; nth <= 3; ++nth) {
      CAPTURE(static_cast<int>(op), nth);
      fs.fail_nth(op, nth);
      bool threw = false;
      try {
        write_ab(next, &fs, 2);
      } catch (const UnavailableError& e) {
        threw = true;
        CHECK_THAT(e.what(), Catch::Contains("injected fault") && Catch::Contains("model-2"));
      }
      fs.clear_faults();
      fs.drop_unsynced_data();

      // The previous checkpoint is bit-exact and readable.
      CHECK(read_file(previous + ".index") == index_before);
      CHECK(read_file(previous + ".data-00000-of-00001") == data_before);
      BundleReader reader(previous);
      CHECK(reader.read("a").values<float>() == kA);
      CHECK(reader.read("s").strings == std::vector<std::string>{"xy", "z"});

      // The new one is complete or absent, never half-written.
      if (fs.file_exists(next + ".index")) {
        BundleReader again(next);
        CHECK(again.read("a").values<float>() == std::vector<float>{2, 4, 6, 8});
        CHECK(again.read("b").values<float>() == std::vector<float>{10, 12});
      } else {
        CHECK(threw);
      }
      for (const auto& name : fs.list_dir(dir.path())) {
        CHECK(name.find("tempstate") == std::string::npos);
        if (name.rfind("model-2", 0) == 0) fs.delete_file(dir / name);
      }
    }
  }
}
