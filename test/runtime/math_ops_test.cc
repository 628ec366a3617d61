// Element-wise ops, operators and matmul on the CPU, each against a naive
// reference loop with its own broadcasting, plus the reference docs'
// examples, TensorFlow's dtype rules and every error path.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>

#include "device_fixture.h"
#include "tensor_util.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/math_ops.h"
#include "varstate/random_ops.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

// Shape pairs: same shape, scalars, rank mismatch, two-sided broadcasts,
// and sizes large enough for the thread pool.
const std::vector<std::pair<TensorShape, TensorShape>>& shape_pairs() {
  static const std::vector<std::pair<TensorShape, TensorShape>> pairs = {
      {{3, 1}, {1, 4}},
      {{}, {5}},
      {{5}, {}},
      {{}, {}},
      {{2, 3, 4}, {4}},
      {{2, 1, 4}, {3, 1}},
      {{37}, {37}},
      {{4, 1, 3, 1, 2}, {1, 5, 1, 6, 1}},
      {{0, 3}, {1, 3}},
      {{100003}, {100003}},
      {{513, 1}, {1, 301}},
      {{1, 1, 7}, {7}},
      // A column against rows (per-row scaling, as the demo's gradients):
      // large enough to split over threads mid-row.
      {{4099, 1}, {4099, 17}},
      {{4099, 17}, {4099, 1}},
      // Row widths the column broadcast runs as constants (8, 16, 32, 64).
      {{1031, 1}, {1031, 16}},
      {{1031, 64}, {1031, 1}},
      {{9, 8}, {9, 1}},
      {{9, 1}, {9, 32}},
  };
  return pairs;
}

std::vector<int64_t> broadcast_dims(const TensorShape& a, const TensorShape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(rank);
  for (int d = 0; d < rank; ++d) {
    int ia = d - (rank - a.rank()), ib = d - (rank - b.rank());
    int64_t da = ia >= 0 ? a.dim(ia) : 1, db = ib >= 0 ? b.dim(ib) : 1;
    out[d] = da == 1 ? db : da;
  }
  return out;
}

// Offset into a tensor of `shape` for output index tuple `idx` (rank of
// the output), broadcasting dims of size 1.
int64_t broadcast_offset(const TensorShape& shape, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  const int shift = static_cast<int>(idx.size()) - shape.rank();
  for (int d = 0; d < shape.rank(); ++d) {
    off = off * shape.dim(d) + (shape.dim(d) == 1 ? 0 : idx[d + shift]);
  }
  return off;
}

// The naive reference: out[idx] = f(x[bx(idx)], y[by(idx)]).
template <typename T, typename Out, typename F>
Tensor reference(const Tensor& x, const Tensor& y, F f) {
  std::vector<int64_t> dims = broadcast_dims(x.shape(), y.shape());
  const int64_t n = TensorShape(dims).num_elements();
  std::vector<T> xv = x.to_vector<T>(), yv = y.to_vector<T>();
  std::vector<Out> out(n);
  std::vector<int64_t> idx(dims.size());
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i;
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      idx[d] = rem % dims[d];
      rem /= dims[d];
    }
    out[i] = f(xv[broadcast_offset(x.shape(), idx)], yv[broadcast_offset(y.shape(), idx)]);
  }
  return Tensor::from_vector<Out>(out, TensorShape(dims));
}

// Seeded random operands; bool tensors from random 0/1 integers.
Tensor random_operand(DType dtype, const TensorShape& shape, uint64_t seed, int lo, int hi) {
  if (dtype == DType::kBool)
    return random_tensor(DType::kInt32, shape, seed, 0, 1).cast(DType::kBool);
  return random_tensor(dtype, shape, seed, lo, hi);
}

template <typename T, typename Out = T, typename F>
void check_op(const char* what, const std::function<Tensor(const Tensor&, const Tensor&)>& op, F f,
              int lo = -8, int hi = 8, bool nonzero_y = false) {
  int seed = 0;
  for (const auto& [xs, ys] : shape_pairs()) {
    CAPTURE(what, dtype_name(dtype_of<T>), xs.to_string(), ys.to_string(), kSeed);
    Tensor x = random_operand(dtype_of<T>, xs, kSeed + seed++, lo, hi);
    Tensor y = random_operand(dtype_of<T>, ys, kSeed + 100 + seed++, lo, hi);
    if (nonzero_y) {  // divisors of both signs, never zero
      std::vector<T> v = y.to_vector<T>();
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] == T{}) v[i] = from_int<T>(1);
      }
      y = Tensor::from_vector<T>(v, ys);
    }
    Tensor actual = op(x, y);
    Tensor expected = reference<T, Out>(x, y, f);
    CHECK(compare_tensors(actual, expected) == "");
  }
}

