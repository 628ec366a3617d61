#include <catch2/catch.hpp>

#include <complex>
#include <cstring>
#include <limits>

#include "checkpoint/crc32c.h"
#include "checkpoint/file_system.h"
#include "checkpoint/table_internal.h"
#include "checkpoint/tensor_bundle.h"
#include "checkpoint_test_util.h"
#include "test_util.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/error.h"

using namespace varstate;
using varstate::testing::decode_table;
using varstate::testing::from_hex;
using varstate::testing::read_file;
using varstate::testing::TempDir;
using varstate::testing::to_hex;

namespace {

const std::string kTfV2 =
    varstate::testing::testdata_dir() + "/tensorflow/half_plus_two_v2/variables";

}  // namespace

TEST_CASE("reads TensorFlow's half_plus_two V2 checkpoint (Snappy index)", "[bundle][tf]") {
  BundleReader reader(kTfV2);
  CHECK(reader.num_shards() == 1);
  std::vector<std::string> names;
  for (const TensorInfo& info : reader.list()) {
    names.push_back(info.name);
    CHECK(info.dtype == DType::kFloat);
    CHECK(info.shape.empty());
    CHECK(info.shard == 0);
    CHECK(info.size == 4);
  }
  CHECK(names == std::vector<std::string>{"a", "a2", "b", "c", "c2"});
  CHECK(reader.info("b").offset == 8);
  CHECK(reader.read("a").values<float>() == std::vector<float>{0.5f});
  CHECK(reader.read("a2").values<float>() == std::vector<float>{0.5f});
  CHECK(reader.read("b").values<float>() == std::vector<float>{2.0f});
  CHECK(reader.read("c").values<float>() == std::vector<float>{3.0f});
  CHECK(reader.read("c2").values<float>() == std::vector<float>{3.0f});
  CHECK_THROWS_WITH(reader.read("d"), Catch::Contains("Key \"d\" not found in checkpoint") &&
                                          Catch::Contains("half_plus_two_v2/variables"));
  CHECK_THROWS_AS(reader.info("d"), NotFoundError);

  auto generic = open_checkpoint(kTfV2);
  CHECK(dynamic_cast<BundleReader*>(generic.get()) != nullptr);
  CHECK(generic->read("c").values<float>() == std::vector<float>{3.0f});
}

TEST_CASE("index bytes match formats.md's golden example", "[bundle][format]") {
  TempDir dir;
  const std::string prefix = dir / "golden";
  {
    BundleWriter w(prefix);
    std::vector<float> v{1, 2, 3, 4, 5, 6};
    w.add("v", TensorData::from_values<float>({2, 3}, v).view());
    w.finish();
  }
  const std::string expected =
      "00000608011a020801000113760801120812020802120208032818357aebf5ab000000000100000000bdf37824"
      "000000000100000000c0f2a1b0000102770028000000000100000000aba9c0b82d083a0e" +
      std::string(72, '0') + "57fb808b247547db";
  const std::string index = read_file(prefix + ".index");
  CHECK(index.size() == 125);
  CHECK(to_hex(index) == expected);
  CHECK(read_file(prefix + ".data-00000-of-00001").size() == 24);
  CHECK(dir.path().size() > 0);
  // No temporary files are left behind.
  CHECK(default_file_system()->list_dir(dir.path()) ==
        std::vector<std::string>{"golden.data-00000-of-00001", "golden.index"});
}

