#include <catch2/catch.hpp>

#include "checkpoint/v1_reader.h"
#include "checkpoint_test_util.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/error.h"

using namespace varstate;
using varstate::testing::read_file;
using varstate::testing::TempDir;
using varstate::testing::write_file;

namespace {

const std::string kTfV1 = varstate::testing::testdata_dir() + "/tensorflow/half_plus_two_v1/export";

}  // namespace

TEST_CASE("reads TensorFlow's V1 half_plus_two checkpoint", "[v1][tf]") {
  auto reader = open_checkpoint(kTfV1);
  REQUIRE(dynamic_cast<V1Reader*>(reader.get()) != nullptr);
  auto list = reader->list();
  REQUIRE(list.size() == 2);
  CHECK(list[0].name == "Variable");
  CHECK(list[1].name == "Variable_1");
  for (const auto& info : list) {
    CHECK(info.dtype == DType::kFloat);
    CHECK(info.shape.empty());
    CHECK(info.slices.empty());
    CHECK(info.shard == 0);
  }
  CHECK(reader->read("Variable").values<float>() == std::vector<float>{0.5f});
  CHECK(reader->read("Variable_1").values<float>() == std::vector<float>{2.0f});
  CHECK_THROWS_WITH(reader->read("a"), Catch::Contains("Key \"a\" not found in checkpoint"));
}

TEST_CASE("V1 file patterns and corruption", "[v1]") {
  TempDir dir;
  const std::string bytes = read_file(kTfV1);
  write_file(dir / "export-00000-of-00001", bytes);
  V1Reader sharded(dir / "export-?????-of-00001");
  CHECK(sharded.read("Variable_1").values<float>() == std::vector<float>{2.0f});
  CHECK_THROWS_WITH(V1Reader(dir / "none-?????-of-00001"),
                    Catch::Contains("Failed to find any matching files"));
  CHECK_THROWS_AS(open_checkpoint(dir / "none"), NotFoundError);

  // The 0.5f of "Variable" sits in the first data block; flip it.
  std::string corrupt = bytes;
  size_t at = corrupt.find(std::string("\x00\x00\x00\x3f", 4));
  REQUIRE(at != std::string::npos);
  corrupt[at + 3] = '\x40';
  write_file(dir / "bad", corrupt);
  CHECK_THROWS_AS(V1Reader(dir / "bad"), DataLossError);
  CHECK_THROWS_WITH(V1Reader(dir / "bad"),
                    Catch::Contains("checksum mismatch") && Catch::Contains("bad"));
}
