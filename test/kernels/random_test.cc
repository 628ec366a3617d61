// CPU random kernels: Philox and TensorFlow known answers, the portable
// log/sin/cos, the kernels against a naive sequential reference, shards,
// and distribution statistics.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/random.h"
#include "kernels/host16.h"
#include "kernels/philox.h"
#include "random_test_util.h"
#include "test_util.h"
#include "varstate/dtype.h"

using namespace varstate;
namespace rng = varstate::kernels::rng;
namespace cpu = varstate::kernels::cpu;
using namespace varstate::testing;

namespace {

template <typename T>
T make(double v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// ---- Naive reference --------------------------------------------------------
// TensorFlow's generator as a sequential object (formats.md 6.1): next()
// returns the sample at the current counter and increments it; the kernels'
// index arithmetic is not used.
class SequentialPhilox {
 public:
  SequentialPhilox(uint64_t seed, uint64_t seed2)
      : counter_{{0, 0, static_cast<uint32_t>(seed2), static_cast<uint32_t>(seed2 >> 32)}},
        key_{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}} {}

  void skip(uint64_t n) {
    for (uint64_t i = 0; i < (n >> 32); ++i) add_word(1, 1);
    add_word(0, static_cast<uint32_t>(n));
  }

  std::array<uint32_t, 4> next() {
    const rng::Philox4x32 out = rng::philox4x32_10(counter_, key_);
    add_word(0, 1);
    return {out.w[0], out.w[1], out.w[2], out.w[3]};
  }

 private:
  void add_word(int word, uint32_t value) {
    for (int i = word; i < 4 && value != 0; ++i) {
      const uint32_t old = counter_.w[i];
      counter_.w[i] = old + value;
      value = counter_.w[i] < old ? 1 : 0;
    }
  }

  rng::Philox4x32 counter_;
  rng::PhiloxKey key_;
};

// One word at a time (TensorFlow's SingleSampleAdapter).
class SingleWords {
 public:
  explicit SingleWords(SequentialPhilox gen) : gen_(gen) {}
  uint32_t next() {
    if (used_ == 4) {
      buffer_ = gen_.next();
      used_ = 0;
    }
    return buffer_[used_++];
  }

 private:
  SequentialPhilox gen_;
  std::array<uint32_t, 4> buffer_{};
  int used_ = 4;
};

constexpr int group_size(size_t type_size) { return type_size == 8 ? 2 : 4; }

// x * scale + shift in T's arithmetic, as TensorFlow's Python layer computes
// it (16-bit types: float arithmetic, rounded to T after each operation).
template <typename T>
T scale_shift(T x, T scale, T shift) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    const T product(static_cast<float>(x) * static_cast<float>(scale));
    return T(static_cast<float>(product) + static_cast<float>(shift));
  } else {
    return x * scale + shift;
  }
}

template <typename T>
T from_float(float v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return T(v);
  }
}

// The G values of one group of a fixed-cost distribution from one sample.
template <typename T>
std::vector<T> reference_group(Dist dist, const std::array<uint32_t, 4>& w, T a, T b) {
  std::vector<T> v;
  if (dist == Dist::kUniform) {
    if constexpr (std::is_same_v<T, int32_t>) {
      const uint32_t range = static_cast<uint32_t>(b) - static_cast<uint32_t>(a);
      for (int j = 0; j < 4; ++j) v.push_back(a + static_cast<int32_t>(w[j] % range));
    } else if constexpr (std::is_same_v<T, int64_t>) {
      for (int j = 0; j < 2; ++j) {
        const uint64_t bits = w[2 * j] | (uint64_t{w[2 * j + 1]} << 32);
        v.push_back(a + static_cast<int64_t>(bits % (uint64_t(b) - uint64_t(a))));
      }
    } else if constexpr (std::is_same_v<T, double>) {
      for (int j = 0; j < 2; ++j) {
        v.push_back(scale_shift(rng::uniform_double(w[2 * j], w[2 * j + 1]), b - a, a));
      }
    } else {
      const T range = from_float<T>(static_cast<float>(b) - static_cast<float>(a));
      for (int j = 0; j < 4; ++j) {
        float u = std::is_same_v<T, half>       ? rng::uniform_half(w[j])
                  : std::is_same_v<T, bfloat16> ? rng::uniform_bfloat16(w[j])
                                                : rng::uniform_float(w[j]);
        v.push_back(scale_shift(from_float<T>(u), range, a));
      }
    }
  } else if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, half> ||
                       std::is_same_v<T, bfloat16>) {
    if constexpr (std::is_same_v<T, double>) {
      double d[2];
      rng::box_muller(w[0], w[1], w[2], w[3], &d[0], &d[1]);
      for (double x : d) v.push_back(scale_shift(x, b, a));
    } else {
      float f[4];
      rng::box_muller(w[0], w[1], &f[0], &f[1]);
      rng::box_muller(w[2], w[3], &f[2], &f[3]);
      for (float x : f) v.push_back(scale_shift(from_float<T>(x), b, a));
    }
  }
  return v;
}