// Widening helpers: 16-bit floats compute in float.
template <typename T>
auto wide(T v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
    return static_cast<float>(v);
  else
    return v;
}

template <typename T>
void check_arithmetic() {
  check_op<T>("add", add, [](T a, T b) { return T(wide(a) + wide(b)); });
  check_op<T>("subtract", subtract, [](T a, T b) { return T(wide(a) - wide(b)); });
  check_op<T>("multiply", multiply, [](T a, T b) { return T(wide(a) * wide(b)); });
}

template <typename T>
void check_ordering() {
  check_op<T, bool>("less", less, [](T a, T b) { return wide(a) < wide(b); });
  check_op<T, bool>("less_equal", less_equal, [](T a, T b) { return wide(a) <= wide(b); });
  check_op<T, bool>("greater", greater, [](T a, T b) { return wide(a) > wide(b); });
  check_op<T, bool>("greater_equal", greater_equal, [](T a, T b) { return wide(a) >= wide(b); });
  check_op<T, bool>("equal", equal, [](T a, T b) { return wide(a) == wide(b); });
  check_op<T, bool>("not_equal", not_equal, [](T a, T b) { return wide(a) != wide(b); });
  check_op<T>("maximum", maximum, [](T a, T b) { return wide(a) >= wide(b) ? a : b; });
  check_op<T>("minimum", minimum, [](T a, T b) { return wide(a) <= wide(b) ? a : b; });
}

// Python's floor division and modulo, written the obvious way.
template <typename T>
T py_floordiv(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(std::floor(static_cast<double>(a) / static_cast<double>(b)));
  } else {
    return std::floor(a / b);
  }
}
template <typename T>
T py_mod(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(a - py_floordiv(a, b) * b);
  } else {
    T r = std::fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }
}

}  // namespace

TEST_CASE("add, subtract, multiply match the reference with broadcasting", "[math_ops]") {
  check_arithmetic<float>();
  check_arithmetic<double>();
  check_arithmetic<int32_t>();
  check_arithmetic<int64_t>();
  check_arithmetic<int8_t>();
  check_arithmetic<uint8_t>();
  check_arithmetic<half>();
  check_arithmetic<bfloat16>();
  check_op<complex64>("add", add, [](complex64 a, complex64 b) { return a + b; });
  check_op<complex128>("multiply", multiply, [](complex128 a, complex128 b) { return a * b; });
}

TEST_CASE("comparisons, maximum and minimum match the reference", "[math_ops]") {
  check_ordering<float>();
  check_ordering<int32_t>();
  check_ordering<int64_t>();
  check_ordering<uint16_t>();
  check_ordering<half>();
  check_op<complex64, bool>("equal", equal, [](complex64 a, complex64 b) { return a == b; });
}

TEST_CASE("floordiv and mod floor toward negative infinity", "[math_ops]") {
  check_op<int32_t>("floordiv", floordiv, py_floordiv<int32_t>, -9, 9, true);
  check_op<int64_t>("floordiv", floordiv, py_floordiv<int64_t>, -9, 9, true);
  check_op<int32_t>("mod", mod, py_mod<int32_t>, -9, 9, true);
  check_op<int64_t>("mod", mod, py_mod<int64_t>, -9, 9, true);
  check_op<float>("floordiv", floordiv, py_floordiv<float>, -9, 9, true);
  check_op<double>("mod", mod, py_mod<double>, -9, 9, true);

  // Sign rules, spelled out: the remainder has the sign of the divisor.
  Tensor a({7, -7, 7, -7}), b({3, 3, -3, -3});
  CHECK(floordiv(a, b).to_vector<int32_t>() == std::vector<int32_t>{2, -3, -3, 2});
  CHECK(mod(a, b).to_vector<int32_t>() == std::vector<int32_t>{1, 2, -2, -1});
  CHECK((a % b).to_vector<int32_t>() == std::vector<int32_t>{1, 2, -2, -1});
  CHECK(add(multiply(floordiv(a, b), b), mod(a, b)).to_vector<int32_t>() ==
        std::vector<int32_t>{7, -7, 7, -7});
  Tensor af({7.5f, -7.5f}), bf({2.f, 2.f});
  CHECK(floordiv(af, bf).to_vector<float>() == std::vector<float>{3.f, -4.f});
  CHECK(mod(af, -2.f).to_vector<float>() == std::vector<float>{-0.5f, -1.5f});
  // The most negative integer divided by -1 wraps instead of trapping.
  Tensor lowest = Tensor({std::numeric_limits<int32_t>::min()});
  CHECK(floordiv(lowest, -1).to_vector<int32_t>()[0] == std::numeric_limits<int32_t>::min());
  CHECK(mod(lowest, -1).to_vector<int32_t>()[0] == 0);
}

