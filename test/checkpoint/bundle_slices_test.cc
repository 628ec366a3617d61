#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <tuple>
#include <vector>

#include "checkpoint/crc32c.h"
#include "checkpoint/file_system.h"
#include "checkpoint/tensor_bundle.h"
#include "checkpoint_test_util.h"
#include "test_util.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/error.h"

using namespace varstate;
using varstate::testing::TempDir;

namespace {

const std::vector<int64_t> kShape{7, 5, 3};

// Element value = its linear index in the full tensor.
int32_t full_value(const std::vector<int64_t>& idx) {
  return static_cast<int32_t>((idx[0] * kShape[1] + idx[1]) * kShape[2] + idx[2]);
}

// The naive reference: the elements of `slice`, looping over every index.
std::vector<int32_t> naive_slice(const TensorSlice& slice) {
  std::vector<int32_t> out;
  std::vector<int64_t> shape = slice.slice_shape(kShape);
  for (int64_t i = 0; i < shape[0]; ++i)
    for (int64_t j = 0; j < shape[1]; ++j)
      for (int64_t k = 0; k < shape[2]; ++k)
        out.push_back(
            full_value({slice.start_at(0) + i, slice.start_at(1) + j, slice.start_at(2) + k}));
  return out;
}

// Splits `dim` into `parts` extents as TensorFlow's partitioners do.
std::vector<TensorSlice::Extent> split(int64_t dim, int64_t parts) {
  std::vector<TensorSlice::Extent> out;
  int64_t start = 0;
  for (int64_t p = 0; p < parts; ++p) {
    int64_t len = dim / parts + (p < dim % parts ? 1 : 0);
    out.push_back({start, len});
    start += len;
  }
  return out;
}

// Saves the tensor as the grid of slices given by per-axis part counts.
void save_partitioned(const std::string& prefix, const std::vector<int64_t>& parts) {
  BundleWriter w(prefix);
  auto e0 = split(kShape[0], parts[0]), e1 = split(kShape[1], parts[1]),
       e2 = split(kShape[2], parts[2]);
  for (auto a : e0)
    for (auto b : e1)
      for (auto c : e2) {
        TensorSlice s({a, b, c});
        w.add_slice("t", kShape, s,
                    TensorData::from_values<int32_t>(s.slice_shape(kShape), naive_slice(s)).view());
      }
  w.finish();
}

TensorSlice random_box(std::mt19937_64& gen) {
  std::vector<TensorSlice::Extent> extents;
  for (int64_t dim : kShape) {
    if (gen() % 4 == 0) {
      extents.push_back({});  // full dimension
      continue;
    }
    int64_t start = static_cast<int64_t>(gen() % static_cast<uint64_t>(dim));
    int64_t len = 1 + static_cast<int64_t>(gen() % static_cast<uint64_t>(dim - start));
    extents.push_back({start, len});
  }
  return TensorSlice(extents);
}

}  // namespace

TEST_CASE("any region assembles from any partitioning", "[bundle][slices]") {
  TempDir dir;
  const std::vector<std::vector<int64_t>> partitionings{{1, 1, 1}, {7, 1, 1}, {3, 1, 1},
                                                        {2, 1, 1}, {1, 5, 1}, {1, 2, 1},
                                                        {2, 2, 1}, {3, 2, 3}, {7, 5, 3}};
  std::mt19937_64 gen(varstate::testing::kSeed);
  INFO("seed " << varstate::testing::kSeed);
  for (const auto& parts : partitionings) {
    CAPTURE(parts);
    const std::string prefix = dir / ("p" + std::to_string(parts[0]) + std::to_string(parts[1]) +
                                      std::to_string(parts[2]));
    save_partitioned(prefix, parts);
    auto reader = open_checkpoint(prefix);
    TensorInfo info = reader->info("t");
    CHECK(info.shape == kShape);
    CHECK(info.slices.size() == (parts == std::vector<int64_t>{1, 1, 1}
                                     ? 0u
                                     : static_cast<size_t>(parts[0] * parts[1] * parts[2])));
    CHECK(reader->read("t").values<int32_t>() == naive_slice(TensorSlice::full(3)));
    for (int trial = 0; trial < 30; ++trial) {
      TensorSlice box = random_box(gen);
      CAPTURE(box.to_string());
      TensorData got = reader->read_slice("t", box);
      CHECK(got.shape == box.slice_shape(kShape));
      CHECK(got.values<int32_t>() == naive_slice(box));
    }
  }
}

TEST_CASE("restoring into a different partitioning", "[bundle][slices]") {
  TempDir dir;
  save_partitioned(dir / "three", {3, 1, 1});
  BundleReader reader(dir / "three");
  // Re-split into 2 parts along axis 0 and 5 along axis 1.
  for (auto a : split(7, 2))
    for (auto b : split(5, 5)) {
      TensorSlice s({a, b, {}});
      CHECK(reader.read_slice("t", s).values<int32_t>() == naive_slice(s));
    }
}