// Truncated normal group g: TensorFlow's loop over a fresh word stream that
// starts 256 (double: 128) samples per group into the generator.
template <typename T>
std::vector<T> reference_truncated_group(uint64_t seed, uint64_t seed2, uint64_t g, T mean,
                                         T stddev) {
  constexpr size_t kGroup = group_size(sizeof(T));
  SequentialPhilox gen(seed, seed2);
  gen.skip(g * (kGroup * 256 / 4));
  SingleWords words(gen);
  std::vector<T> v;
  while (true) {
    if constexpr (std::is_same_v<T, double>) {
      const uint32_t x0 = words.next(), x1 = words.next(), x2 = words.next(), x3 = words.next();
      double d[2];
      rng::box_muller(x0, x1, x2, x3, &d[0], &d[1]);
      for (double x : d) {
        if (std::abs(x) < 2.0) v.push_back(scale_shift(x, stddev, mean));
        if (v.size() == kGroup) return v;
      }
    } else {
      const uint32_t x0 = words.next(), x1 = words.next();
      float f[2];
      rng::box_muller(x0, x1, &f[0], &f[1]);
      for (float x : f) {
        if (std::abs(x) < 2.0f) v.push_back(scale_shift(from_float<T>(x), stddev, mean));
        if (v.size() == kGroup) return v;
      }
    }
  }
}

// Elements [first, first + n) by the reference: one generator stepping
// through the groups in order.
template <typename T>
std::vector<T> reference(Dist dist, int64_t n, int64_t first, uint64_t seed, uint64_t seed2, T a,
                         T b) {
  constexpr int kGroup = group_size(sizeof(T));
  std::vector<T> all;
  const int64_t g0 = first / kGroup;
  SequentialPhilox gen(seed, seed2);
  gen.skip(g0);
  for (int64_t g = g0; g * kGroup < first + n; ++g) {
    std::vector<T> v = dist == Dist::kTruncated ? reference_truncated_group<T>(seed, seed2, g, a, b)
                                                : reference_group<T>(dist, gen.next(), a, b);
    all.insert(all.end(), v.begin(), v.end());
  }
  return std::vector<T>(all.begin() + (first - g0 * kGroup),
                        all.begin() + (first - g0 * kGroup) + n);
}

// Parameters (minval, maxval) or (mean, stddev) per distribution.
template <typename T>
std::pair<T, T> params(Dist dist) {
  if constexpr (std::is_integral_v<T>) {
    return {T(-7), T(1000)};
  } else {
    return dist == Dist::kUniform ? std::pair{make<T>(-1.5), make<T>(2.25)}
                                  : std::pair{make<T>(0.5), make<T>(3.0)};
  }
}

double ulps(long double got, long double exact, int mantissa_bits) {
  int e;
  std::frexp(static_cast<double>(exact), &e);
  return static_cast<double>(std::fabs(got - exact) / std::ldexp(1.0L, e - mantissa_bits));
}

}  // namespace

TEST_CASE("Philox4x32-10 matches the Random123 known answers", "[random]") {
  const rng::Philox4x32 zero = rng::philox4x32_10({{0, 0, 0, 0}}, {{0, 0}});
  CHECK(zero.w[0] == 0x6627e8d5u);
  CHECK(zero.w[1] == 0xe169c58du);
  CHECK(zero.w[2] == 0xbc57ac4cu);
  CHECK(zero.w[3] == 0x9b00dbd8u);
  const uint32_t f = 0xffffffffu;
  const rng::Philox4x32 ones = rng::philox4x32_10({{f, f, f, f}}, {{f, f}});
  CHECK(ones.w[0] == 0x408f276du);
  CHECK(ones.w[1] == 0x41c83b0eu);
  CHECK(ones.w[2] == 0xa20bc7c6u);
  CHECK(ones.w[3] == 0x6d5451fdu);
  const rng::Philox4x32 pi = rng::philox4x32_10(
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, {{0xa4093822u, 0x299f31d0u}});
  CHECK(pi.w[0] == 0xd16cfe09u);
  CHECK(pi.w[1] == 0x94fdccebu);
  CHECK(pi.w[2] == 0x5001e420u);
  CHECK(pi.w[3] == 0x24126ea1u);
}

