// Float -> integer casts at the edges, written out by hand: NaN, infinities,
// -0.0, values just inside each integer type's range and just outside it.
// The rule (include/varstate/cast.h): truncate toward zero, NaN -> 0,
// saturate to the type's range; to bool is "!= 0". Shared by the CPU test
// (cast_test.cc, also run on GPU:0) and the GPU-vs-CPU test
// (cast_gpu_test.cc).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "varstate/dtype.h"
#include "varstate/tensor.h"

namespace varstate::testing {

struct CastEdge {
  double input;
  __int128 want;
};

struct CastEdgeTable {
  DType to;
  std::vector<CastEdge> cases;
};

// The float dtypes cast from (complex: the real part). An input a dtype
// cannot hold exactly (2^31 - 1 in a float, 300 in a half is fine) is left
// out for that dtype by the tests.
inline std::vector<DType> cast_edge_sources() {
  return {DType::kFloat,    DType::kDouble,    DType::kHalf,
          DType::kBFloat16, DType::kComplex64, DType::kComplex128};
}

inline std::vector<CastEdgeTable> cast_edge_tables() {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double p31 = std::ldexp(1.0, 31), p32 = std::ldexp(1.0, 32);
  const double p63 = std::ldexp(1.0, 63), p64 = std::ldexp(1.0, 64);
  const __int128 i64_max = std::numeric_limits<int64_t>::max();
  const __int128 i64_min = std::numeric_limits<int64_t>::min();
  const __int128 u64_max = std::numeric_limits<uint64_t>::max();
  return {
      {DType::kInt8,
       {{kNaN, 0},
        {kInf, 127},
        {-kInf, -128},
        {-0.0, 0},
        {0.9, 0},
        {-0.9, 0},
        {127, 127},
        {126.5, 126},
        {128, 127},
        {300, 127},
        {-128, -128},
        {-128.5, -128},
        {-129, -128},
        {std::ldexp(1.0, 100), 127},
        {-std::ldexp(1.0, 100), -128}}},
      {DType::kUInt8,
       {{kNaN, 0},
        {kInf, 255},
        {-kInf, 0},
        {-0.0, 0},
        {-0.9, 0},
        {255, 255},
        {254.5, 254},
        {256, 255},
        {300, 255},
        {-1, 0},
        {-1.5, 0},
        {-300, 0}}},
      {DType::kInt16,
       {{kNaN, 0},
        {kInf, 32767},
        {-kInf, -32768},
        {-0.0, 0},
        {32767, 32767},
        {32766.5, 32766},
        {32768, 32767},
        {65504, 32767},
        {-32768, -32768},
        {-32769, -32768},
        {-40000, -32768},
        {-65504, -32768}}},
      {DType::kUInt16,
       {{kNaN, 0},
        {kInf, 65535},
        {-kInf, 0},
        {-0.0, 0},
        {65535, 65535},
        {65504, 65504},
        {65535.5, 65535},
        {65536, 65535},
        {1e6, 65535},
        {-1, 0},
        {-0.5, 0}}},
      {DType::kInt32,
       {{kNaN, 0},
        {kInf, 2147483647},
        {-kInf, -2147483648LL},
        {-0.0, 0},
        {p31 - 1, 2147483647},
        {p31 - 0.5, 2147483647},
        {p31 - 128, 2147483520},  // the largest float below 2^31
        {p31, 2147483647},
        {-p31, -2147483648LL},
        {-p31 - 1, -2147483648LL},
        {-p31 - 256, -2147483648LL}}},  // the float just below -2^31
      {DType::kUInt32,
       {{kNaN, 0},
        {kInf, 4294967295LL},
        {-kInf, 0},
        {-0.0, 0},
        {p32 - 1, 4294967295LL},
        {p32 - 256, 4294967040LL},  // the largest float below 2^32
        {p32, 4294967295LL},
        {-1, 0}}},
      {DType::kInt64,
       {{kNaN, 0},
        {kInf, i64_max},
        {-kInf, i64_min},
        {-0.0, 0},
        {p63 - 1024, i64_max - 1023},  // the largest double below 2^63
        {p63 - std::ldexp(1.0, 39), i64_max - (__int128{1} << 39) + 1},  // ... float
        {p63, i64_max},
        {-p63, i64_min},
        {-p63 - 2048, i64_min},  // the double just below -2^63
        {-p63 - std::ldexp(1.0, 40), i64_min}}},
      {DType::kUInt64,
       {{kNaN, 0},
        {kInf, u64_max},
        {-kInf, 0},
        {-0.0, 0},
        {p64 - 2048, u64_max - 2047},  // the largest double below 2^64
        {p64 - std::ldexp(1.0, 40), u64_max - (__int128{1} << 40) + 1},  // ... float
        {p64, u64_max},
        {-1, 0}}},
      {DType::kBool,
       {{kNaN, 1},
        {kInf, 1},
        {-kInf, 1},
        {-0.0, 0},
        {0.0, 0},
        {0.5, 1},
        {-0.5, 1},
        {1e-40, 1}}},  // a float subnormal
  };
}

// The elements of an integer or bool tensor, widened exactly.
inline std::vector<__int128> int128_values(const Tensor& t) {
  std::vector<__int128> out;
  dispatch_all(t.dtype(), "int128_values", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      for (T v : t.to_vector<T>()) out.push_back(static_cast<__int128>(v));
    }
    return 0;
  });
  return out;
}

inline std::string int128_string(__int128 v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  std::string digits;
  for (; v != 0; v /= 10)
    digits.insert(digits.begin(), char('0' + (negative ? -(v % 10) : v % 10)));
  return negative ? "-" + digits : digits;
}

// The inputs of `table` that `from` holds exactly (NaN included), as a
// tensor of `from` on `device`, and their expected results.
inline std::pair<Tensor, std::vector<CastEdge>> cast_edge_inputs(const CastEdgeTable& table,
                                                                 DType from, Device& device) {
  std::vector<CastEdge> kept;
  std::vector<double> inputs;
  for (const CastEdge& c : table.cases) {
    const double back =
        Tensor::from_vector<double>({c.input}).cast(from).cast(DType::kDouble).scalar<double>();
    const bool exact = std::isnan(c.input)
                           ? std::isnan(back)
                           : back == c.input && std::signbit(back) == std::signbit(c.input);
    if (!exact) continue;
    kept.push_back(c);
    inputs.push_back(c.input);
  }
  Tensor src = Tensor::from_vector<double>(inputs).cast(from);
  return {device.is_cpu() ? src : src.to(device), kept};
}

}  // namespace varstate::testing
