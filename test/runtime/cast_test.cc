// Float -> integer casts at the edges (cast_edge_cases.h) against the
// hand-written expected values, on the test device (CTest runs this binary
// on CPU:0 and on GPU:0): NaN -> 0, saturation, truncation toward zero.
#include <catch2/catch.hpp>

#include "cast_edge_cases.h"
#include "device_fixture.h"
#include "varstate/cast.h"

using namespace varstate;
using namespace varstate::testing;

TEST_CASE("float -> integer casts saturate, NaN -> 0", "[cast]") {
  Device& device = test_device();
  for (const CastEdgeTable& table : cast_edge_tables()) {
    for (DType from : cast_edge_sources()) {
      const auto [src, cases] = cast_edge_inputs(table, from, device);
      CAPTURE(dtype_name(from), dtype_name(table.to), device.name());
      CHECK(cases.size() >= 4);  // NaN, +-inf and -0.0 at least
      const Tensor out = cast_tensor(src, table.to);
      CHECK(&out.device() == &device);
      const std::vector<__int128> got = int128_values(out);
      REQUIRE(got.size() == cases.size());
      for (size_t i = 0; i < cases.size(); ++i) {
        CAPTURE(cases[i].input, int128_string(cases[i].want), int128_string(got[i]));
        CHECK(got[i] == cases[i].want);
      }
    }
  }
}

TEST_CASE("integer -> integer casts wrap, as tf.cast does", "[cast]") {
  const Tensor src = Tensor::from_vector<int32_t>({300, -129, 65536 + 7}).to(test_device());
  CHECK(cast_tensor(src, DType::kInt8).to_vector<int8_t>() == std::vector<int8_t>{44, 127, 7});
  CHECK(cast_tensor(src, DType::kUInt16).to_vector<uint16_t>() ==
        std::vector<uint16_t>{300, 65407, 7});
}