TEST_CASE("Philox counters add with 128-bit carries", "[random]") {
  const uint32_t f = 0xffffffffu;
  rng::Philox4x32 c = rng::philox_add({{f, f, f, 0}}, 1);
  CHECK((c.w[0] == 0 && c.w[1] == 0 && c.w[2] == 0 && c.w[3] == 1));
  c = rng::philox_add({{1, 2, 3, 4}}, uint64_t{5} << 32, 7);
  CHECK((c.w[0] == 1 && c.w[1] == 7 && c.w[2] == 10 && c.w[3] == 4));
}

TEST_CASE("Seeding follows TensorFlow's PhiloxRandom(seed, seed2)", "[random]") {
  // Graph seed 5, op seed 1 and no graph seed, op seed 1 (formats.md 6.3).
  rng::Philox4x32 x = rng::PhiloxStream::from_seeds(5, 1).sample(0);
  CHECK(x.w[0] == 0x63319a34u);
  CHECK(x.w[1] == 0x53dfd057u);
  CHECK(x.w[2] == 0x81463c6du);
  CHECK(x.w[3] == 0xb5fcd5d5u);
  x = rng::PhiloxStream::from_seeds(87654321, 1).sample(0);
  CHECK(x.w[0] == 0xab1e98c7u);
  CHECK(x.w[1] == 0xcdf5cfa7u);
  CHECK(x.w[2] == 0xf1867731u);
  CHECK(x.w[3] == 0x4c3f748eu);
}

TEST_CASE("Kernels reproduce TensorFlow's values", "[random]") {
  SECTION("float32 uniform, seeds (87654321, 1): exact") {
    std::vector<float> out(8);
    cpu::random_uniform<float>(out.data(), 8, 0, 87654321, 1, 0.0f, 1.0f);
    const float expected[] = {0.239037395f, 0.920399547f,  0.0505124331f, 0.495744467f,
                              0.835522294f, 0.0264704227f, 0.0881130695f, 0.45666039f};
    for (int i = 0; i < 8; ++i) CHECK(out[i] == expected[i]);
  }
  SECTION("float32 and float64 uniform, seeds (1, 2)") {
    std::vector<float> f(4);
    cpu::random_uniform<float>(f.data(), 4, 0, 1, 2, 0.0f, 1.0f);
    CHECK(f[0] == 0.406396747f);
    CHECK(f[1] == 0.857599616f);
    CHECK(f[2] == 0.0553958416f);
    CHECK(f[3] == 0.0858722925f);
    std::vector<double> d(2);
    cpu::random_uniform<double>(d.data(), 2, 0, 1, 2, 0.0, 1.0);
    CHECK(std::abs(d[0] - 0.2511744980841868) < 1e-16);
    CHECK(std::abs(d[1] - 0.44316677020093853) < 1e-16);
  }
  SECTION("float32 normal: TensorFlow's documented [[-1.3768897, ...]] for seeds (5, 1)") {
    std::vector<float> out(4);
    cpu::random_normal<float>(out.data(), 4, 0, 5, 1, 0.0f, 1.0f);
    const float expected[] = {-1.3768897f, -0.012583158f, -0.169515f, 1.0824056f};
    for (int i = 0; i < 4; ++i) CHECK(out[i] == Approx(expected[i]).epsilon(1e-6));
  }
  SECTION("float32 normal and truncated normal, seeds (87654321, 1)") {
    std::vector<float> out(8);
    cpu::random_normal<float>(out.data(), 8, 0, 87654321, 1, 0.0f, 1.0f);
    const float normal[] = {-0.8113182f, 1.484599f,  0.06532937f, -2.442704f,
                            0.0992484f,  0.5912243f, 0.592823f,   -2.12293f};
    for (int i = 0; i < 8; ++i) CHECK(out[i] == Approx(normal[i]).epsilon(1e-6));
    cpu::truncated_normal<float>(out.data(), 8, 0, 87654321, 1, 0.0f, 1.0f);
    const float truncated[] = {-0.8113182f, 1.484599f, 0.06532937f, 0.0992484f,
                               0.6396971f,  1.610871f, 0.1635356f,  -1.515706f};
    for (int i = 0; i < 8; ++i) CHECK(out[i] == Approx(truncated[i]).epsilon(1e-6));
  }
  SECTION("int32 uniform [0, 3), seeds (5, 10): 2, then 0 after one 256-sample advance") {
    int32_t v = -1;
    cpu::random_uniform<int32_t>(&v, 1, 0, 5, 10, 0, 3);
    CHECK(v == 2);
    // TensorFlow's second run starts 1 * 256 samples later: element 256 * 4.
    cpu::random_uniform<int32_t>(&v, 1, 256 * 4, 5, 10, 0, 3);
    CHECK(v == 0);
  }
  SECTION("glorot_uniform [2, 3], seeds (87654321, 1)") {
    const float limit = std::sqrt(1.2f);
    std::vector<float> out(6);
    cpu::random_uniform<float>(out.data(), 6, 0, 87654321, 1, -limit, limit);
    const float expected[] = {-0.5717404f, 0.9210494f, -0.9847779f,
                              -0.0093234f, 0.7350925f, -1.0374514f};
    for (int i = 0; i < 6; ++i) CHECK(out[i] == Approx(expected[i]).margin(1e-6));
  }
}

