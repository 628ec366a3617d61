// floordiv and mod on integers against floor division in 128-bit
// arithmetic: every dividend and divisor of the 8-bit types, every dividend
// of the 16-bit ones, the edges and random values of the 32- and 64-bit
// ones, by one divisor (a scalar) and element by element. The CPU divides
// by a scalar through a multiplication and divides element by element
// through double division (kernels/cpu/int_division.h), per instruction set
// ([isa]); on a GPU the functor's division runs. Float floordiv (a vector
// floor on the CPU) against floor(a / b) on special values.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "device_fixture.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/math_ops.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

// floor(a / b) and a - floor(a / b) * b, exactly, wrapped into T as
// TensorFlow's kernels do in practice (INT_MIN // -1 == INT_MIN).
template <typename T>
T floordiv_reference(T a, T b) {
  const __int128 x = a, y = b;
  __int128 q = x / y;
  if (x % y != 0 && ((x < 0) != (y < 0))) --q;
  return static_cast<T>(static_cast<unsigned __int128>(q));
}
template <typename T>
T mod_reference(T a, T b) {
  const __int128 x = a, y = b;
  __int128 r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return static_cast<T>(r);
}

template <typename T>
Tensor on_test_device(const std::vector<T>& values) {
  return Tensor::from_vector<T>(values).to(test_device());
}

// "" when `actual` holds `expected`, else the first differing element
// (a failure stays one line, however large the tensors).
template <typename T>
std::string first_difference(const Tensor& actual, const std::vector<T>& expected,
                             const std::vector<T>& as, const std::vector<T>& bs) {
  const std::vector<T> got = actual.template to_vector<T>();
  if (got.size() != expected.size()) return "size " + std::to_string(got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected[i]) {
      return "element " + std::to_string(i) + ": " + std::to_string(as[i]) + " by " +
             std::to_string(bs[i]) + " gave " + std::to_string(got[i]) + ", expected " +
             std::to_string(expected[i]);
    }
  }
  return "";
}

// floordiv and mod of `as` by the scalar d, and by a tensor of d's.
template <typename T>
void check_by_divisor(const std::vector<T>& as, T d) {
  CAPTURE(dtype_name(dtype_of<T>), static_cast<int64_t>(d), as.size());
  std::vector<T> q(as.size()), r(as.size());
  for (size_t i = 0; i < as.size(); ++i) {
    q[i] = floordiv_reference(as[i], d);
    r[i] = mod_reference(as[i], d);
  }
  const std::vector<T> bs(as.size(), d);
  const Tensor a = on_test_device(as);
  const Tensor scalar = Tensor::from_vector<T>({d}, TensorShape{}).to(test_device());
  CHECK(first_difference(floordiv(a, scalar), q, as, bs) == "");
  CHECK(first_difference(mod(a, scalar), r, as, bs) == "");
  const Tensor ds = on_test_device(bs);
  CHECK(first_difference(floordiv(a, ds), q, as, bs) == "");
  CHECK(first_difference(mod(a, ds), r, as, bs) == "");
}

// Dividends and divisors at the edges of T: 0, +-1, +-2, the extremes and
// their neighbours, powers of two and their neighbours, and `random` more.
template <typename T>
std::vector<T> edge_values(int random, uint64_t seed) {
  using L = std::numeric_limits<T>;
  std::set<T> v{T(0),     T(1),           T(2), T(3), T(5), T(7), T(10), L::max(), T(L::max() - 1),
                L::min(), T(L::min() + 1)};
  for (int k = 2; k < L::digits; ++k) {
    const T p = static_cast<T>(T(1) << k);
    v.insert({p, T(p - 1), T(p + 1)});
  }
  if constexpr (std::is_signed_v<T>) {
    for (T x : std::vector<T>(v.begin(), v.end())) {
      if (x != L::min()) v.insert(T(-x));
    }
  }
  std::mt19937_64 rng(seed);
  for (int i = 0; i < random; ++i) v.insert(static_cast<T>(rng()));
  return {v.begin(), v.end()};
}

// Every (a, b) with a in `as` and b != 0 in `bs`, element by element in
// one call.
template <typename T>
void check_pairs(const std::vector<T>& as, const std::vector<T>& bs) {
  std::vector<T> pa, pb, q, r;
  for (T b : bs) {
    if (b == 0) continue;
    for (T a : as) {
      pa.push_back(a);
      pb.push_back(b);
      q.push_back(floordiv_reference(a, b));
      r.push_back(mod_reference(a, b));
    }
  }
  CAPTURE(dtype_name(dtype_of<T>));
  CHECK(first_difference(floordiv(on_test_device(pa), on_test_device(pb)), q, pa, pb) == "");
  CHECK(first_difference(mod(on_test_device(pa), on_test_device(pb)), r, pa, pb) == "");
}

template <typename T>
void check_every_pair() {
  std::vector<T> all;
  for (int64_t x = std::numeric_limits<T>::min(); x <= std::numeric_limits<T>::max(); ++x) {
    all.push_back(static_cast<T>(x));
  }
  // Element by element: every (a, b) with b != 0 in one call.
  check_pairs(all, all);
  // By a scalar: each divisor.
  for (T b : all) {
    if (b != 0) check_by_divisor(all, b);
  }
}

template <typename T>
void check_every_dividend() {
  std::vector<T> all;
  for (int64_t x = std::numeric_limits<T>::min(); x <= std::numeric_limits<T>::max(); ++x) {
    all.push_back(static_cast<T>(x));
  }
  for (T d : edge_values<T>(24, 16)) {
    if (d != 0) check_by_divisor(all, d);
  }
}

