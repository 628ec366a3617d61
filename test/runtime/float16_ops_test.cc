// The 16-bit floats (float16, bfloat16) through the element-wise ops,
// assign_add/assign_sub and casts, on every bit pattern, against varstate/dtype.h's own conversions
// (the out-of-line ones the kernels' inline copies must equal): widen to
// float, compute, round once to nearest even. NaNs, infinities, subnormals,
// both zeros and every rounding case are among the patterns; a result the
// reference gives as NaN must be a NaN (which payload passes on is not
// fixed: kernels/cpu/isa_variants.h). On the CPU the large tensors also
// split over the thread pool; CTest runs the [isa] cases again under each
// narrower instruction set (VARSTATE_CPU_ISA) and the binary on GPU:0.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "device_fixture.h"
#include "varstate/cast.h"
#include "varstate/dense_update.h"
#include "varstate/math_ops.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

// Every 16-bit pattern once per 65,536 elements (x), and against it a
// permutation of them (y: an odd multiplier is a bijection mod 2^16, and the
// offset changes the pairing in each repeat). On the CPU, 2^21 + 37
// elements: more than the pool's split threshold, and a ragged tail.
int64_t pattern_count(const Device& device) {
  return device.is_cpu() ? (int64_t{1} << 21) + 37 : 65536;
}

uint16_t x_pattern(int64_t i) { return static_cast<uint16_t>(i); }
uint16_t y_pattern(int64_t i) { return static_cast<uint16_t>(i * 40503 + (i >> 16) * 7919); }

template <typename T>
Tensor from_patterns(int64_t n, uint16_t (*pattern)(int64_t), const TensorShape& shape) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = T::from_bits(pattern(i));
  return Tensor::from_vector<T>(v, shape).to(test_device());
}

template <typename T>
std::string bits_of(T v) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%04x (%g)", v.bits, static_cast<double>(float(v)));
  return text;
}

// Empty when `actual` equals `expected` bit for bit, or both are NaN.
template <typename T>
std::string compare_16bit(const Tensor& actual, const std::vector<T>& expected,
                          const std::function<std::string(int64_t)>& operands) {
  REQUIRE(actual.num_elements() == static_cast<int64_t>(expected.size()));
  const std::vector<T> got = actual.to_vector<T>();
  for (size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(float(got[i])) && std::isnan(float(expected[i]));
    if (got[i].bits != expected[i].bits && !both_nan) {
      return "element " + std::to_string(i) + " of " + operands(static_cast<int64_t>(i)) + ": " +
             bits_of(got[i]) + ", want " + bits_of(expected[i]);
    }
  }
  return "";
}