TEST_CASE("integer division or modulo by zero is an InvalidArgumentError", "[math_ops]") {
  Tensor a({1, 2, 3}), z({1, 0, 1});
  CHECK_THROWS_AS(floordiv(a, z), InvalidArgumentError);
  CHECK_THROWS_WITH(mod(a, 0), Catch::Contains("Integer division by zero"));
  Tensor big = Tensor::filled(DType::kInt64, {100000}, Tensor(5), DeviceManager::instance().cpu());
  CHECK_THROWS_AS(floordiv(big, int64_t{0}), InvalidArgumentError);
  // Floats follow IEEE instead.
  Tensor q = Tensor({1.f}) / Tensor({0.f});
  CHECK(std::isinf(q.to_vector<float>()[0]));
}

TEST_CASE("divide is true division with TensorFlow's casts", "[math_ops]") {
  Tensor i32 = Tensor({7, -7}) / Tensor({2, 2});
  CHECK(i32.dtype() == DType::kDouble);
  CHECK(i32.to_vector<double>() == std::vector<double>{3.5, -3.5});
  Tensor i16 = divide(Tensor({int16_t{1}}).strongly_typed(), Tensor({int16_t{4}}).strongly_typed());
  CHECK(i16.dtype() == DType::kFloat);
  CHECK(i16.to_vector<float>()[0] == 0.25f);
  Tensor i64 = divide(Tensor({int64_t{1}}), int64_t{8});
  CHECK(i64.dtype() == DType::kDouble);
  Tensor f16 = Tensor({half(3.f)}) / Tensor({half(2.f)});
  CHECK(f16.dtype() == DType::kHalf);
  CHECK(static_cast<float>(f16.to_vector<half>()[0]) == 1.5f);
  check_op<float>(
      "divide", divide, [](float a, float b) { return a / b; }, -9, 9, true);
  check_op<double>(
      "divide", divide, [](double a, double b) { return a / b; }, -9, 9, true);
  check_op<complex64>(
      "divide", divide, [](complex64 a, complex64 b) { return a / b; }, 1, 9);
}

TEST_CASE("pow matches the reference doc's example and the reference loop", "[math_ops]") {
  // tensor 'x' is [[2, 2], [3, 3]]; tensor 'y' is [[8, 16], [2, 3]]
  Tensor x({{2, 2}, {3, 3}}), y({{8, 16}, {2, 3}});
  Tensor p = pow(x, y);
  CHECK(p.dtype() == DType::kInt32);
  CHECK(p.to_vector<int32_t>() == std::vector<int32_t>{256, 65536, 9, 27});
  Tensor pf = pow(Tensor({{2.f, 2.f}, {3.f, 3.f}}), Tensor({{8.f, 16.f}, {2.f, 3.f}}));
  CHECK(pf.to_vector<float>() == std::vector<float>{256.f, 65536.f, 9.f, 27.f});
  auto pow_op = [](const Tensor& a, const Tensor& b) { return varstate::pow(a, b); };
  check_op<int64_t>(
      "pow", pow_op,
      [](int64_t a, int64_t b) {
        int64_t r = 1;
        for (int64_t i = 0; i < b; ++i) r *= a;
        return r;
      },
      0, 6);
  check_op<double>(
      "pow", pow_op, [](double a, double b) { return std::pow(a, b); }, 1, 4);
  CHECK_THROWS_WITH(pow(Tensor({2, 3}), Tensor({1, -1})),
                    Catch::Contains("negative integer powers"));
  CHECK(std::abs(pow(Tensor({complex64(0.f, 1.f)}), Tensor({complex64(2.f, 0.f)}))
                     .to_vector<complex64>()[0] -
                 complex64(-1.f, 0.f)) < 1e-6f);
}