template <typename T>
void check_edges() {
  const std::vector<T> as = edge_values<T>(4000, 32);
  const std::vector<T> ds = edge_values<T>(60, 64);
  for (T d : ds) {
    if (d != 0) check_by_divisor(as, d);
  }
  check_pairs(as, ds);
}

}  // namespace

TEST_CASE("integer floordiv and mod: every pair of 8-bit values", "[math_ops][isa]") {
  check_every_pair<int8_t>();
  check_every_pair<uint8_t>();
}

TEST_CASE("integer floordiv and mod: every 16-bit dividend", "[math_ops][isa]") {
  check_every_dividend<int16_t>();
  check_every_dividend<uint16_t>();
}

TEST_CASE("integer floordiv and mod: 32- and 64-bit edges and random values", "[math_ops][isa]") {
  check_edges<int32_t>();
  check_edges<uint32_t>();
  check_edges<int64_t>();
  check_edges<uint64_t>();
}

TEST_CASE("integer floordiv and mod over the pool: ids into buckets", "[math_ops][isa]") {
  // A tensor large enough to split over the pool: 64-bit hashes of both
  // signs into 1,000,003 buckets, and 32-bit values by divisors of both
  // signs.
  std::mt19937_64 rng(7);
  std::vector<int64_t> ids(1 << 20);
  for (int64_t& id : ids) id = static_cast<int64_t>(rng());
  check_by_divisor<int64_t>(ids, 1000003);
  check_by_divisor<int64_t>(ids, -64);
  std::vector<int32_t> xs(1 << 20), ys(1 << 20), q(1 << 20), r(1 << 20);
  for (size_t i = 0; i < xs.size(); ++i) {
    xs[i] = static_cast<int32_t>(rng());
    do {
      ys[i] = static_cast<int32_t>(rng()) >> (rng() % 32);
    } while (ys[i] == 0);
    q[i] = floordiv_reference(xs[i], ys[i]);
    r[i] = mod_reference(xs[i], ys[i]);
  }
  CHECK(first_difference(floordiv(on_test_device(xs), on_test_device(ys)), q, xs, ys) == "");
  CHECK(first_difference(mod(on_test_device(xs), on_test_device(ys)), r, xs, ys) == "");
}

TEST_CASE("integer floordiv and mod by zero fail on every path", "[math_ops][isa]") {
  // A scalar zero, a zero among many divisors (last, so that a split call
  // finds it in its last range), for a 32-bit and a 64-bit type.
  for (int64_t n : {int64_t{3}, int64_t{100003}}) {
    CAPTURE(n);
    std::vector<int32_t> a32(static_cast<size_t>(n), 7), b32(static_cast<size_t>(n), 3);
    std::vector<int64_t> a64(static_cast<size_t>(n), 7), b64(static_cast<size_t>(n), 3);
    b32.back() = 0;
    b64.back() = 0;
    CHECK_THROWS_AS(floordiv(on_test_device(a32), on_test_device(b32)), InvalidArgumentError);
    CHECK_THROWS_AS(mod(on_test_device(a32), on_test_device(b32)), InvalidArgumentError);
    CHECK_THROWS_AS(floordiv(on_test_device(a64), on_test_device(b64)), InvalidArgumentError);
    CHECK_THROWS_WITH(mod(on_test_device(a64), on_test_device(b64)),
                      Catch::Contains("Integer division by zero"));
    const Tensor zero32 = Tensor(int32_t{0}).to(test_device());
    const Tensor zero64 = Tensor(int64_t{0}).to(test_device());
    CHECK_THROWS_WITH(floordiv(on_test_device(a32), zero32),
                      Catch::Contains("Integer division by zero"));
    CHECK_THROWS_AS(mod(on_test_device(a64), zero64), InvalidArgumentError);
  }
  // An empty tensor divides nothing, so nothing fails (TensorFlow's kernel
  // loops over no elements).
  const Tensor empty = Tensor::from_vector<int64_t>({}).to(test_device());
  CHECK(floordiv(empty, Tensor(int64_t{0}).to(test_device())).num_elements() == 0);
}

namespace {

template <typename F>
void check_float_floordiv() {
  using L = std::numeric_limits<F>;
  std::vector<F> specials{
      F(0),           -F(0),    F(1),        F(-1),    F(0.5),          F(-0.5),
      F(2.5),         F(-2.5),  F(7),        F(-7),    L::infinity(),   -L::infinity(),
      L::quiet_NaN(), L::max(), L::lowest(), L::min(), L::denorm_min(), -L::denorm_min(),
      F(1e30),        F(-3e-30)};
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<F> wide(F(-1000), F(1000));
  for (int i = 0; i < 200; ++i) specials.push_back(wide(rng));
  std::vector<F> as, bs, q;
  for (F a : specials) {
    for (F b : specials) {
      as.push_back(a);
      bs.push_back(b);
      q.push_back(std::floor(a / b));
    }
  }
  const std::vector<F> got =
      floordiv(on_test_device(as), on_test_device(bs)).template to_vector<F>();
  REQUIRE(got.size() == q.size());
  size_t differ = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    // Bit for bit, NaNs as NaNs (IEEE leaves their payload open).
    const bool same =
        (std::isnan(got[i]) && std::isnan(q[i])) || std::memcmp(&got[i], &q[i], sizeof(F)) == 0;
    if (!same && differ++ == 0) {
      CAPTURE(as[i], bs[i], got[i], q[i]);
      CHECK(same);
    }
  }
  CHECK(differ == 0);
}

}  // namespace

TEST_CASE("float floordiv is floor(a / b) bit for bit, specials included", "[math_ops][isa]") {
  check_float_floordiv<float>();
  check_float_floordiv<double>();
}