template <typename T>
void check_binary_ops() {
  Device& device = test_device();
  const int64_t n = pattern_count(device);
  CAPTURE(dtype_name(dtype_of<T>), device.name(), n);
  const Tensor x = from_patterns<T>(n, x_pattern, {n});
  const Tensor y = from_patterns<T>(n, y_pattern, {n});
  // A column operand: [n / 16, 1] against x as [n / 16, 16] rows.
  const int64_t rows = n / 16;
  const Tensor x_rows = from_patterns<T>(rows * 16, x_pattern, {rows, 16});
  const Tensor column = from_patterns<T>(rows, y_pattern, {rows, 1});
  // Scalars: a subnormal, a normal with a long mantissa and a NaN's
  // neighbour (the largest finite value), one per case.
  const uint16_t scalar_bits = std::is_same_v<T, half> ? 0x3bff : 0x3f81;
  const Tensor scalar = Tensor::from_vector<T>({T::from_bits(scalar_bits)}, {}).to(device);

  struct Op {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> run;
    std::function<float(float, float)> value;  // NaN rules as TensorFlow's
  };
  const auto maximum_of = [](float a, float b) { return std::isnan(a) || a > b ? a : b; };
  const auto minimum_of = [](float a, float b) { return std::isnan(a) || a < b ? a : b; };
  const std::vector<Op> ops = {
      {"add", add, [](float a, float b) { return a + b; }},
      {"subtract", subtract, [](float a, float b) { return a - b; }},
      {"multiply", multiply, [](float a, float b) { return a * b; }},
      {"divide", divide, [](float a, float b) { return a / b; }},
      {"maximum", maximum, maximum_of},
      {"minimum", minimum, minimum_of},
  };
  for (const Op& op : ops) {
    CAPTURE(op.name);
    const auto reference = [&](uint16_t a, uint16_t b) {
      return T(op.value(float(T::from_bits(a)), float(T::from_bits(b))));
    };
    const auto pair_text = [](uint16_t a, uint16_t b) {
      return bits_of(T::from_bits(a)) + " and " + bits_of(T::from_bits(b));
    };
    std::vector<T> want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) want[i] = reference(x_pattern(i), y_pattern(i));
    CHECK(compare_16bit<T>(op.run(x, y), want,
                           [&](int64_t i) { return pair_text(x_pattern(i), y_pattern(i)); }) == "");

    for (int64_t i = 0; i < n; ++i) want[i] = reference(x_pattern(i), scalar_bits);
    CHECK(compare_16bit<T>(op.run(x, scalar), want,
                           [&](int64_t i) { return pair_text(x_pattern(i), scalar_bits); }) == "");
    for (int64_t i = 0; i < n; ++i) want[i] = reference(scalar_bits, x_pattern(i));
    CHECK(compare_16bit<T>(op.run(scalar, x), want,
                           [&](int64_t i) { return pair_text(scalar_bits, x_pattern(i)); }) == "");

    want.resize(static_cast<size_t>(rows * 16));
    for (int64_t i = 0; i < rows * 16; ++i) want[i] = reference(x_pattern(i), y_pattern(i / 16));
    CHECK(compare_16bit<T>(op.run(x_rows, column), want, [&](int64_t i) {
            return pair_text(x_pattern(i), y_pattern(i / 16));
          }) == "");
    want.resize(static_cast<size_t>(n));
  }

  // Unary: -x flips the sign of every value (a NaN stays a NaN); |x| too.
  std::vector<T> want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) want[i] = T(-float(T::from_bits(x_pattern(i))));
  CHECK(compare_16bit<T>(negative(x), want,
                         [&](int64_t i) { return bits_of(T::from_bits(x_pattern(i))); }) == "");
  for (int64_t i = 0; i < n; ++i) want[i] = T(std::fabs(float(T::from_bits(x_pattern(i)))));
  CHECK(compare_16bit<T>(abs(x), want,
                         [&](int64_t i) { return bits_of(T::from_bits(x_pattern(i))); }) == "");
}

template <typename T>
void check_dense_updates() {
  Device& device = test_device();
  const int64_t n = pattern_count(device);
  CAPTURE(dtype_name(dtype_of<T>), device.name(), n);
  const Tensor y = from_patterns<T>(n, y_pattern, {n});
  const uint16_t scalar_bits = std::is_same_v<T, half> ? 0x0203 : 0x3f81;
  const Tensor scalar = Tensor::from_vector<T>({T::from_bits(scalar_bits)}, {}).to(device);
  const auto x_value = [](int64_t i) { return float(T::from_bits(x_pattern(i))); };
  const auto y_value = [](int64_t i) { return float(T::from_bits(y_pattern(i))); };
  const float s = float(T::from_bits(scalar_bits));
  const auto text = [](int64_t i) {
    return bits_of(T::from_bits(x_pattern(i))) + " and " + bits_of(T::from_bits(y_pattern(i)));
  };
  std::vector<T> want(static_cast<size_t>(n));

  Tensor target = from_patterns<T>(n, x_pattern, {n});
  assign_add(target, y);
  for (int64_t i = 0; i < n; ++i) want[i] = T(x_value(i) + y_value(i));
  CHECK(compare_16bit<T>(target, want, text) == "");

  target = from_patterns<T>(n, x_pattern, {n});
  assign_sub(target, y);
  for (int64_t i = 0; i < n; ++i) want[i] = T(x_value(i) - y_value(i));
  CHECK(compare_16bit<T>(target, want, text) == "");

  target = from_patterns<T>(n, x_pattern, {n});
  assign_sub(target, scalar);
  for (int64_t i = 0; i < n; ++i) want[i] = T(x_value(i) - s);
  CHECK(compare_16bit<T>(target, want, text) == "");

  // A tensor added to itself.
  target = from_patterns<T>(n, x_pattern, {n});
  assign_add(target, target);
  for (int64_t i = 0; i < n; ++i) want[i] = T(x_value(i) + x_value(i));
  CHECK(compare_16bit<T>(target, want, text) == "");
}