TEST_CASE("Portable log and sincos are accurate on the Box-Muller inputs", "[random]") {
  // Every float the transform can see: u = k * 2^-23 (clamped to 1e-7) and
  // v = float(2*pi*u), against double libm; doubles against long double libm.
  // Run with -s to see the measured maxima.
  double log_f = 0, sin_f = 0, cos_f = 0;
  for (uint32_t k = 0; k < (1u << 23); ++k) {
    const float u = std::max(rng::uniform_float(k), 1.0e-7f);
    log_f = std::max(log_f, ulps(rng::portable_log(u), std::log(static_cast<double>(u)), 24));
    const float v = static_cast<float>(0x1.921fb54442d18p+2 * rng::uniform_float(k));
    float s, c;
    rng::portable_sincos(v, &s, &c);
    if (k == 0) continue;  // sin(0) == 0 exactly; ulps of 0 are undefined
    sin_f = std::max(sin_f, ulps(s, std::sin(static_cast<double>(v)), 24));
    cos_f = std::max(cos_f, ulps(c, std::cos(static_cast<double>(v)), 24));
  }
  double log_d = 0, sin_d = 0, cos_d = 0;
  std::mt19937_64 gen(testing::kSeed);
  for (int i = 0; i < (1 << 19); ++i) {
    const uint64_t bits = gen();
    double u = std::max(rng::uniform_double(bits >> 32, static_cast<uint32_t>(bits)), 1.0e-7);
    if (i % 2 == 0) u = std::max(std::ldexp(u, -(i % 48) / 2), 1.0e-7);  // all binades
    log_d = std::max(log_d, ulps(rng::portable_log(u), std::log(static_cast<long double>(u)), 53));
    const double v = 0x1.921fb54442d18p+2 * u;
    double s, c;
    rng::portable_sincos(v, &s, &c);
    sin_d = std::max(sin_d, ulps(s, std::sin(static_cast<long double>(v)), 53));
    cos_d = std::max(cos_d, ulps(c, std::cos(static_cast<long double>(v)), 53));
  }
  CAPTURE(log_f, sin_f, cos_f, log_d, sin_d, cos_d);
  CHECK(log_f < 1.0);
  CHECK(sin_f < 1.0);
  CHECK(cos_f < 1.0);
  CHECK(log_d < 1.2);
  CHECK(sin_d < 1.0);
  CHECK(cos_d < 1.0);
}

