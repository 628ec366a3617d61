#include <catch2/catch.hpp>

#include "checkpoint/ordered_code_internal.h"
#include "checkpoint_test_util.h"
#include "varstate/error.h"
#include "varstate/tensor_slice.h"

using namespace varstate;
using varstate::testing::from_hex;
using varstate::testing::to_hex;

TEST_CASE("slice specs parse and print", "[slice]") {
  TensorSlice s = TensorSlice::parse("0,5:-");
  REQUIRE(s.rank() == 2);
  CHECK(s.extent(0) == TensorSlice::Extent{0, 5});
  CHECK(s.is_full_at(1));
  CHECK(s.to_string() == "0,5:-");
  CHECK(TensorSlice::parse("").rank() == 0);
  CHECK(TensorSlice::full(3).to_string() == "-:-:-");
  CHECK(s.slice_shape(std::vector<int64_t>{10, 20}) == std::vector<int64_t>{5, 20});

  ShapeAndSlice ss = parse_shape_and_slice("10 20 0,5:-");
  CHECK(ss.full_shape == std::vector<int64_t>{10, 20});
  CHECK(ss.slice == s);
  CHECK(shape_and_slice_string(ss.full_shape, ss.slice) == "10 20 0,5:-");

  CHECK_THROWS_WITH(parse_shape_and_slice("10"), Catch::Contains("Need least two elements"));
  CHECK_THROWS_WITH(parse_shape_and_slice("10 x -"), Catch::Contains("Non numerical dimension"));
  CHECK_THROWS_WITH(TensorSlice::parse("1"), Catch::Contains("Expected a pair of numbers or '-'"));
  CHECK_THROWS_WITH(TensorSlice::parse("1,0"),
                    Catch::Contains("non-negative start and positive length"));
  CHECK_THROWS_WITH(parse_shape_and_slice("10 5,6"),
                    Catch::Contains("Extent in dimension 0 out of bounds"));
  CHECK_THROWS_AS(parse_shape_and_slice("10 20 -"), InvalidArgumentError);
}

TEST_CASE("slices intersect", "[slice]") {
  std::vector<int64_t> shape{10, 4};
  auto a = TensorSlice::parse("0,6:-");
  auto b = TensorSlice::parse("4,6:1,2");
  auto i = a.intersect(b, shape);
  REQUIRE(i);
  CHECK(i->to_string() == "4,2:1,2");
  CHECK_FALSE(TensorSlice::parse("0,4:-").intersect(TensorSlice::parse("4,6:-"), shape));
  CHECK(TensorSlice::full(2).intersect(TensorSlice::full(2), shape)->is_full());
  CHECK(TensorSlice::parse("0,10:0,4").covers(shape));
  CHECK_FALSE(TensorSlice::parse("0,10:0,4").is_full());
}

TEST_CASE("signed ordered code matches formats.md examples", "[slice][ordered_code]") {
  const std::pair<int64_t, const char*> cases[] = {{0, "80"},
                                                   {1, "81"},
                                                   {3, "83"},
                                                   {63, "bf"},
                                                   {-1, "7f"},
                                                   {-64, "40"},
                                                   {64, "c040"},
                                                   {100, "c064"},
                                                   {8191, "dfff"},
                                                   {8192, "e02000"},
                                                   {-65, "3fbf"},
                                                   {-2048, "3800"},
                                                   {0x424242, "f0424242"},
                                                   {int64_t{1} << 40, "fd0000000000"}};
  for (const auto& [v, hex] : cases) {
    CAPTURE(v);
    std::string enc;
    ordered_code::write_signed_num_increasing(&enc, v);
    CHECK(to_hex(enc) == hex);
    std::string_view in = enc;
    int64_t back = 0;
    REQUIRE(ordered_code::read_signed_num_increasing(&in, &back));
    CHECK(back == v);
    CHECK(in.empty());
  }
  // Round trip and ordering over a wide range.
  std::vector<int64_t> values{INT64_MIN,
                              INT64_MIN + 1,
                              -(int64_t{1} << 62),
                              -1000000,
                              -65,
                              -64,
                              -1,
                              0,
                              1,
                              63,
                              64,
                              1 << 20,
                              (int64_t{1} << 55) - 1,
                              int64_t{1} << 55,
                              int64_t{1} << 62,
                              INT64_MAX};
  std::string prev;
  for (int64_t v : values) {
    CAPTURE(v);
    std::string enc;
    ordered_code::write_signed_num_increasing(&enc, v);
    std::string_view in = enc;
    int64_t back = 0;
    REQUIRE(ordered_code::read_signed_num_increasing(&in, &back));
    CHECK(back == v);
    CHECK(prev < enc);
    prev = enc;
  }
}

TEST_CASE("tensor name slice keys match formats.md", "[slice][ordered_code]") {
  CHECK(to_hex(encode_tensor_name_slice("Variable", TensorSlice::full(0))) ==
        "005661726961626c65000100");
  CHECK(to_hex(encode_tensor_name_slice("w", TensorSlice::full(2))) ==
        "0077000101028"
        "07f807f");
  CHECK(to_hex(encode_tensor_name_slice("w", TensorSlice::parse("0,3:0,2"))) ==
        "00770001010280838082");
  CHECK(to_hex(encode_tensor_name_slice("w", TensorSlice::parse("3,2:0,2"))) ==
        "00770001010283828082");

  std::string odd("a\0b\xff", 4);
  auto key = encode_tensor_name_slice(odd, TensorSlice::parse("100,8192:-"));
  auto back = decode_tensor_name_slice(key);
  REQUIRE(back);
  CHECK(back->name == odd);
  CHECK(back->slice.to_string() == "100,8192:-");
  CHECK_FALSE(decode_tensor_name_slice("plain_name"));
  CHECK_FALSE(decode_tensor_name_slice(from_hex("0077")));
}