TEST_CASE("logical ops work on bool tensors only", "[math_ops]") {
  Tensor a({true, true, false, false}), b({true, false, true, false});
  CHECK((a & b).to_vector<bool>() == std::vector<bool>{true, false, false, false});
  CHECK((a | b).to_vector<bool>() == std::vector<bool>{true, true, true, false});
  CHECK((a ^ b).to_vector<bool>() == std::vector<bool>{false, true, true, false});
  CHECK((~a).to_vector<bool>() == std::vector<bool>{false, false, true, true});
  CHECK(logical_not(b).to_vector<bool>() == std::vector<bool>{false, true, false, true});
  // x ^ y == (x | y) & ~(x & y), as the reference defines it.
  CHECK(compare_tensors(a ^ b, (a | b) & ~(a & b)) == "");
  check_op<bool, bool>(
      "logical_and", logical_and, [](bool p, bool q) { return p && q; }, 0, 1);
  check_op<bool, bool>(
      "logical_xor", logical_xor, [](bool p, bool q) { return p != q; }, 0, 1);
  check_op<bool, bool>(
      "equal", equal, [](bool p, bool q) { return p == q; }, 0, 1);
  CHECK_THROWS_AS(Tensor({1, 2}) & Tensor({1, 0}), TypeError);
  CHECK_THROWS_AS(logical_or(Tensor({1.f}), Tensor({0.f})), TypeError);
  CHECK_THROWS_AS(logical_not(Tensor({1})), TypeError);
  CHECK_THROWS_AS(a < b, TypeError);  // bool has no ordering in TensorFlow
}

TEST_CASE("unary ops: negative, abs, invert", "[math_ops]") {
  Tensor x({-3, 0, 5});
  CHECK((-x).to_vector<int32_t>() == std::vector<int32_t>{3, 0, -5});
  CHECK(abs(x).to_vector<int32_t>() == std::vector<int32_t>{3, 0, 5});
  CHECK((~x).to_vector<int32_t>() == std::vector<int32_t>{2, -1, -6});
  CHECK(abs(Tensor({-1.5, 2.0})).to_vector<double>() == std::vector<double>{1.5, 2.0});
  Tensor c = abs(Tensor({complex64(3.f, 4.f), complex64(0.f, -2.f)}));
  CHECK(c.dtype() == DType::kFloat);
  CHECK(c.to_vector<float>() == std::vector<float>{5.f, 2.f});
  CHECK(abs(Tensor({complex128(-6.0, 8.0)})).dtype() == DType::kDouble);
  CHECK((-Tensor({half(2.f)})).to_vector<half>()[0] == half(-2.f));
  Tensor big = random_tensor(DType::kFloat, {200001}, kSeed);
  std::vector<float> in = big.to_vector<float>(), out = negative(big).to_vector<float>();
  bool all = true;
  for (size_t i = 0; i < in.size(); ++i) all = all && out[i] == -in[i];
  CHECK(all);
  CHECK_THROWS_AS(-Tensor({true}), TypeError);
  CHECK_THROWS_AS(abs(Tensor({uint8_t{1}})), TypeError);
  CHECK_THROWS_AS(~Tensor({1.f}), TypeError);
}