TEST_CASE("16-bit rounding matches varstate/dtype.h", "[random]") {
  std::mt19937 gen(testing::kSeed);
  std::vector<float> inputs = {
      0.0f,           -0.0f,          65504.0f,       65519.0f,
      65520.0f,       1e9f,           5.9604645e-08f, 2.9802322e-08f,
      2.9802326e-08f, 6.1035156e-05f, 6.1e-05f,       std::numeric_limits<float>::infinity()};
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite half and its midpoints
    const float v = static_cast<float>(half::from_bits(static_cast<uint16_t>(h)));
    inputs.push_back(v);
    inputs.push_back(std::nextafter(v, 1e9f));
    inputs.push_back(-std::nextafter(v, 0.0f));
  }
  for (int i = 0; i < 200000; ++i) {  // NaNs of every payload among them
    uint32_t bits = gen();
    float v;
    std::memcpy(&v, &bits, sizeof v);
    inputs.push_back(v);
  }
  for (float v : inputs) {
    CAPTURE(v);
    REQUIRE(rng::half_bits(v) == half(v).bits);
    REQUIRE(rng::bfloat16_bits(v) == bfloat16(v).bits);
    const float h = rng::half_value(rng::half_bits(v));
    const float want = static_cast<float>(half(v));
    REQUIRE(std::memcmp(&h, &want, sizeof h) == 0);
  }
  // The 16-bit training ops' rounding of a float to a float16 value in
  // float arithmetic (host16.h), against the two conversions of dtype.h:
  // the inputs above, every midpoint between two float16 values and the
  // floats either side of it, and a sweep of every 4,099th bit pattern.
  // (Every one of the 2^32 floats was checked once, outside the suite.)
  std::vector<float> midpoints;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = static_cast<float>(half::from_bits(static_cast<uint16_t>(h)));
    const float hi = h == 0x7bff
                         ? 65536.0f  // the next value, past the largest float16
                         : static_cast<float>(half::from_bits(static_cast<uint16_t>(h + 1)));
    const float mid = lo + (hi - lo) / 2;  // exact: the two are 11 significant bits
    for (const float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      midpoints.push_back(m);
      midpoints.push_back(-m);
    }
  }
  for (uint64_t b = 0; b <= 0xffffffffu; b += 4099) {
    const auto bits = static_cast<uint32_t>(b);
    float v;
    std::memcpy(&v, &bits, sizeof v);
    midpoints.push_back(v);
  }
  for (const std::vector<float>* set : {&inputs, &midpoints}) {
    for (float v : *set) {
      CAPTURE(v);
      const float got = varstate::kernels::host16_round_to_half(v);
      const float want = static_cast<float>(half(v));
      if (std::isnan(want)) {  // a NaN's payload may differ, not its sign
        REQUIRE(std::isnan(got));
        REQUIRE(std::signbit(got) == std::signbit(want));
      } else {
        REQUIRE(std::memcmp(&got, &want, sizeof got) == 0);
      }
    }
  }
  // Widening, every 16-bit pattern (the kernels' inline loads,
  // training_functors.h).
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    CAPTURE(b);
    const float h = rng::half_value(static_cast<uint16_t>(b));
    const float want_h = static_cast<float>(half::from_bits(static_cast<uint16_t>(b)));
    REQUIRE(std::memcmp(&h, &want_h, sizeof h) == 0);
    const float f = rng::bfloat16_value(static_cast<uint16_t>(b));
    const float want_f = static_cast<float>(bfloat16::from_bits(static_cast<uint16_t>(b)));
    REQUIRE(std::memcmp(&f, &want_f, sizeof f) == 0);
  }
}

TEMPLATE_TEST_CASE("CPU kernels match the sequential reference bit for bit", "[random][threads]",
                   half, bfloat16, float, double, int32_t, int64_t) {
  using T = TestType;
  const uint64_t seed = testing::kSeed, seed2 = 77;
  for (Dist dist : dists<T>()) {
    const auto [a, b] = params<T>(dist);
    for (int64_t n : {1, 2, 3, 4, 5, 17, 1000, 70001}) {
      for (int64_t first : {0, 1, 2, 3, 7, 1001}) {
        CAPTURE(static_cast<int>(dist), n, first, seed, seed2);
        const auto got = run_cpu<T>(dist, n, first, seed, seed2, a, b);
        const auto want = reference<T>(dist, n, first, seed, seed2, a, b);
        CAPTURE(first_difference(got, want));
        REQUIRE(same_bits(got, want));
      }
    }
  }
}

TEMPLATE_TEST_CASE("A shard generates its slice of the full tensor", "[random][threads]", half,
                   bfloat16, float, double, int32_t, int64_t) {
  using T = TestType;
  const int64_t n = 300007;  // large enough to run on the thread pool
  for (Dist dist : dists<T>()) {
    const auto [a, b] = params<T>(dist);
    const auto full = run_cpu<T>(dist, n, 0, 3, 4, a, b);
    for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{4096}, n / 2, n - 1}) {
      CAPTURE(static_cast<int>(dist), k);
      auto head = run_cpu<T>(dist, k, 0, 3, 4, a, b);
      const auto tail = run_cpu<T>(dist, n - k, k, 3, 4, a, b);
      head.insert(head.end(), tail.begin(), tail.end());
      REQUIRE(same_bits(head, full));
    }
    // Many small calls, as many threads would make them.
    std::vector<T> pieces;
    for (int64_t at = 0; at < n; at += 997) {
      const auto piece = run_cpu<T>(dist, std::min<int64_t>(997, n - at), at, 3, 4, a, b);
      pieces.insert(pieces.end(), piece.begin(), piece.end());
    }
    REQUIRE(same_bits(pieces, full));
  }
}

