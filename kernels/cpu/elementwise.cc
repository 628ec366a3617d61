#include "kernels/cpu/elementwise.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/eigen_support.h"
#include "kernels/cpu/half_blocks.h"
#include "kernels/cpu/int_division.h"
#include "kernels/cpu/isa_variants.h"
#include "kernels/elementwise_functors.h"
#include "kernels/host16.h"
#include "varstate/error.h"

namespace varstate::kernels::cpu {
namespace {

// 16-bit floats compute in float; everything else in its own type.
template <typename T>
struct ComputeTypeOf {
  using type = T;
};
template <>
struct ComputeTypeOf<half> {
  using type = float;
};
template <>
struct ComputeTypeOf<bfloat16> {
  using type = float;
};
template <typename T>
using compute_t = typename ComputeTypeOf<T>::type;

// 16-bit values convert inline (kernels/host16.h), so that the loops
// vectorize.
template <typename T>
compute_t<T> load(const T& v) {
  if constexpr (kIsHalfLike<T>) {
    return host16_to_float(v);
  } else {
    return v;
  }
}

template <typename T, typename C>
T store(const C& v) {
  if constexpr (kIsHalfLike<T>) {
    return host16_from_float<T>(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Runs body(first, last) over [0, n): inline when small, else in ranges
// over the pool (elementwise threshold, bytes read + written).
template <typename Body>
void parallel_for(int64_t n, int64_t bytes_per_element, const Body& body) {
  for_ranges(n, 64, n * bytes_per_element, parallel_thresholds().elementwise_bytes, body);
}

// Output elements [first, last) of [rows, k] op [rows, 1] (`column` is the
// [rows, 1] operand, on the right when !kColumnFirst): the rows of a batch
// times a per-row value (errors * rows). A loop per row, without the
// general walk's carries and with the operands known not to alias the
// output, so that each row's k elements vectorize.
// (out is the op's fresh result, never an operand.) K is k as a constant
// for the common row widths, so that a row is a fixed run of vector ops.
template <bool kColumnFirst, typename T, typename Out, typename F, typename K>
void column_broadcast_range(const T* __restrict matrix, const T* __restrict column,
                            Out* __restrict out, K k, int64_t first, int64_t last, const F& f,
                            int* err) {
  for (int64_t row = first / k; row * k < last; ++row) {
    const int64_t begin = std::max(first, row * k), end = std::min(last, (row + 1) * k);
    const auto c = load(column[row]);
    for (int64_t i = begin; i < end; ++i) {
      out[i] = kColumnFirst ? store<Out>(f(c, load(matrix[i]), err))
                            : store<Out>(f(load(matrix[i]), c, err));
    }
  }
}

// Output elements [first, last) of a broadcast: walks the innermost
// dimension with constant strides and carries into the outer ones.
template <typename T, typename Out, typename F>
void broadcast_range(const T* a, const T* b, Out* out, const BinaryGeometry& g, int64_t first,
                     int64_t last, const F& f, int* err) {
  const int r = g.rank;
  if (r == 2) {
    const int64_t k = g.dims[1];
    const bool a_column =
        g.a_strides[0] == 1 && g.a_strides[1] == 0 && g.b_strides[0] == k && g.b_strides[1] == 1;
    const bool b_column =
        g.b_strides[0] == 1 && g.b_strides[1] == 0 && g.a_strides[0] == k && g.a_strides[1] == 1;
    if (a_column || b_column) {
      const T* matrix = a_column ? b : a;
      const T* column = a_column ? a : b;
      auto run = [&](auto width) {
        if (a_column) {
          column_broadcast_range<true>(matrix, column, out, width, first, last, f, err);
        } else {
          column_broadcast_range<false>(matrix, column, out, width, first, last, f, err);
        }
      };
      return with_constant<8, 16, 32, 64>(k, run);
    }
  }
  int64_t idx[BinaryGeometry::kMaxDims];
  int64_t oa = 0, ob = 0, rem = first;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rem % g.dims[d];
    rem /= g.dims[d];
    oa += idx[d] * g.a_strides[d];
    ob += idx[d] * g.b_strides[d];
  }
  const int64_t inner = g.dims[r - 1], sa = g.a_strides[r - 1], sb = g.b_strides[r - 1];
  int64_t i = first;
  while (i < last) {
    const int64_t row_end = std::min(last, i + (inner - idx[r - 1]));
    // The common rows get loops the compiler vectorizes: one operand
    // contiguous and the other one value ([n,1] * [n,k]), or both contiguous.
    if (sa == 1 && sb == 0) {
      const auto vb = load(b[ob]);
      for (; i < row_end; ++i, ++oa) out[i] = store<Out>(f(load(a[oa]), vb, err));
    } else if (sa == 0 && sb == 1) {
      const auto va = load(a[oa]);
      for (; i < row_end; ++i, ++ob) out[i] = store<Out>(f(va, load(b[ob]), err));
    } else {
      for (; i < row_end; ++i, oa += sa, ob += sb)
        out[i] = store<Out>(f(load(a[oa]), load(b[ob]), err));
    }
    if (i == last) break;
    oa -= inner * sa;
    ob -= inner * sb;
    idx[r - 1] = 0;
    for (int d = r - 2; d >= 0; --d) {
      oa += g.a_strides[d];
      ob += g.b_strides[d];
      if (++idx[d] < g.dims[d]) break;
      oa -= g.dims[d] * g.a_strides[d];
      ob -= g.dims[d] * g.b_strides[d];
      idx[d] = 0;
    }
  }
}

// Output elements [first, last) of a binary op, by layout.
template <typename T, typename Out, typename F>
void binary_range(const T* a, const T* b, Out* out, const BinaryGeometry& g, int64_t first,
                  int64_t last, const F& f, int* err) {
  switch (g.layout) {
    case BinaryGeometry::kSame:
      for (int64_t i = first; i < last; ++i) out[i] = store<Out>(f(load(a[i]), load(b[i]), err));
      break;
    case BinaryGeometry::kScalarA: {
      const auto sa = load(a[0]);
      for (int64_t i = first; i < last; ++i) out[i] = store<Out>(f(sa, load(b[i]), err));
      break;
    }
    case BinaryGeometry::kScalarB: {
      const auto sb = load(b[0]);
      for (int64_t i = first; i < last; ++i) out[i] = store<Out>(f(load(a[i]), sb, err));
      break;
    }
    case BinaryGeometry::kScalarBoth: {
      const Out v = store<Out>(f(load(a[0]), load(b[0]), err));
      std::fill(out + first, out + last, v);
      break;
    }
    case BinaryGeometry::kBroadcast:
      broadcast_range(a, b, out, g, first, last, f, err);
      break;
  }
}

// fn() built for the widest instruction set this CPU has (isa_variants.h)
// when T is a floating type: float and double vectorize twice or four
// times as wide, and the 16-bit types' conversions, a dozen integer
// operations an element for float16, stop being the loop's bound. The
// results are the baseline loop's, bit for bit (isa_variants.h). Integer
// types keep the one baseline build.
template <typename T, typename Fn>
void for_isa_if_floating(const Fn& fn) {
  if constexpr (kIsFloating<T>) {
    for_cpu_isa(fn);
  } else {
    fn();
  }
}

// The op of binary_halves_f16c that F computes, if any.
inline constexpr auto kNoHalfBinaryOp = static_cast<HalfBinaryOp>(-1);
template <typename F>
constexpr HalfBinaryOp half_binary_op() {
  if constexpr (std::is_same_v<F, AddFn>) return HalfBinaryOp::kAdd;
  if constexpr (std::is_same_v<F, SubFn>) return HalfBinaryOp::kSub;
  if constexpr (std::is_same_v<F, MulFn>) return HalfBinaryOp::kMul;
  if constexpr (std::is_same_v<F, DivFn>) return HalfBinaryOp::kDiv;
  if constexpr (std::is_same_v<F, MaximumFn>) return HalfBinaryOp::kMaximum;
  if constexpr (std::is_same_v<F, MinimumFn>) return HalfBinaryOp::kMinimum;
  return kNoHalfBinaryOp;
}

// Elements [first, last) of a float16 op whose operands are whole tensors
// or scalars (layout kSame, kScalarA or kScalarB), a block at a time: the
// operands widened into float buffers (widen_halves: F16C where the CPU
// has it), the op on floats, a float16 result rounded back in one run
// (round_to_halves). The values are binary_range's: the same float
// operation, the same rounding.
template <typename Out, typename F>
void half_binary_range(const half* a, const half* b, Out* out, BinaryGeometry::Layout layout,
                       int64_t first, int64_t last, const F& f, int* err) {
  const bool scalar_a = layout == BinaryGeometry::kScalarA;
  const bool scalar_b = layout == BinaryGeometry::kScalarB;
  // The arithmetic ops, maximum and minimum: one pass with F16C.
  if constexpr (std::is_same_v<Out, half> && half_binary_op<F>() != kNoHalfBinaryOp) {
    if (binary_halves_f16c(half_binary_op<F>(), scalar_a ? a : a + first, scalar_a,
                           scalar_b ? b : b + first, scalar_b, out + first, last - first)) {
      return;
    }
  }
  alignas(64) float fa[kHalfBlock], fb[kHalfBlock], result[kHalfBlock];
  if (scalar_a) std::fill_n(fa, kHalfBlock, host16_to_float(a[0]));
  if (scalar_b) std::fill_n(fb, kHalfBlock, host16_to_float(b[0]));
  for (int64_t begin = first; begin < last; begin += kHalfBlock) {
    const int64_t n = std::min(kHalfBlock, last - begin);
    if (!scalar_a) widen_halves(a + begin, fa, n);
    if (!scalar_b) widen_halves(b + begin, fb, n);
    if constexpr (std::is_same_v<Out, half>) {
      for (int64_t i = 0; i < n; ++i) result[i] = f(fa[i], fb[i], err);
      round_to_halves(result, out + begin, n);
    } else {
      for (int64_t i = 0; i < n; ++i) out[begin + i] = store<Out>(f(fa[i], fb[i], err));
    }
  }
}

template <typename T, typename Out, typename F>
int run_binary(const T* a, const T* b, Out* out, const BinaryGeometry& g, const F& f) {
  std::atomic<int> status{kKernelOk};
  parallel_for(g.n, 2 * sizeof(T) + sizeof(Out), [&](int64_t first, int64_t last) {
    int err = kKernelOk;
    for_isa_if_floating<T>([&] {
      if constexpr (std::is_same_v<T, half>) {
        if (g.layout == BinaryGeometry::kSame || g.layout == BinaryGeometry::kScalarA ||
            g.layout == BinaryGeometry::kScalarB) {
          return half_binary_range(a, b, out, g.layout, first, last, f, &err);
        }
      }
      binary_range(a, b, out, g, first, last, f, &err);
    });
    if (err != kKernelOk) status.store(err, std::memory_order_relaxed);
  });
  return status.load();
}

template <typename T, typename Out, typename F>
void run_unary(const T* in, Out* out, int64_t n, const F& f) {
  parallel_for(n, sizeof(T) + sizeof(Out), [&](int64_t first, int64_t last) {
    for_isa_if_floating<T>([&] {
      if constexpr (std::is_same_v<T, half> && std::is_same_v<Out, half>) {
        // A block at a time, as half_binary_range.
        alignas(64) float values[kHalfBlock];
        for (int64_t begin = first; begin < last; begin += kHalfBlock) {
          const int64_t n = std::min(kHalfBlock, last - begin);
          widen_halves(in + begin, values, n);
          for (int64_t i = 0; i < n; ++i) values[i] = f(values[i]);
          round_to_halves(values, out + begin, n);
        }
      } else {
        for (int64_t i = first; i < last; ++i) out[i] = store<Out>(f(load(in[i])));
      }
    });
  });
}

// out[i] = floor(a[i] / d) (kMod: the floor modulo) for i in [first, last).
// The divisor comes by value: a local the stores to out cannot alias, so
// its words stay in registers.
template <bool kMod, bool kHalves, typename T>
void floor_divide_by(const FloorDivisor<T> d, const T* a, T* out, int64_t first, int64_t last) {
  for (int64_t i = first; i < last; ++i) {
    out[i] = kMod ? d.template modulo<kHalves>(a[i]) : d.template divide<kHalves>(a[i]);
  }
}

// out[i] = floor(a[i] / b[i]) (kMod: the floor modulo) for i in [first,
// last), through double division (int_division.h), one vector loop.
// Returns whether some b[i] is 0; its element is left 0 (the call fails),
// and 1 stands in for it so that every lane divides.
template <bool kMod, typename T>
bool floor_divide_elements(const T* a, const T* b, T* out, int64_t first, int64_t last) {
  unsigned zero = 0;
  for (int64_t i = first; i < last; ++i) {
    const T y = b[i];
    zero |= y == 0;
    const T divisor = y == 0 ? T(1) : y;
    const T r = kMod ? floor_modulo_through_double(a[i], divisor)
                     : floor_divide_through_double(a[i], divisor);
    out[i] = y == 0 ? T(0) : r;
  }
  return zero != 0;
}

// Integer floordiv and floormod without the divide instruction
// (int_division.h), bit for bit FloorDivFn / FloorModFn: by a scalar
// divisor (any integer type), and element by element for types of up to 32
// bits. Returns nullopt for the other layouts (the functor's loop).
template <typename T>
std::optional<int> integer_floor_division(BinaryOp op, const T* a, const T* b, T* out,
                                          const BinaryGeometry& g) {
  const bool mod = op == BinaryOp::kFloorMod;
  if (g.layout == BinaryGeometry::kScalarB) {
    if (g.n == 0) return kKernelOk;
    if (b[0] == 0) return kIntegerDivisionByZero;
    const FloorDivisor<T> d(b[0]);
    parallel_for(g.n, 2 * sizeof(T), [&](int64_t first, int64_t last) {
      // A 64-bit divisor's reciprocal: one 64 x 64-bit multiply a dividend
      // in the baseline build, four 32 x 32-bit ones (which vectorize) in
      // the AVX2 and AVX-512 builds.
      if (cpu_isa() == Isa::kBaseline) {
        mod ? floor_divide_by<true, false>(d, a, out, first, last)
            : floor_divide_by<false, false>(d, a, out, first, last);
        return;
      }
      for_cpu_isa([&] {
        mod ? floor_divide_by<true, true>(d, a, out, first, last)
            : floor_divide_by<false, true>(d, a, out, first, last);
      });
    });
    return kKernelOk;
  }
  if constexpr (sizeof(T) <= 4) {
    if (g.layout == BinaryGeometry::kSame) {
      std::atomic<bool> zero{false};
      parallel_for(g.n, 3 * sizeof(T), [&](int64_t first, int64_t last) {
        bool any_zero = false;
        for_cpu_isa([&] {
          any_zero = mod ? floor_divide_elements<true>(a, b, out, first, last)
                         : floor_divide_elements<false>(a, b, out, first, last);
        });
        if (any_zero) zero.store(true, std::memory_order_relaxed);
      });
      return zero.load() ? kIntegerDivisionByZero : kKernelOk;
    }
  }
  return std::nullopt;
}

[[noreturn]] void not_instantiated(const char* what) {
  throw InternalError(std::string("CPU ") + what + " kernel called for an unsupported dtype");
}

}  // namespace

namespace {

// One product of multiply_add: `a` an every-element operand (a product
// commutes bitwise, so it goes first) times `b`.
template <typename T>
struct Product {
  const T* a;
  const T* b;
};

// Rows [first_row, last_row): out = a1 * b1 + a2 * b2 with b1 and b2 of
// kinds KB1 and KB2, each product rounded to T first (the sum of two
// rounded products, as the unfused ops compute; the file is also built
// with -ffp-contract=off). The kinds are constants, so that a row is a
// run of vector ops. (k is not: with k a constant 16, GCC 12 vectorizes
// across rows with shuffles, at twice the time.)
template <OperandKind KB1, OperandKind KB2, typename T>
void multiply_add_rows(Product<T> p1, Product<T> p2, T* __restrict out, int64_t k,
                       int64_t first_row, int64_t last_row) {
  for (int64_t row = first_row; row < last_row; ++row) {
    const int64_t base = row * k;
    const T* __restrict a1 = p1.a + base;
    const T* __restrict a2 = p2.a + base;
    const T* __restrict b1 = p1.b + (KB1 == OperandKind::kElements ? base : 0);
    const T* __restrict b2 = p2.b + (KB2 == OperandKind::kElements ? base : 0);
    const T s1 = KB1 == OperandKind::kColumn ? p1.b[row] : p1.b[0];
    const T s2 = KB2 == OperandKind::kColumn ? p2.b[row] : p2.b[0];
    T* __restrict dst = out + base;
    for (int64_t j = 0; j < k; ++j) {
      const T p = a1[j] * (KB1 == OperandKind::kElements ? b1[j] : s1);
      const T q = a2[j] * (KB2 == OperandKind::kElements ? b2[j] : s2);
      dst[j] = p + q;
    }
  }
}

template <OperandKind K>
using KindConstant = std::integral_constant<OperandKind, K>;

// run(KindConstant<kb1>, KindConstant<kb2>).
template <typename Run>
void with_kinds(OperandKind kb1, OperandKind kb2, const Run& run) {
  auto with_second = [&](auto c1) {
    switch (kb2) {
      case OperandKind::kElements:
        return run(c1, KindConstant<OperandKind::kElements>());
      case OperandKind::kColumn:
        return run(c1, KindConstant<OperandKind::kColumn>());
      case OperandKind::kScalar:
        break;
    }
    return run(c1, KindConstant<OperandKind::kScalar>());
  };
  switch (kb1) {
    case OperandKind::kElements:
      return with_second(KindConstant<OperandKind::kElements>());
    case OperandKind::kColumn:
      return with_second(KindConstant<OperandKind::kColumn>());
    case OperandKind::kScalar:
      break;
  }
  return with_second(KindConstant<OperandKind::kScalar>());
}

// x * y as a Product and the kind of its second operand. When neither is
// every element, the product's values (one per row, or one) are spread over
// `spread` (rows x k) and multiplied by one: exact, so still bitwise the
// unfused multiply.
template <typename T>
std::pair<Product<T>, OperandKind> as_product(const MultiplyAddOperand<T>& x,
                                              const MultiplyAddOperand<T>& y, int64_t rows,
                                              int64_t k, std::vector<T>& spread) {
  static const T kOne = T(1);
  if (x.kind == OperandKind::kElements) return {{x.data, y.data}, y.kind};
  if (y.kind == OperandKind::kElements) return {{y.data, x.data}, x.kind};
  spread.resize(static_cast<size_t>(rows * k));
  for (int64_t r = 0; r < rows; ++r) {
    const T vx = x.data[x.kind == OperandKind::kColumn ? r : 0];
    const T vy = y.data[y.kind == OperandKind::kColumn ? r : 0];
    const T product = vx * vy;
    std::fill_n(spread.data() + r * k, k, product);
  }
  return {{spread.data(), &kOne}, OperandKind::kScalar};
}

}  // namespace

template <typename T>
void multiply_add(const MultiplyAddOperand<T>& x, const MultiplyAddOperand<T>& y,
                  const MultiplyAddOperand<T>& z, const MultiplyAddOperand<T>& w, T* out,
                  int64_t rows, int64_t k) {
  if (rows == 0 || k == 0) return;
  std::vector<T> spread1, spread2;
  // Named variables, not structured bindings: the lambda below captures
  // them, which clang before 16 rejects for bindings.
  const std::pair<Product<T>, OperandKind> first = as_product(x, y, rows, k, spread1);
  const std::pair<Product<T>, OperandKind> second = as_product(z, w, rows, k, spread2);
  const Product<T> p1 = first.first, p2 = second.first;
  const OperandKind kb1 = first.second, kb2 = second.second;
  // Whole rows per range: at most 5 elements touched per output element.
  for_ranges(rows, 1, rows * k * 5 * static_cast<int64_t>(sizeof(T)),
             parallel_thresholds().elementwise_bytes, [&](int64_t first, int64_t last) {
               with_kinds(kb1, kb2, [&](auto c1, auto c2) {
                 multiply_add_rows<decltype(c1)::value, decltype(c2)::value>(p1, p2, out, k, first,
                                                                             last);
               });
             });
}

template void multiply_add<float>(const MultiplyAddOperand<float>&,
                                  const MultiplyAddOperand<float>&,
                                  const MultiplyAddOperand<float>&,
                                  const MultiplyAddOperand<float>&, float*, int64_t, int64_t);
template void multiply_add<double>(const MultiplyAddOperand<double>&,
                                   const MultiplyAddOperand<double>&,
                                   const MultiplyAddOperand<double>&,
                                   const MultiplyAddOperand<double>&, double*, int64_t, int64_t);

template <typename T>
int arithmetic(BinaryOp op, const T* a, const T* b, T* out, const BinaryGeometry& g) {
  if constexpr (kIsInteger<T>) {
    if (op == BinaryOp::kFloorDiv || op == BinaryOp::kFloorMod) {
      if (const std::optional<int> status = integer_floor_division(op, a, b, out, g)) {
        return *status;
      }
    }
  }
  return with_binary_functor(op, [&](auto fn, auto op_constant) -> int {
    constexpr BinaryOp kOp = decltype(op_constant)::value;
    if constexpr (binary_op_supports<T>(kOp) && !binary_op_is_predicate(kOp)) {
      return run_binary(a, b, out, g, fn);
    } else {
      not_instantiated("arithmetic");
    }
  });
}

template <typename T>
void predicate(BinaryOp op, const T* a, const T* b, bool* out, const BinaryGeometry& g) {
  with_binary_functor(op, [&](auto fn, auto op_constant) -> int {
    constexpr BinaryOp kOp = decltype(op_constant)::value;
    if constexpr (binary_op_supports<T>(kOp) && binary_op_is_predicate(kOp)) {
      return run_binary(a, b, out, g, fn);
    } else {
      not_instantiated("predicate");
    }
  });
}

template <typename T>
void unary(UnaryOp op, const T* in, T* out, int64_t n) {
  switch (op) {
    case UnaryOp::kNegative:
      if constexpr (unary_op_supports<T>(UnaryOp::kNegative))
        return run_unary(in, out, n, NegativeFn{});
      break;
    case UnaryOp::kAbs:
      if constexpr (unary_op_supports<T>(UnaryOp::kAbs) && !kIsComplex<T>)
        return run_unary(in, out, n, AbsFn{});
      break;
    case UnaryOp::kInvert:
      if constexpr (unary_op_supports<T>(UnaryOp::kInvert))
        return run_unary(in, out, n, InvertFn{});
      break;
  }
  not_instantiated("unary");
}

template <typename T, typename R>
void complex_abs(const T* in, R* out, int64_t n) {
  run_unary(in, out, n, AbsFn{});
}

#define VARSTATE_INSTANTIATE(E, T)                                                        \
  template int arithmetic<T>(BinaryOp, const T*, const T*, T*, const BinaryGeometry&);    \
  template void predicate<T>(BinaryOp, const T*, const T*, bool*, const BinaryGeometry&); \
  template void unary<T>(UnaryOp, const T*, T*, int64_t);
VARSTATE_FOR_EACH_NUMERIC_STORAGE_TYPE(VARSTATE_INSTANTIATE)
#undef VARSTATE_INSTANTIATE
template void predicate<bool>(BinaryOp, const bool*, const bool*, bool*, const BinaryGeometry&);
template void unary<bool>(UnaryOp, const bool*, bool*, int64_t);
template void complex_abs<complex64, float>(const complex64*, float*, int64_t);
template void complex_abs<complex128, double>(const complex128*, double*, int64_t);

}  // namespace varstate::kernels::cpu