TEST_CASE("dtype rules: mismatches raise TypeError, literals convert", "[math_ops]") {
  Tensor f = Tensor({1.f, 2.f}).strongly_typed();
  Tensor i = Tensor({1, 2}).strongly_typed();
  CHECK_THROWS_AS(f + i, TypeError);
  CHECK_THROWS_WITH(f + i, Catch::Contains("float32") && Catch::Contains("int32"));
  CHECK_THROWS_AS(i < f, TypeError);
  CHECK_THROWS_AS(matmul(f.reshaped({1, 2}), i.reshaped({2, 1})), TypeError);
  CHECK_THROWS_AS(i + 1.5, TypeError);  // a float literal does not become an int
  Tensor r = f + 1;                     // an int literal becomes a float
  CHECK(r.dtype() == DType::kFloat);
  CHECK(r.to_vector<float>() == std::vector<float>{2.f, 3.f});
  CHECK((2.5 * f).to_vector<float>() == std::vector<float>{2.5f, 5.f});
  CHECK((1 - f).to_vector<float>() == std::vector<float>{0.f, -1.f});
  CHECK((f > 1).to_vector<bool>() == std::vector<bool>{false, true});
  CHECK(!r.weakly_typed());
  CHECK_THROWS_AS(floordiv(Tensor({complex64(1.f, 0.f)}), Tensor({complex64(1.f, 0.f)})),
                  TypeError);
  CHECK_THROWS_AS(Tensor({true}) + Tensor({false}), TypeError);
  CHECK_THROWS_AS(Tensor("a") + Tensor("b"), TypeError);
  CHECK_THROWS_AS(add(Tensor(), f), InvalidArgumentError);
}

TEST_CASE("incompatible broadcast shapes name both shapes", "[math_ops]") {
  Tensor a = Tensor::zeros(DType::kFloat, {3, 2});
  Tensor b = Tensor::zeros(DType::kFloat, {4});
  CHECK_THROWS_AS(a + b, ValueError);
  CHECK_THROWS_WITH(a * b, Catch::Contains("[3,2]") && Catch::Contains("[4]"));
  CHECK((a + Tensor::zeros(DType::kFloat, {1, 2})).shape() == TensorShape({3, 2}));
  CHECK((Tensor::zeros(DType::kFloat, {3, 1}) + Tensor::zeros(DType::kFloat, {1, 4})).shape() ==
        TensorShape({3, 4}));
}

namespace {

template <typename T>
std::vector<T> naive_matmul(const std::vector<T>& a, const std::vector<T>& b, int64_t m, int64_t n,
                            int64_t k, bool ta, bool tb) {
  std::vector<T> c(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      auto acc = wide(T{});
      for (int64_t p = 0; p < k; ++p) {
        acc += wide(a[ta ? p * m + i : i * k + p]) * wide(b[tb ? j * k + p : p * n + j]);
      }
      c[i * n + j] = T(acc);
    }
  }
  return c;
}

template <typename T>
void check_matmul() {
  for (auto [m, n, k] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {3, 5, 4}, {17, 9, 33}, {130, 70, 150}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        CAPTURE(dtype_name(dtype_of<T>), m, n, k, ta, tb, kSeed);
        // Small integers keep every partial sum exact, even in bfloat16.
        const int r = std::is_same_v<T, bfloat16> ? 1 : 3;
        Tensor a = random_tensor(dtype_of<T>, ta ? TensorShape{k, m} : TensorShape{m, k}, kSeed + m,
                                 -r, r);
        Tensor b = random_tensor(dtype_of<T>, tb ? TensorShape{n, k} : TensorShape{k, n}, kSeed + n,
                                 -r, r);
        Tensor c = matmul(a, b, ta, tb);
        Tensor expected = Tensor::from_vector<T>(
            naive_matmul(a.to_vector<T>(), b.to_vector<T>(), m, n, k, ta, tb), {m, n});
        CHECK(compare_tensors(c, expected) == "");
      }
    }
  }
}

}  // namespace

TEST_CASE("matmul matches a naive triple loop, with transposes", "[math_ops][matmul]") {
  check_matmul<float>();
  check_matmul<double>();
  check_matmul<int32_t>();
  check_matmul<complex64>();
  check_matmul<half>();
  check_matmul<bfloat16>();
  Tensor a({{1.f, 2.f}, {3.f, 4.f}});
  CHECK(matmul(a, a).to_vector<float>() == std::vector<float>{7.f, 10.f, 15.f, 22.f});
  CHECK(matmul(Tensor::zeros(DType::kFloat, {2, 0}), Tensor::zeros(DType::kFloat, {0, 3}))
            .to_vector<float>() == std::vector<float>(6, 0.f));
}