TEST_CASE("Different seeds give different values", "[random]") {
  const auto a = run_cpu<float>(Dist::kNormal, 64, 0, 1, 1, 0.0f, 1.0f);
  const auto b = run_cpu<float>(Dist::kNormal, 64, 0, 1, 2, 0.0f, 1.0f);
  const auto c = run_cpu<float>(Dist::kNormal, 64, 0, 2, 1, 0.0f, 1.0f);
  CHECK_FALSE(same_bits(a, b));
  CHECK_FALSE(same_bits(a, c));
}

TEMPLATE_TEST_CASE("Distribution statistics", "[random]", half, bfloat16, float, double) {
  using T = TestType;
  const int64_t n = 1 << 20;
  const uint64_t seed = testing::kSeed, seed2 = 5;
  auto moments = [](const std::vector<T>& v) {
    double sum = 0, sq = 0;
    for (const T& x : v) sum += testing::to_double(x);
    const double mean = sum / v.size();
    for (const T& x : v) sq += (testing::to_double(x) - mean) * (testing::to_double(x) - mean);
    return std::pair{mean, std::sqrt(sq / v.size())};
  };
  // 16-bit types: the values themselves are coarse, allow their rounding.
  const double slack = std::is_same_v<T, bfloat16> ? 0.02 : std::is_same_v<T, half> ? 0.005 : 0;
  CAPTURE(seed, seed2);
  SECTION("uniform in [-1, 3)") {
    const auto v = run_cpu<T>(Dist::kUniform, n, 0, seed, seed2, make<T>(-1), make<T>(3));
    for (const T& x : v) {
      REQUIRE(testing::to_double(x) >= -1.0);
      REQUIRE(testing::to_double(x) < 3.0);
    }
    const auto [mean, stddev] = moments(v);
    CHECK(mean == Approx(1.0).margin(0.01 + slack));
    CHECK(stddev == Approx(4.0 / std::sqrt(12.0)).margin(0.01 + slack));
  }
  SECTION("normal, mean 3, stddev 2") {
    const auto v = run_cpu<T>(Dist::kNormal, n, 0, seed, seed2, make<T>(3), make<T>(2));
    const auto [mean, stddev] = moments(v);
    CHECK(mean == Approx(3.0).margin(0.01 + slack));
    CHECK(stddev == Approx(2.0).margin(0.01 + slack));
  }
  SECTION("truncated normal, mean -1, stddev 0.5") {
    const auto v = run_cpu<T>(Dist::kTruncated, n, 0, seed, seed2, make<T>(-1), make<T>(0.5));
    for (const T& x : v) {
      REQUIRE(testing::to_double(x) >= -2.0);
      REQUIRE(testing::to_double(x) <= 0.0);
    }
    const auto [mean, stddev] = moments(v);
    CHECK(mean == Approx(-1.0).margin(0.005 + slack));
    // Standard deviation of a unit normal truncated to +-2: 0.87962566.
    CHECK(stddev == Approx(0.5 * 0.87962566).margin(0.005 + slack));
  }
}

TEMPLATE_TEST_CASE("Uniform integers cover [minval, maxval) evenly", "[random]", int32_t, int64_t) {
  using T = TestType;
  const int64_t n = 1 << 20;
  std::vector<T> v(n);
  cpu::random_uniform<T>(v.data(), n, 0, testing::kSeed, 9, T(-5), T(5));
  std::array<int64_t, 10> counts{};
  for (T x : v) {
    REQUIRE(x >= -5);
    REQUIRE(x < 5);
    ++counts[x + 5];
  }
  for (int64_t c : counts) CHECK(c == Approx(n / 10.0).epsilon(0.02));
  // Full-width ranges wrap correctly.
  const T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  cpu::random_uniform<T>(v.data(), 1000, 0, testing::kSeed, 9, lo, hi);
  bool negative = false, positive = false;
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(v[i] < hi);
    negative |= v[i] < 0;
    positive |= v[i] > 0;
  }
  CHECK((negative && positive));
}