TEST_CASE("a byte range of a stored slice reads straight, the whole slice checksummed",
          "[bundle][slices]") {
  TempDir dir;
  save_partitioned(dir / "three", {3, 1, 1});  // rows [0,3) [3,5) [5,7)
  BundleReader reader(dir / "three");
  const TensorInfo info = reader.info("t");
  const int64_t row_bytes = kShape[1] * kShape[2] * 4;
  // Rows 1 and 2 of the first piece.
  std::vector<int32_t> got(static_cast<size_t>(2 * kShape[1] * kShape[2]), -1);
  std::span<std::byte> dst(reinterpret_cast<std::byte*>(got.data()), got.size() * 4);
  REQUIRE(reader.read_slice_range_into(info, 0, static_cast<uint64_t>(row_bytes), dst));
  CHECK(got == naive_slice(TensorSlice({{1, 2}, {}, {}})));
  std::span<std::byte> none;
  CHECK(reader.read_slice_range_into(info, 2, 0, none));  // nothing copied, still checked
  CHECK_THROWS_AS(reader.read_slice_range_into(info, 0, static_cast<uint64_t>(2 * row_bytes), dst),
                  InvalidArgumentError);
  // A flipped byte outside the range read is still caught.
  const std::string data = dir / "three.data-00000-of-00001";
  {
    std::FILE* f = std::fopen(data.c_str(), "r+b");
    REQUIRE(f != nullptr);
    std::fseek(f, 1, SEEK_SET);  // in row 0 of the first piece
    const int c = std::fgetc(f);
    std::fseek(f, 1, SEEK_SET);
    std::fputc(c ^ 0x41, f);
    std::fclose(f);
  }
  BundleReader corrupt(dir / "three");
  CHECK_THROWS_WITH(corrupt.read_slice_range_into(info, 0, static_cast<uint64_t>(row_bytes), dst),
                    Catch::Contains("crc32c mismatch") && Catch::Contains("three.data-00000"));
}

TEST_CASE("a byte range of a stored slice maps in place, with the checksum of its read",
          "[bundle][slices]") {
  TempDir dir;
  save_partitioned(dir / "three", {3, 1, 1});  // rows [0,3) [3,5) [5,7)
  BundleReader reader(dir / "three");
  const TensorInfo info = reader.info("t");
  const auto row_bytes = static_cast<uint64_t>(kShape[1] * kShape[2] * 4);
  for (const auto& [slice, begin, end] : std::vector<std::tuple<int, uint64_t, uint64_t>>{
           {0, row_bytes, 3 * row_bytes}, {1, 0, 2 * row_bytes}, {2, 3, row_bytes - 1}}) {
    CAPTURE(slice, begin, end);
    std::unique_ptr<MappedRegion> region = reader.map_slice_range(info, slice, begin, end);
    REQUIRE(region != nullptr);
    REQUIRE(region->size() == end - begin);
    std::vector<std::byte> read(static_cast<size_t>(end - begin));
    const uint32_t crc = reader.read_slice_range_crc(info, slice, begin, end, read.data());
    CHECK(std::memcmp(region->data(), read.data(), read.size()) == 0);
    CHECK(crc32c::value(region->data(), region->size()) == crc);
  }
  CHECK(reader.map_slice_range(info, 1, row_bytes, row_bytes) == nullptr);  // empty
  CHECK_THROWS_WITH(reader.map_slice_range(info, 1, 0, 2 * row_bytes + 1),
                    Catch::Contains("are not in the stored") && Catch::Contains("three.data"));
}

TEST_CASE("missing slices are reported", "[bundle][slices]") {
  TempDir dir;
  {
    BundleWriter w(dir / "holes");
    TensorSlice s({{0, 3}, {}, {}});
    w.add_slice("t", kShape, s,
                TensorData::from_values<int32_t>(s.slice_shape(kShape), naive_slice(s)).view());
    w.finish();
  }
  BundleReader reader(dir / "holes");
  TensorSlice inside({{1, 2}, {}, {}});
  CHECK(reader.read_slice("t", inside).values<int32_t>() == naive_slice(inside));
  CHECK_THROWS_WITH(
      reader.read("t"),
      Catch::Contains("Does not have sufficient slices for partitioned tensor \"t\"") &&
          Catch::Contains("45 of 105"));
  CHECK_THROWS_AS(reader.read_slice("t", TensorSlice({{2, 2}, {}, {}})), NotFoundError);
  CHECK_THROWS_AS(reader.read_slice("t", TensorSlice({{6, 2}, {}, {}})), InvalidArgumentError);
  CHECK_THROWS_AS(reader.read_slice("t", TensorSlice::full(2)), InvalidArgumentError);
}

TEST_CASE("string and bool tensors slice too", "[bundle][slices]") {
  TempDir dir;
  std::vector<std::string> words{"a", "bb", "", "dddd", "e", "ffffff"};
  {
    BundleWriter w(dir / "words");
    w.add_slice(
        "w", {3, 2}, TensorSlice::parse("0,2:-"),
        TensorData::from_values<std::string>({2, 2}, {words[0], words[1], words[2], words[3]})
            .view());
    w.add_slice("w", {3, 2}, TensorSlice::parse("2,1:-"),
                TensorData::from_values<std::string>({1, 2}, {words[4], words[5]}).view());
    w.add("flags", TensorData::from_values<bool>({4}, {true, false, false, true}).view());
    w.finish();
  }
  BundleReader reader(dir / "words");
  CHECK(reader.read("w").strings == words);
  CHECK(reader.read_slice("w", TensorSlice::parse("1,2:1,1")).strings ==
        std::vector<std::string>{"dddd", "ffffff"});
  CHECK(reader.read_slice("flags", TensorSlice::parse("1,3")).values<bool>() ==
        std::vector<bool>{false, false, true});
}