namespace {

// Checks matmul on operands of fractions (seeded normal values rounded to
// the dtype, so that products and sums round) against the product of the
// same operands in long double, element by element, within what a sum in
// float (or double) and one rounding to the dtype allow:
//   |c - exact| <= ulp of the dtype at |exact| + (k + 2) u sum_p |a_ip b_pj|
// with u the unit roundoff of the type the products are summed in (float
// for float16 and bfloat16, whose GPU kernel sums in float too). A sum
// rounded to a 16-bit type at every step misses this by orders of
// magnitude at these k.
void check_matmul_accuracy(DType dtype, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  CAPTURE(dtype_name(dtype), m, n, k, ta, tb);
  const Tensor a =
      random_normal(ta ? TensorShape{k, m} : TensorShape{m, k}, {.seed = 7 + m}).cast(dtype);
  const Tensor b =
      random_normal(tb ? TensorShape{n, k} : TensorShape{k, n}, {.seed = 11 + n}).cast(dtype);
  const std::vector<double> av = a.cast(DType::kDouble).to_vector<double>();
  const std::vector<double> bv = b.cast(DType::kDouble).to_vector<double>();
  const std::vector<double> cv = matmul(a, b, ta, tb).cast(DType::kDouble).to_vector<double>();
  const bool wide = dtype == DType::kDouble;
  const long double u = wide ? std::ldexp(1.0L, -53) : std::ldexp(1.0L, -24);
  // The dtype's spacing at x: 2^(exponent of x - mantissa bits).
  const int digits = dtype == DType::kHalf       ? 11
                     : dtype == DType::kBFloat16 ? 8
                     : dtype == DType::kFloat    ? 24
                                                 : 53;
  const int min_exponent = dtype == DType::kHalf ? -14 : -126;  // of the normal numbers
  const auto ulp = [digits, min_exponent](long double x) {
    const int e = x == 0 ? min_exponent : std::ilogb(static_cast<double>(x));
    return std::ldexp(1.0L, std::max(e, min_exponent) - digits + 1);
  };
  int64_t bad = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      long double exact = 0, magnitude = 0;
      for (int64_t p = 0; p < k; ++p) {
        const long double x = av[static_cast<size_t>(ta ? p * m + i : i * k + p)];
        const long double y = bv[static_cast<size_t>(tb ? j * k + p : p * n + j)];
        exact += x * y;
        magnitude += std::fabs(x * y);
      }
      const long double bound = (dtype == DType::kFloat || wide ? 0 : ulp(std::fabs(exact))) +
                                static_cast<long double>(k + 2) * u * magnitude;
      const long double got = cv[static_cast<size_t>(i * n + j)];
      if (!(std::fabs(got - exact) <= bound) && bad++ < 3) {
        FAIL_CHECK("c[" << i << "," << j << "] = " << static_cast<double>(got) << ", exact "
                        << static_cast<double>(exact) << ", allowed error "
                        << static_cast<double>(bound));
      }
    }
  }
  CHECK(bad == 0);
}

}  // namespace

// [isa]: the GEMM is built per instruction set (kernels/cpu/matmul_rows.h);
// CTest runs this again under VARSTATE_CPU_ISA=baseline, avx2 and avx512.
TEST_CASE("matmul sums within float's (double's) error, 16-bit types rounded once",
          "[math_ops][matmul][isa]") {
  FreshGraph fresh;  // on the test device (GPU:0 in the _on_gpu run: cuBLAS's sums)
  for (DType dtype : {DType::kFloat, DType::kDouble, DType::kHalf, DType::kBFloat16}) {
    // Eigen's blocking, a product split over the pool (m n k >= 2^20) and a
    // single row (never split).
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                           {5, 3, 7},
                           {33, 17, 300},
                           {130, 70, 1000},
                           {1, 200, 3000}}) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) check_matmul_accuracy(dtype, m, n, k, ta, tb);
      }
    }
  }
}