TEST_CASE("index structure decoded independently", "[bundle][format]") {
  TempDir dir;
  const std::string prefix = dir / "model.ckpt-100";
  // Enough entries for several restart points; long names for many blocks.
  std::vector<std::string> names;
  {
    BundleWriter w(prefix);
    for (int i = 0; i < 40; ++i) {
      std::string name = "layer_" + std::to_string(100 + i) + "/kernel";
      names.push_back(name);
      float x = static_cast<float>(i);
      w.add(name, TensorData::from_values<float>({}, std::vector<float>{x}).view());
    }
    w.add("scalar_a", TensorData::from_values<float>({}, std::vector<float>{0.5f}).view());
    w.finish();
  }
  auto t = decode_table(read_file(prefix + ".index"));
  REQUIRE(t.entries.size() == 42);
  CHECK(t.entries[0].first.empty());
  CHECK(to_hex(t.entries[0].second) == "08011a020801");  // header: 1 shard, LE, producer 1
  for (size_t i = 1; i < t.entries.size(); ++i) CHECK(t.entries[i - 1].first < t.entries[i].first);
  // scalar_a was added last: offset 160, size 4, crc of 0.5f.
  CHECK(t.entries.back().first == "scalar_a");
  CHECK(to_hex(t.entries.back().second) ==
        "0801120020a001280435"
        "0638271f");
  CHECK(to_hex(t.entries[1].second).substr(0, 16) ==
        "0801120028043"
        "5"
        "a6");  // offset 0 omitted
  REQUIRE(t.index_block.entries.size() == 1);
  CHECK(t.index_block.entries[0].first == "t");  // short successor of "scalar_a"
}

TEST_CASE("entry bytes for slices match formats.md", "[bundle][format]") {
  TempDir dir;
  const std::string prefix = dir / "w";
  std::vector<float> rows(10);
  for (int i = 0; i < 10; ++i) rows[static_cast<size_t>(i)] = static_cast<float>(i);
  {
    BundleWriter w(prefix);
    std::vector<float> top(rows.begin(), rows.begin() + 6), bottom(rows.begin() + 6, rows.end());
    auto s0 = parse_shape_and_slice("5 2 0,3:0,2");
    auto s1 = parse_shape_and_slice("5 2 3,2:0,2");
    w.add_slice("w", s0.full_shape, s0.slice, TensorData::from_values<float>({3, 2}, top).view());
    w.add_slice("w", s1.full_shape, s1.slice,
                TensorData::from_values<float>({2, 2}, bottom).view());
    w.finish();
  }
  auto t = decode_table(read_file(prefix + ".index"));
  REQUIRE(t.entries.size() == 4);
  // Slice keys sort before names.
  CHECK(to_hex(t.entries[1].first) == "00770001010280838082");
  CHECK(to_hex(t.entries[1].second).substr(0, 28) ==
        "08011208120208031202080228"
        "18");
  CHECK(to_hex(t.entries[2].first) == "00770001010283828082");
  CHECK(to_hex(t.entries[2].second).substr(0, 32) ==
        "0801120812020802120208022018"
        "2810");
  CHECK(t.entries[3].first == "w");
  CHECK(to_hex(t.entries[3].second) ==
        "08011208120208051202080"
        "23a080a0210030a0210023a0a0a04080310020a021002");
  BundleReader reader(prefix);
  CHECK(reader.read("w").values<float>() == rows);
}

namespace {

template <typename T>
void round_trip_dtype(DType dtype, const std::string& prefix) {
  CAPTURE(dtype_name(dtype));
  std::vector<std::vector<int64_t>> shapes{{}, {0}, {1}, {7}, {3, 5}, {2, 0, 3}, {2, 3, 4}};
  std::vector<TensorData> saved;
  {
    BundleWriter w(prefix);
    for (size_t i = 0; i < shapes.size(); ++i) {
      auto n = static_cast<size_t>(num_elements(shapes[i]));
      std::vector<T> values;
      if constexpr (std::is_same_v<T, std::string>) {
        for (size_t k = 0; k < n; ++k)
          values.push_back(std::string(k % 5, static_cast<char>('a' + k % 26)));
      } else if constexpr (std::is_same_v<T, bool>) {
        for (size_t k = 0; k < n; ++k) values.push_back(k % 3 == 0);
      } else {
        values = varstate::testing::random_ints<T>(n, varstate::testing::kSeed + i);
      }
      saved.push_back(TensorData::from_values<T>(shapes[i], values, dtype));
      w.add("t" + std::to_string(i), saved.back().view());
    }
    w.finish();
  }
  BundleReader reader(prefix);
  for (size_t i = 0; i < shapes.size(); ++i) {
    CAPTURE(i);
    TensorInfo info = reader.info("t" + std::to_string(i));
    CHECK(info.dtype == dtype);
    CHECK(info.shape == shapes[i]);
    TensorData back = reader.read("t" + std::to_string(i));
    CHECK(back.dtype == dtype);
    CHECK(back.shape == shapes[i]);
    CHECK(back.bytes == saved[i].bytes);
    CHECK(back.strings == saved[i].strings);
  }
}

}  // namespace

