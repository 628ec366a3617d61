#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "test_util.h"
#include "varstate/dtype.h"
#include "varstate/error.h"

using namespace varstate;

TEST_CASE("DType enum numbers are TensorFlow's", "[dtype]") {
  CHECK(static_cast<int>(DType::kFloat) == 1);
  CHECK(static_cast<int>(DType::kDouble) == 2);
  CHECK(static_cast<int>(DType::kInt32) == 3);
  CHECK(static_cast<int>(DType::kString) == 7);
  CHECK(static_cast<int>(DType::kInt64) == 9);
  CHECK(static_cast<int>(DType::kBool) == 10);
  CHECK(static_cast<int>(DType::kBFloat16) == 14);
  CHECK(static_cast<int>(DType::kComplex128) == 18);
  CHECK(static_cast<int>(DType::kHalf) == 19);
  CHECK(static_cast<int>(DType::kUInt64) == 23);
}

TEST_CASE("DType names and sizes", "[dtype]") {
  CHECK(dtype_name(DType::kFloat) == "float32");
  CHECK(dtype_name(DType::kHalf) == "float16");
  CHECK(dtype_from_name("bfloat16") == DType::kBFloat16);
  CHECK(dtype_from_name("float") == DType::kFloat);
  CHECK_THROWS_AS(dtype_from_name("float31"), InvalidArgumentError);
  CHECK_THROWS_WITH(dtype_from_name("float31"), Catch::Contains("\"float31\""));
  CHECK(dtype_size(DType::kComplex128) == 16);
  CHECK(dtype_size(DType::kBFloat16) == 2);
  CHECK(dtype_size(DType::kQInt32) == 4);
  CHECK(dtype_size(DType::kBool) == 1);
  CHECK(dtype_size(DType::kString) == 0);
  CHECK(dtype_is_valid(19));
  CHECK_FALSE(dtype_is_valid(20));  // DT_RESOURCE is not storable
  CHECK(dtype_is_floating(DType::kBFloat16));
  CHECK(dtype_is_integer(DType::kQUInt8));
  CHECK_FALSE(dtype_is_numeric(DType::kBool));
}

TEST_CASE("half conversion rounds to nearest even", "[dtype]") {
  CHECK(half(1.0f).bits == 0x3c00);
  CHECK(half(-2.0f).bits == 0xc000);
  CHECK(half(65504.0f).bits == 0x7bff);                // max finite
  CHECK(half(65520.0f).bits == 0x7c00);                // overflows to inf
  CHECK(half(5.960464477539063e-08f).bits == 0x0001);  // smallest subnormal
  CHECK(half(1.0f + 1.0f / 2048).bits == 0x3c00);      // tie -> even
  CHECK(half(1.0f + 3.0f / 2048).bits == 0x3c02);      // tie -> even (up)
  CHECK(std::isnan(static_cast<float>(half(std::nanf("")))));
  // Every finite half survives a round trip through float.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    half h = half::from_bits(static_cast<uint16_t>(b));
    float f = static_cast<float>(h);
    if (std::isnan(f)) continue;
    INFO("bits " << b);
    REQUIRE(half(f).bits == h.bits);
  }
}

TEST_CASE("bfloat16 conversion rounds to nearest even", "[dtype]") {
  CHECK(bfloat16(1.0f).bits == 0x3f80);
  CHECK(bfloat16(3.140625f).bits == 0x4049);
  CHECK(static_cast<float>(bfloat16::from_bits(0x4049)) == 3.140625f);
  CHECK(bfloat16(1.0f + 1.0f / 256).bits == 0x3f80);  // tie -> even
  CHECK(std::isnan(static_cast<float>(bfloat16(std::nanf("")))));
}

TEST_CASE("dispatch_numeric maps each dtype to its storage type", "[dtype]") {
#define VARSTATE_CHECK_DISPATCH(E, T) \
  CHECK(dispatch_numeric(DType::E, "test", [](auto v) { return sizeof(v); }) == sizeof(T));
  VARSTATE_FOR_EACH_NUMERIC_DTYPE(VARSTATE_CHECK_DISPATCH)
#undef VARSTATE_CHECK_DISPATCH
  CHECK_THROWS_AS(dispatch_numeric(DType::kString, "my_op", [](auto) { return 0; }),
                  InvalidArgumentError);
  CHECK_THROWS_WITH(dispatch_numeric(DType::kBool, "my_op", [](auto) { return 0; }),
                    Catch::Contains("my_op") && Catch::Contains("bool"));
}

TEST_CASE("only string tensors lack GPU kernels", "[dtype]") {
  CHECK_FALSE(dtype_has_gpu_kernels(DType::kString));
  for (DType d : {DType::kFloat, DType::kHalf, DType::kBFloat16, DType::kInt8, DType::kQInt8,
                  DType::kComplex128, DType::kBool, DType::kUInt64}) {
    CAPTURE(dtype_name(d));
    CHECK(dtype_has_gpu_kernels(d));
  }
}