// Infinities and NaNs reach the results they would in a float sum, on
// every path (AMX tiles for bfloat16 where the CPU has them; cuBLAS on a
// GPU): an infinite operand makes its products infinite, or NaN against
// zero or the other infinity; a NaN makes its row and column NaN.
TEST_CASE("matmul carries infinities and NaNs as a float sum does", "[math_ops][matmul][isa]") {
  FreshGraph fresh;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (DType dtype : {DType::kFloat, DType::kBFloat16, DType::kHalf}) {
    CAPTURE(dtype_name(dtype));
    const int64_t m = 40, n = 36, k = 70;
    // Written on the host, multiplied on the test device.
    const Tensor placed = random_normal({m, k}, {.seed = 3});
    Device& device = placed.device();
    Tensor a = placed.to_host();
    Tensor b = random_normal({k, n}, {.seed = 4}).to_host();
    a.data<float>()[0 * k + 5] = inf;    // row 0
    a.data<float>()[7 * k + 69] = -inf;  // row 7, the last column of k
    a.data<float>()[33 * k + 12] = nan;  // row 33 (the second block of 32)
    b.data<float>()[5 * n + 3] = 0.f;    // inf * 0 in c[0, 3]
    b.data<float>()[40 * n + 35] = inf;  // column 35, a partial tile
    const std::vector<double> got = matmul(a.on(device).cast(dtype), b.on(device).cast(dtype))
                                        .cast(DType::kDouble)
                                        .to_vector<double>();
    const std::vector<double> av = a.cast(dtype).cast(DType::kDouble).to_vector<double>();
    const std::vector<double> bv = b.cast(dtype).cast(DType::kDouble).to_vector<double>();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        // The class of the exact sum: NaN, +-inf or finite.
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += av[i * k + p] * bv[p * n + j];
        const double c = got[static_cast<size_t>(i * n + j)];
        CAPTURE(i, j, sum, c);
        CHECK(std::isnan(c) == std::isnan(sum));
        if (std::isinf(sum)) CHECK(c == sum);
        if (std::isfinite(sum)) CHECK(std::isfinite(c));
      }
    }
  }
}

// A product split over the pool starts its ranges of rows at multiples of
// 48 (kernels/cpu/matmul.cc), so that a row's sum does not depend on the
// range it falls in, and the bits of c on the number of threads: the rows of
// a product equal those of the products of its first 480 rows and of the
// rest, bit for bit.
TEST_CASE("matmul's rows do not depend on how the pool splits them", "[math_ops][matmul][isa]") {
  const int64_t m = 1000, k = 300, n = 200, top = 480;
  for (DType dtype : {DType::kFloat, DType::kDouble, DType::kBFloat16}) {
    for (bool ta : {false, true}) {
      CAPTURE(dtype_name(dtype), ta);
      const Tensor a = random_normal(ta ? TensorShape{k, m} : TensorShape{m, k}, {.seed = 21})
                           .to_host()
                           .cast(dtype);
      const Tensor b = random_normal({k, n}, {.seed = 22}).to_host().cast(dtype);
      // The two row ranges of op(a), stored as op(a) is.
      const std::vector<double> av = a.cast(DType::kDouble).to_vector<double>();
      auto rows_of = [&](int64_t first, int64_t last) {
        std::vector<double> out;
        const int64_t r = last - first;
        for (int64_t i = 0; i < (ta ? k : r); ++i) {
          for (int64_t j = 0; j < (ta ? r : k); ++j) {
            out.push_back(ta ? av[i * m + first + j] : av[(first + i) * k + j]);
          }
        }
        const TensorShape shape = ta ? TensorShape{k, r} : TensorShape{r, k};
        return Tensor::from_vector<double>(out, shape).cast(dtype);
      };
      const std::vector<double> whole =
          matmul(a, b, ta, false).cast(DType::kDouble).to_vector<double>();
      std::vector<double> parts =
          matmul(rows_of(0, top), b, ta, false).cast(DType::kDouble).to_vector<double>();
      const std::vector<double> rest =
          matmul(rows_of(top, m), b, ta, false).cast(DType::kDouble).to_vector<double>();
      parts.insert(parts.end(), rest.begin(), rest.end());
      CHECK(same_bits(Tensor::from_vector<double>(whole), Tensor::from_vector<double>(parts)));
    }
  }
}

TEST_CASE("matmul shape errors name both shapes", "[math_ops][matmul]") {
  Tensor a = Tensor::zeros(DType::kFloat, {2, 3});
  Tensor b = Tensor::zeros(DType::kFloat, {4, 5});
  CHECK_THROWS_AS(matmul(a, b), ValueError);
  CHECK_THROWS_WITH(matmul(a, b), Catch::Contains("[2,3]") && Catch::Contains("[4,5]"));
  CHECK_NOTHROW(matmul(a, Tensor::zeros(DType::kFloat, {5, 3}), false, true));
  CHECK_THROWS_AS(matmul(Tensor::zeros(DType::kFloat, {3}), a), ValueError);
  CHECK_THROWS_AS(matmul(Tensor::zeros(DType::kInt8, {2, 2}), Tensor::zeros(DType::kInt8, {2, 2})),
                  TypeError);
}