TEST_CASE("every dtype round-trips, scalars and empty tensors included", "[bundle]") {
  TempDir dir;
#define VARSTATE_ROUND_TRIP(E, T) round_trip_dtype<T>(DType::E, dir / #E);
  VARSTATE_FOR_EACH_DTYPE(VARSTATE_ROUND_TRIP)
#undef VARSTATE_ROUND_TRIP
}

TEST_CASE("string tensors use TensorFlow's layout", "[bundle][format]") {
  TempDir dir;
  const std::string prefix = dir / "s";
  {
    BundleWriter w(prefix);
    w.add("s", TensorData::from_values<std::string>({2}, {"ab", ""}).view());
    w.add("empty", TensorData::from_values<std::string>({0}, {}).view());
    std::string binary("\x00\xff\x80", 3);
    std::string long_string(300, 'z');  // two-byte varint length
    w.add("z", TensorData::from_values<std::string>({2}, {binary, long_string}).view());
    w.finish();
  }
  const std::string data = read_file(prefix + ".data-00000-of-00001");
  CHECK(to_hex(data.substr(0, 8)) ==
        "0200782"
        "70b346162");
  CHECK(to_hex(data.substr(8, 4)) == "d8ea82a2");  // 0-element: just Mask(0)
  auto t = decode_table(read_file(prefix + ".index"));
  // entry crc of ["ab",""] is 0x4db08891; of the empty string tensor 0x640cc1f6.
  CHECK(to_hex(t.entries[2].second)
            .find("3591"
                  "88b04d") != std::string::npos);
  CHECK(to_hex(t.entries[1].second).find("35f6c10c64") != std::string::npos);
  BundleReader reader(prefix);
  CHECK(reader.read("s").strings == std::vector<std::string>{"ab", ""});
  CHECK(reader.read("empty").strings.empty());
  auto z = reader.read("z").strings;
  REQUIRE(z.size() == 2);
  CHECK(z[0] == std::string("\x00\xff\x80", 3));
  CHECK(z[1] == std::string(300, 'z'));
}