// Floats whose bits cover every rounding case of both 16-bit types: each
// bfloat16 pattern with low words just under, at and just over the halfway
// point (ties to even), each float16 value's float with the same three
// offsets at its rounding point (13 bits lower), and pseudo-random words
// (NaNs with payloads, floats past float16's range, float32 subnormals).
std::vector<float> rounding_floats(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  const uint32_t offsets[3] = {0xfffu, 0x1000u, 0x1001u};  // for float16; << 3 for bfloat16
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t pattern = static_cast<uint16_t>(i / 4);
    const uint32_t offset = offsets[(i / 4) % 3];
    uint32_t u;
    switch (i % 4) {
      case 0:
        u = static_cast<uint32_t>(pattern) << 16 | offset << 3;
        break;
      case 1: {
        const float value = float(half::from_bits(pattern));
        std::memcpy(&u, &value, sizeof u);
        u = (u & ~0x1fffu) | offset;
        break;
      }
      default:
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        u = static_cast<uint32_t>(state >> 32);
        break;
    }
    std::memcpy(&v[static_cast<size_t>(i)], &u, sizeof u);
  }
  return v;
}

template <typename T>
void check_casts() {
  Device& device = test_device();
  const int64_t n = pattern_count(device);
  const DType dtype = dtype_of<T>;
  CAPTURE(dtype_name(dtype), device.name(), n);

  // 16-bit -> float32 and float64: exact.
  const Tensor x = from_patterns<T>(n, x_pattern, {n});
  const std::vector<float> widened = cast_tensor(x, DType::kFloat).to_vector<float>();
  const std::vector<double> widened64 = cast_tensor(x, DType::kDouble).to_vector<double>();
  std::string first_difference;
  for (int64_t i = 0; i < n && first_difference.empty(); ++i) {
    const float want = float(T::from_bits(x_pattern(i)));
    uint32_t got_bits, want_bits;
    std::memcpy(&got_bits, &widened[i], 4);
    std::memcpy(&want_bits, &want, 4);
    const bool same = std::isnan(want)
                          ? std::isnan(widened[i]) && std::isnan(widened64[i])
                          : got_bits == want_bits && widened64[i] == static_cast<double>(want) &&
                                std::signbit(widened64[i]) == std::signbit(want);
    if (!same) {
      first_difference = "element " + std::to_string(i) + " (" +
                         bits_of(T::from_bits(x_pattern(i))) + ") widened to " +
                         std::to_string(widened[i]) + " / " + std::to_string(widened64[i]);
    }
  }
  CHECK(first_difference == "");

  // float32 and float64 -> 16-bit: one rounding (float64 through float32,
  // as TensorFlow's Eigen conversion).
  const std::vector<float> floats = rounding_floats(n);
  const Tensor f = Tensor::from_vector<float>(floats, {n}).to(device);
  std::vector<T> want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) want[i] = T(floats[i]);
  const auto float_text = [&](int64_t i) {
    uint32_t u;
    std::memcpy(&u, &floats[i], 4);
    char text[48];
    std::snprintf(text, sizeof text, "float 0x%08x (%g)", u, static_cast<double>(floats[i]));
    return std::string(text);
  };
  CHECK(compare_16bit<T>(cast_tensor(f, dtype), want, float_text) == "");
  std::vector<double> doubles(floats.begin(), floats.end());
  for (size_t i = 0; i < doubles.size(); i += 5) doubles[i] += doubles[i] * 0x1p-30;
  for (int64_t i = 0; i < n; ++i) want[i] = T(static_cast<float>(doubles[i]));
  const Tensor d = Tensor::from_vector<double>(doubles, {n}).to(device);
  CHECK(compare_16bit<T>(cast_tensor(d, dtype), want, float_text) == "");

  // 16-bit -> the other 16-bit type: through float, one rounding.
  using Other = std::conditional_t<std::is_same_v<T, half>, bfloat16, half>;
  std::vector<Other> want_other(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) want_other[i] = Other(float(T::from_bits(x_pattern(i))));
  CHECK(compare_16bit<Other>(cast_tensor(x, dtype_of<Other>), want_other,
                             [&](int64_t i) { return bits_of(T::from_bits(x_pattern(i))); }) == "");
}

}  // namespace

TEST_CASE("float16 and bfloat16 arithmetic rounds once, on every bit pattern", "[math_ops][isa]") {
  check_binary_ops<half>();
  check_binary_ops<bfloat16>();
}

TEST_CASE("assign_add and assign_sub of float16 and bfloat16 round once, on every bit pattern",
          "[dense_update][isa]") {
  check_dense_updates<half>();
  check_dense_updates<bfloat16>();
}

TEST_CASE("casts to and from float16 and bfloat16 round once, on every bit pattern",
          "[cast][isa]") {
  check_casts<half>();
  check_casts<bfloat16>();
}