namespace {

// multiply_add against the two multiplies and the add it stands for, bit
// for bit, for the operands' shapes `shapes` (x, y, z, w).
void check_multiply_add(DType dtype, const std::array<TensorShape, 4>& shapes, uint64_t seed) {
  CAPTURE(dtype_name(dtype), shapes[0].to_string(), shapes[1].to_string(), shapes[2].to_string(),
          shapes[3].to_string());
  std::array<Tensor, 4> t;
  for (size_t i = 0; i < 4; ++i) t[i] = random_operand(dtype, shapes[i], seed + i, -8, 8);
  // Fractions too, so that the products round (random_operand draws integers).
  if (dtype == DType::kFloat || dtype == DType::kDouble) {
    for (Tensor& x : t) x = x * Tensor(0.3).cast(dtype) + Tensor(0.1).cast(dtype);
  }
  const Tensor got = multiply_add(t[0], t[1], t[2], t[3]);
  const Tensor expected = add(multiply(t[0], t[1]), multiply(t[2], t[3]));
  CHECK(same_bits(got, expected));
}

}  // namespace

TEST_CASE("multiply_add is bitwise x * y + z * w for every operand layout", "[math_ops]") {
  const TensorShape m{1031, 16}, col{1031, 1}, s{}, one{1, 1};
  // Every (elements, column, scalar) kind in each position, the two
  // products' operands swapped, and products with no every-element operand.
  const std::vector<TensorShape> kinds = {m, col, s};
  uint64_t seed = 1;
  for (const TensorShape& a : kinds) {
    for (const TensorShape& b : kinds) {
      for (const TensorShape& c : kinds) {
        for (const TensorShape& d : kinds) {
          check_multiply_add(DType::kFloat, {a, b, c, d}, seed += 4);
        }
      }
    }
  }
  // Other widths, ranks and dtypes (one pass for float64; the rest as the
  // separate ops), a [1, 1] scalar, general broadcasting, no elements.
  check_multiply_add(DType::kDouble, {TensorShape{9, 37}, TensorShape{9, 1}, TensorShape{9, 37}, s},
                     90);
  check_multiply_add(DType::kFloat,
                     {TensorShape{100003}, TensorShape{100003}, s, TensorShape{100003}}, 91);
  check_multiply_add(DType::kFloat, {m, one, m, m}, 92);
  check_multiply_add(DType::kFloat, {TensorShape{3, 1}, TensorShape{1, 4}, s, TensorShape{3, 4}},
                     93);
  check_multiply_add(DType::kFloat, {TensorShape{2, 3, 4}, TensorShape{4}, TensorShape{2, 3, 4}, s},
                     94);
  check_multiply_add(DType::kHalf, {m, col, m, s}, 95);
  check_multiply_add(DType::kInt32, {m, col, m, s}, 96);
  check_multiply_add(DType::kFloat, {TensorShape{0, 16}, TensorShape{0, 1}, TensorShape{0, 16}, s},
                     97);
  // The demo's gradient: errors * rows + own * l2.
  const Tensor e = Tensor::from_vector<float>({0.5f, -2.0f}, {2, 1});
  const Tensor v = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  const Tensor u = Tensor::from_vector<float>({10, 20, 30, 40}, {2, 2});
  CHECK(multiply_add(e, v, u, Tensor(0.5f)).to_vector<float>() ==
        std::vector<float>{5.5f, 11.0f, 9.0f, 12.0f});
}

TEST_CASE("multiply_add errors are those of the separate ops", "[math_ops]") {
  const Tensor a = Tensor::zeros(DType::kFloat, {3, 2});
  const Tensor b = Tensor::zeros(DType::kFloat, {4});
  CHECK_THROWS_WITH(multiply_add(a, b, a, a), Catch::Contains("[3,2]") && Catch::Contains("[4]"));
  CHECK_THROWS_AS(multiply_add(a, a, Tensor::zeros(DType::kFloat, {2, 2}), a), ValueError);
  CHECK_THROWS_AS(multiply_add(a, a, Tensor::zeros(DType::kInt32, {3, 2}), a), TypeError);
  CHECK_THROWS_AS(multiply_add(a, Tensor(), a, a), InvalidArgumentError);
}