TEST_CASE("streamed tensors and data alignment", "[bundle]") {
  TempDir dir;
  const std::string prefix = dir / "aligned";
  std::vector<double> big(1000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<double>(i) * 0.25;
  {
    BundleWriter w(prefix, {.data_alignment = 64});
    w.add("a", TensorData::from_values<int8_t>({3}, {1, 2, 3}).view());
    w.begin_tensor("big", DType::kDouble, {10, 100});
    auto bytes = std::as_bytes(std::span<const double>(big));
    for (size_t off = 0; off < bytes.size(); off += 1000) {
      w.append_tensor_bytes(bytes.subspan(off, std::min<size_t>(1000, bytes.size() - off)));
    }
    CHECK_THROWS_AS(w.add("c", TensorData::from_values<int8_t>({1}, {1}).view()),
                    FailedPreconditionError);
    w.end_tensor();
    w.add("c", TensorData::from_values<int8_t>({1}, {9}).view());
    w.finish();
    CHECK_THROWS_AS(w.finish(), FailedPreconditionError);
  }
  BundleReader reader(prefix);
  CHECK(reader.info("big").offset == 64);
  CHECK(reader.info("c").offset == 64 + 8000);
  CHECK(reader.read("big").values<double>() == big);
  CHECK(reader.read("c").values<int8_t>() == std::vector<int8_t>{9});
}

TEST_CASE("a streamed tensor takes the caller's checksum", "[bundle]") {
  TempDir dir;
  std::vector<float> v(3000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) - 7.5f;
  const auto bytes = std::as_bytes(std::span<const float>(v));
  const uint32_t crc = crc32c::value(bytes.data(), bytes.size());
  auto stream = [&](BundleWriter& w, const std::string& name, uint32_t given) {
    w.begin_tensor(name, DType::kFloat, {3000});
    w.append_unchecksummed_tensor_bytes(bytes.first(5000));
    w.append_unchecksummed_tensor_bytes(bytes.subspan(5000));
    w.end_tensor(given);
  };
  {
    BundleWriter w(dir / "given");
    stream(w, "right", crc);
    stream(w, "wrong", crc ^ 1);
    // A stream is checksummed here or by the caller, never both.
    w.begin_tensor("mixed", DType::kFloat, {3000});
    w.append_tensor_bytes(bytes.first(400));
    CHECK_THROWS_WITH(w.append_unchecksummed_tensor_bytes(bytes.subspan(400, 400)),
                      Catch::Contains("\"mixed\"") && Catch::Contains("mixed"));
    w.append_tensor_bytes(bytes.subspan(400));
    CHECK_THROWS_WITH(w.end_tensor(crc), Catch::Contains("a checksum given for checksummed"));
    w.end_tensor();
    w.begin_tensor("untold", DType::kFloat, {3000});
    w.append_unchecksummed_tensor_bytes(bytes);
    CHECK_THROWS_WITH(w.end_tensor(), Catch::Contains("no checksum was given"));
    w.end_tensor(crc);
    w.finish();
  }
  BundleReader reader(dir / "given");
  CHECK(reader.read("right").values<float>() == v);
  CHECK(reader.read("mixed").values<float>() == v);
  CHECK(reader.read("untold").values<float>() == v);
  CHECK_THROWS_WITH(reader.read("wrong"), Catch::Contains("crc32c mismatch"));
}

TEST_CASE("writer rejects bad input before writing", "[bundle]") {
  TempDir dir;
  BundleWriter w(dir / "bad");
  auto t = TensorData::from_values<float>({2}, {1, 2});
  w.add("x", t.view());
  CHECK_THROWS_WITH(w.add("x", t.view()), Catch::Contains("duplicate key"));
  CHECK_THROWS_AS(w.add("", t.view()), InvalidArgumentError);
  TensorView wrong = t.view();
  wrong.shape = {3};
  CHECK_THROWS_WITH(w.add("y", wrong), Catch::Contains("needs 12 bytes, got 8"));
  CHECK_THROWS_AS(w.add_slice("z", {4}, TensorSlice::parse("3,2"), t.view()), InvalidArgumentError);
  CHECK_THROWS_WITH(w.add_slice("z", {4}, TensorSlice::parse("0,3"), t.view()),
                    Catch::Contains("does not match the shape of the tensor to save"));
  CHECK_THROWS_AS(w.add_slice("x", {4}, TensorSlice::parse("0,2"), t.view()), InvalidArgumentError);
  w.finish();
  BundleReader reader(dir / "bad");
  CHECK(reader.list().size() == 1);
}

TEST_CASE("an unfinished writer leaves no files", "[bundle]") {
  TempDir dir;
  {
    BundleWriter w(dir / "sub/dir/never");
    w.add("x", TensorData::from_values<float>({1}, {1}).view());
  }
  CHECK(default_file_system()->list_dir(dir / "sub/dir").empty());
}

TEST_CASE("sharded save merges per-device bundles like MergeV2Checkpoints", "[bundle][merge]") {
  TempDir dir;
  const std::string prefix = dir / "model.ckpt-7";
  const std::string tmp = temp_prefix_for(prefix);
  CHECK(tmp.size() ==
        prefix.size() + std::string("_temp_").size() + 32 + std::string("/part").size());
  std::vector<std::string> parts;
  const int n = 3;
  for (int shard = 0; shard < n; ++shard) {
    parts.push_back(sharded_prefix(tmp, shard, n));
    BundleWriter w(parts.back());
    w.add("dev" + std::to_string(shard) + "/v",
          TensorData::from_values<int32_t>({2}, {shard, shard * 10}).view());
    // A partitioned tensor whose slices live on different devices.
    std::vector<float> piece{static_cast<float>(shard), static_cast<float>(shard) + 0.5f};
    w.add_slice("emb", {n, 2}, TensorSlice({{shard, 1}, {0, 2}}),
                TensorData::from_values<float>({1, 2}, piece).view());
    w.finish();
  }
  CHECK(parts[1] == tmp + "-00001-of-00003");
  merge_bundles(parts, prefix);

  auto files = default_file_system()->list_dir(dir.path());
  CHECK(files == std::vector<std::string>{
                     "model.ckpt-7.data-00000-of-00003", "model.ckpt-7.data-00001-of-00003",
                     "model.ckpt-7.data-00002-of-00003", "model.ckpt-7.index"});
  BundleReader reader(prefix);
  CHECK(reader.num_shards() == 3);
  for (int shard = 0; shard < n; ++shard) {
    TensorInfo info = reader.info("dev" + std::to_string(shard) + "/v");
    CHECK(info.shard == shard);
    CHECK(reader.read(info.name).values<int32_t>() == std::vector<int32_t>{shard, shard * 10});
  }
  TensorInfo emb = reader.info("emb");
  CHECK(emb.slices.size() == 3);
  CHECK(reader.read("emb").values<float>() == std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f});

  // Duplicate plain keys are rejected.
  const std::string tmp2 = temp_prefix_for(dir / "dup");
  for (int shard = 0; shard < 2; ++shard) {
    BundleWriter w(sharded_prefix(tmp2, shard, 2));
    w.add("same", TensorData::from_values<int32_t>({}, {shard}).view());
    w.finish();
  }
  CHECK_THROWS_WITH(
      merge_bundles({sharded_prefix(tmp2, 0, 2), sharded_prefix(tmp2, 1, 2)}, dir / "dup"),
      Catch::Contains("Duplicate tensor keyed by \"same\""));
  CHECK_THROWS_AS(merge_bundles({dir / "nothing"}, dir / "none"), NotFoundError);
}

TEST_CASE("big-endian bundles are byte-swapped after the CRC check", "[bundle][format]") {
  TempDir dir;
  const std::string prefix = dir / "be";
  {
    BundleWriter w(prefix);
    w.add("i", TensorData::from_values<int32_t>({2}, {0x01020304, 0x0a0b0c0d}).view());
    w.add("c", TensorData::from_values<complex64>({1}, {complex64(1.0f, -2.0f)}).view());
    w.finish();
  }
  // Rewrite the header as if a big-endian host wrote these bytes.
  auto t = decode_table(read_file(prefix + ".index"));
  REQUIRE(to_hex(t.entries[0].second) == "08011a020801");
  t.entries[0].second = from_hex(
      "08011001"
      "1a020801");
  write_table_atomically(*default_file_system(), prefix + ".index", t.entries);
  BundleReader reader(prefix);
  CHECK(reader.read("i").values<int32_t>() == std::vector<int32_t>{0x04030201, 0x0d0c0b0a});
  auto c = reader.read("c").values<complex64>();
  uint32_t re_bits = 0x0000803f;  // 1.0f with its bytes reversed
  float re;
  std::memcpy(&re, &re_bits, 4);
  CHECK(std::memcmp(&c[0], &re, 4) == 0);
}
