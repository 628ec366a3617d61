#include "varstate/math_ops.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/matmul.h"
#include "kernels/elementwise_functors.h"
#include "varstate/device_manager.h"
#ifdef VARSTATE_HAVE_CUDA
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/matmul.h"
#endif

namespace varstate {
namespace {

using kernels::BinaryGeometry;
using kernels::BinaryOp;
using kernels::UnaryOp;

std::string name_of(DType dtype) { return std::string(dtype_name(dtype)); }

// TensorFlow's op names, for messages.
const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "Add";
    case BinaryOp::kSub:
      return "Sub";
    case BinaryOp::kMul:
      return "Mul";
    case BinaryOp::kDiv:
      return "RealDiv";
    case BinaryOp::kFloorDiv:
      return "FloorDiv";
    case BinaryOp::kFloorMod:
      return "FloorMod";
    case BinaryOp::kPow:
      return "Pow";
    case BinaryOp::kMaximum:
      return "Maximum";
    case BinaryOp::kMinimum:
      return "Minimum";
    case BinaryOp::kLess:
      return "Less";
    case BinaryOp::kLessEqual:
      return "LessEqual";
    case BinaryOp::kGreater:
      return "Greater";
    case BinaryOp::kGreaterEqual:
      return "GreaterEqual";
    case BinaryOp::kEqual:
      return "Equal";
    case BinaryOp::kNotEqual:
      return "NotEqual";
    case BinaryOp::kLogicalAnd:
      return "LogicalAnd";
    case BinaryOp::kLogicalOr:
      return "LogicalOr";
    case BinaryOp::kLogicalXor:
      return "LogicalXor";
  }
  return "BinaryOp";
}

const char* op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNegative:
      return "Neg";
    case UnaryOp::kAbs:
      return "Abs";
    case UnaryOp::kInvert:
      return "Invert";
  }
  return "UnaryOp";
}

// Calls fn(T{}) for the storage types element-wise kernels exist for:
// the numeric storage types and bool. Quantized and string dtypes are
// rejected by the callers' support checks first.
template <typename Fn>
decltype(auto) dispatch_kernel_type(DType dtype, std::string_view what, Fn&& fn) {
  switch (dtype) {
#define VARSTATE_CASE(E, T) \
  case DType::E:            \
    return fn(T{});
    VARSTATE_FOR_EACH_NUMERIC_STORAGE_TYPE(VARSTATE_CASE)
#undef VARSTATE_CASE
    case DType::kBool:
      return fn(bool{});
    default:
      throw_unsupported_dtype(dtype, what);
  }
}

bool kernel_type_exists(DType dtype) {
  return dtype == DType::kBool || (dtype_is_numeric(dtype) && !dtype_is_quantized(dtype));
}

bool supports(BinaryOp op, DType dtype) {
  if (!kernel_type_exists(dtype)) return false;
  return dispatch_kernel_type(
      dtype, op_name(op), [&](auto tag) { return kernels::binary_op_supports<decltype(tag)>(op); });
}

bool supports(UnaryOp op, DType dtype) {
  if (!kernel_type_exists(dtype)) return false;
  return dispatch_kernel_type(
      dtype, op_name(op), [&](auto tag) { return kernels::unary_op_supports<decltype(tag)>(op); });
}

void check_valid(const char* op, const Tensor& t, const char* which) {
  if (!t.valid())
    throw InvalidArgumentError(std::string(op) + ": " + which + " is an empty tensor handle");
}

// Brings both operands to one dtype: a weakly typed operand converts to the
// other's dtype; two strongly typed operands must already agree.
std::pair<Tensor, Tensor> unify_dtypes(const char* op, const Tensor& x, const Tensor& y) {
  check_valid(op, x, "x");
  check_valid(op, y, "y");
  if (x.dtype() == y.dtype()) return {x, y};
  if (y.weakly_typed() && !x.weakly_typed()) return {x, convert_to_dtype(y, x.dtype(), op)};
  if (x.weakly_typed() && !y.weakly_typed()) return {convert_to_dtype(x, y.dtype(), op), y};
  if (x.weakly_typed() && y.weakly_typed()) {
    // Two literals (1 + 2.5): the one that converts without loss wins.
    try {
      return {convert_to_dtype(x, y.dtype(), op), y};
    } catch (const TypeError&) {
      return {x, convert_to_dtype(y, x.dtype(), op)};
    }
  }
  throw TypeError(std::string(op) + ": x and y must have the same dtype, got " +
                  name_of(x.dtype()) + " and " + name_of(y.dtype()));
}

// The output shape of broadcasting xs with ys, and the kernel geometry.
BinaryGeometry broadcast(const char* op, const TensorShape& xs, const TensorShape& ys,
                         std::vector<int64_t>& out_dims) {
  const int rank = std::max(xs.rank(), ys.rank());
  std::vector<int64_t> xd(rank, 1), yd(rank, 1);
  std::copy(xs.dims().begin(), xs.dims().end(), xd.begin() + (rank - xs.rank()));
  std::copy(ys.dims().begin(), ys.dims().end(), yd.begin() + (rank - ys.rank()));
  out_dims.assign(rank, 1);
  for (int d = 0; d < rank; ++d) {
    if (xd[d] == yd[d] || yd[d] == 1) {
      out_dims[d] = xd[d];
    } else if (xd[d] == 1) {
      out_dims[d] = yd[d];
    } else {
      throw ValueError(std::string(op) + ": Incompatible shapes: " + xs.to_string() + " vs. " +
                       ys.to_string());
    }
  }
  BinaryGeometry g;
  g.n = TensorShape(out_dims).num_elements();
  const int64_t xn = xs.num_elements(), yn = ys.num_elements();
  if (g.n == 0 || (xn == g.n && yn == g.n)) {
    g.layout = BinaryGeometry::kSame;
  } else if (xn == 1 && yn == 1) {
    g.layout = BinaryGeometry::kScalarBoth;
  } else if (xn == 1 && yn == g.n) {
    g.layout = BinaryGeometry::kScalarA;
  } else if (yn == 1 && xn == g.n) {
    g.layout = BinaryGeometry::kScalarB;
  } else {
    g.layout = BinaryGeometry::kBroadcast;
    // Row-major strides, 0 along broadcast dims; size-1 output dims are
    // dropped and dims that stay contiguous in both operands are merged,
    // so most broadcasts end up with rank 2 or 3.
    std::vector<int64_t> dims, sx, sy;
    int64_t stride_x = 1, stride_y = 1;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t ax = xd[d] == 1 ? 0 : stride_x, ay = yd[d] == 1 ? 0 : stride_y;
      stride_x *= xd[d];
      stride_y *= yd[d];
      if (out_dims[d] == 1) continue;
      if (!dims.empty() && ax == sx.back() * dims.back() && ay == sy.back() * dims.back()) {
        dims.back() *= out_dims[d];
        continue;
      }
      dims.push_back(out_dims[d]);
      sx.push_back(ax);
      sy.push_back(ay);
    }
    if (dims.size() > static_cast<size_t>(BinaryGeometry::kMaxDims)) {
      throw UnimplementedError(std::string(op) + ": broadcasting " + xs.to_string() + " with " +
                               ys.to_string() + " needs more than " +
                               std::to_string(BinaryGeometry::kMaxDims) + " dimensions");
    }
    g.rank = static_cast<int>(dims.size());
    for (int i = 0; i < g.rank; ++i) {  // collected innermost first
      g.dims[i] = dims[g.rank - 1 - i];
      g.a_strides[i] = sx[g.rank - 1 - i];
      g.b_strides[i] = sy[g.rank - 1 - i];
    }
  }
  return g;
}

[[noreturn]] void throw_kernel_error(const char* op, int code) {
  if (code == kernels::kIntegerDivisionByZero) {
    throw InvalidArgumentError(std::string(op) + ": Integer division by zero");
  }
  throw InvalidArgumentError(std::string(op) +
                             ": Integers to negative integer powers are not allowed");
}

#ifdef VARSTATE_HAVE_CUDA
// A device int that kernels raise on failure, read back (with a wait) once.
class DeviceErrorFlag {
 public:
  explicit DeviceErrorFlag(Device& device)
      : device_(device), flag_(static_cast<int*>(device.allocate(sizeof(int)))) {
    device_.memset(flag_, 0, sizeof(int));
  }
  ~DeviceErrorFlag() { device_.deallocate(flag_); }
  DeviceErrorFlag(const DeviceErrorFlag&) = delete;
  DeviceErrorFlag& operator=(const DeviceErrorFlag&) = delete;
  int* get() const { return flag_; }
  int read() const {
    int value = 0;
    copy_bytes(DeviceManager::instance().cpu(), &value, device_, flag_, sizeof(int));
    return value;
  }

 private:
  Device& device_;
  int* flag_;
};
#endif

// out = op(x, y). On a GPU, y may be a host scalar (`y_on_host`): its
// value then goes to the kernel as an argument.
template <typename T>
int run_binary(BinaryOp op, const Tensor& x, const Tensor& y, Tensor& out, const BinaryGeometry& g,
               bool y_on_host) {
  const T* a = static_cast<const T*>(x.raw_data());
  const T* b = static_cast<const T*>(y.raw_data());
  Device& device = out.device();
  const bool predicate = kernels::binary_op_is_predicate(op);
  if (device.is_cpu()) {
    if (predicate) {
      kernels::cpu::predicate<T>(op, a, b, static_cast<bool*>(out.raw_data()), g);
      return kernels::kKernelOk;
    }
    if constexpr (!std::is_same_v<T, bool>) {
      return kernels::cpu::arithmetic<T>(op, a, b, static_cast<T*>(out.raw_data()), g);
    }
    return kernels::kKernelOk;
  }
#ifdef VARSTATE_HAVE_CUDA
  DeviceGuard guard(device);
  if (predicate) {
    kernels::cuda::predicate<T>(op, a, b, static_cast<bool*>(out.raw_data()), g, device.stream());
    return kernels::kKernelOk;
  }
  if constexpr (!std::is_same_v<T, bool>) {
    T* c = static_cast<T*>(out.raw_data());
    const T* host_b = y_on_host ? b : nullptr;
    if (kernels::binary_op_can_fail<T>(op)) {
      DeviceErrorFlag flag(device);
      kernels::cuda::arithmetic<T>(op, a, b, c, g, flag.get(), device.stream(), host_b);
      return flag.read();
    }
    kernels::cuda::arithmetic<T>(op, a, b, c, g, nullptr, device.stream(), host_b);
  }
#endif
  return kernels::kKernelOk;
}

// The dtype true division computes in, as TensorFlow's truediv.
DType truediv_dtype(DType dtype) {
  switch (dtype) {
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kInt16:
    case DType::kUInt16:
      return DType::kFloat;
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt32:
    case DType::kUInt64:
      return DType::kDouble;
    default:
      return dtype;
  }
}

Tensor binary(BinaryOp op, const Tensor& x_in, const Tensor& y_in) {
  const char* name = op_name(op);
  // Named pairs, not structured bindings: lambdas below capture them, which
  // clang before 16 rejects for bindings.
  std::pair<Tensor, Tensor> xy = unify_dtypes(name, x_in, y_in);
  Tensor x = xy.first;
  Tensor y = xy.second;
  if (op == BinaryOp::kDiv && dtype_is_integer(x.dtype()) && !dtype_is_quantized(x.dtype())) {
    const DType to = truediv_dtype(x.dtype());
    x = x.cast(to);
    y = y.cast(to);
  }
  if (!supports(op, x.dtype())) {
    const bool logical = op >= BinaryOp::kLogicalAnd;
    throw TypeError(std::string(name) + ": dtype " + name_of(x.dtype()) + " is not supported" +
                    (logical ? " (logical ops take bool tensors)" : ""));
  }
  std::vector<int64_t> out_dims;
  const BinaryGeometry g = broadcast(name, x.shape(), y.shape(), out_dims);
  Device& device = x.device();
  // A host scalar y of a GPU op travels as a kernel argument, not a copy
  // (a learning rate, a decay: one fewer transfer and allocation a call).
  const bool y_on_host =
      !device.is_cpu() && y.device().is_cpu() && !kernels::binary_op_is_predicate(op) &&
      (g.layout == BinaryGeometry::kScalarB || g.layout == BinaryGeometry::kScalarBoth);
  if (!y_on_host) y = y.on(device);
  const DType out_dtype = kernels::binary_op_is_predicate(op) ? DType::kBool : x.dtype();
  Tensor out(out_dtype, TensorShape(out_dims), device);
  if (g.n == 0) return out;
  const int status = dispatch_kernel_type(x.dtype(), name, [&](auto tag) {
    return run_binary<decltype(tag)>(op, x, y, out, g, y_on_host);
  });
  if (status != kernels::kKernelOk) throw_kernel_error(name, status);
  return out;
}

Tensor unary(UnaryOp op, const Tensor& x) {
  const char* name = op_name(op);
  check_valid(name, x, "x");
  if (!supports(op, x.dtype())) {
    throw TypeError(std::string(name) + ": dtype " + name_of(x.dtype()) + " is not supported");
  }
  Device& device = x.device();
  const bool magnitude = op == UnaryOp::kAbs && dtype_is_complex(x.dtype());
  const DType out_dtype = !magnitude                       ? x.dtype()
                          : x.dtype() == DType::kComplex64 ? DType::kFloat
                                                           : DType::kDouble;
  Tensor out(out_dtype, x.shape(), device);
  const int64_t n = x.num_elements();
  if (n == 0) return out;
  dispatch_kernel_type(x.dtype(), name, [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x.raw_data());
    if constexpr (kernels::kIsComplex<T>) {
      using R = typename T::value_type;
      if (magnitude) {
        R* o = static_cast<R*>(out.raw_data());
        if (device.is_cpu()) {
          kernels::cpu::complex_abs<T, R>(in, o, n);
        } else {
#ifdef VARSTATE_HAVE_CUDA
          DeviceGuard guard(device);
          kernels::cuda::complex_abs<T, R>(in, o, n, device.stream());
#endif
        }
        return 0;
      }
    }
    T* o = static_cast<T*>(out.raw_data());
    if (device.is_cpu()) {
      kernels::cpu::unary<T>(op, in, o, n);
    } else {
#ifdef VARSTATE_HAVE_CUDA
      DeviceGuard guard(device);
      kernels::cuda::unary<T>(op, in, o, n, device.stream());
#endif
    }
    return 0;
  });
  return out;
}

bool matmul_supports(DType dtype) {
  switch (dtype) {
    case DType::kHalf:
    case DType::kBFloat16:
    case DType::kFloat:
    case DType::kDouble:
    case DType::kComplex64:
    case DType::kComplex128:
    case DType::kInt32:
      return true;
    default:
      return false;
  }
}

}  // namespace

namespace {

// How `t` enters a one-pass multiply_add whose result has `shape`, seen as
// rows x k (rank 2: its two dimensions, else one row): as every element, as
// one value, or as a [rows, 1] column; nullopt for anything else.
template <typename T>
std::optional<kernels::cpu::MultiplyAddOperand<T>> madd_operand(const Tensor& t,
                                                                const TensorShape& shape) {
  using kernels::cpu::OperandKind;
  const T* data = static_cast<const T*>(t.raw_data());
  if (t.shape() == shape) return {{data, OperandKind::kElements}};
  if (t.num_elements() == 1 && t.shape().rank() <= shape.rank()) {
    return {{data, OperandKind::kScalar}};
  }
  if (shape.rank() == 2 && t.shape() == TensorShape{shape.dim(0), 1}) {
    return {{data, OperandKind::kColumn}};
  }
  return std::nullopt;
}

// x * y + z * w in one pass over the result, when the operands allow it
// (see multiply_add in math_ops.h); an invalid tensor otherwise.
template <typename T>
Tensor fused_multiply_add(const std::array<const Tensor*, 4>& ops) {
  const Tensor* largest = ops[0];
  for (const Tensor* t : ops) {
    if (t->num_elements() > largest->num_elements()) largest = t;
  }
  const TensorShape shape = largest->shape();
  if (shape.num_elements() == 0) return Tensor();
  std::array<kernels::cpu::MultiplyAddOperand<T>, 4> operands;
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto operand = madd_operand<T>(*ops[i], shape);
    if (!operand) return Tensor();
    operands[i] = *operand;
  }
  const int64_t rows = shape.rank() == 2 ? shape.dim(0) : 1;
  const int64_t k = shape.rank() == 2 ? shape.dim(1) : shape.num_elements();
  Tensor out(ops[0]->dtype(), shape, DeviceManager::instance().cpu());
  kernels::cpu::multiply_add<T>(operands[0], operands[1], operands[2], operands[3],
                                static_cast<T*>(out.raw_data()), rows, k);
  return out;
}

}  // namespace

Tensor multiply_add(const Tensor& x, const Tensor& y, const Tensor& z, const Tensor& w) {
  const std::array<const Tensor*, 4> ops = {&x, &y, &z, &w};
  const bool one_pass = std::all_of(ops.begin(), ops.end(), [&](const Tensor* t) {
    return t->valid() && t->on_cpu() && t->dtype() == x.dtype();
  });
  if (one_pass && x.dtype() == DType::kFloat) {
    if (Tensor out = fused_multiply_add<float>(ops); out.valid()) return out;
  } else if (one_pass && x.dtype() == DType::kDouble) {
    if (Tensor out = fused_multiply_add<double>(ops); out.valid()) return out;
  }
  return add(multiply(x, y), multiply(z, w));
}

Tensor add(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kAdd, x, y); }
Tensor subtract(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kSub, x, y); }
Tensor multiply(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kMul, x, y); }
Tensor divide(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kDiv, x, y); }
Tensor floordiv(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kFloorDiv, x, y); }
Tensor mod(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kFloorMod, x, y); }
Tensor pow(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kPow, x, y); }
Tensor maximum(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kMaximum, x, y); }
Tensor minimum(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kMinimum, x, y); }
Tensor less(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kLess, x, y); }
Tensor less_equal(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kLessEqual, x, y); }
Tensor greater(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kGreater, x, y); }
Tensor greater_equal(const Tensor& x, const Tensor& y) {
  return binary(BinaryOp::kGreaterEqual, x, y);
}
Tensor equal(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kEqual, x, y); }
Tensor not_equal(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kNotEqual, x, y); }
Tensor logical_and(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kLogicalAnd, x, y); }
Tensor logical_or(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kLogicalOr, x, y); }
Tensor logical_xor(const Tensor& x, const Tensor& y) { return binary(BinaryOp::kLogicalXor, x, y); }

Tensor logical_not(const Tensor& x) {
  check_valid("LogicalNot", x, "x");
  if (x.dtype() != DType::kBool) {
    throw TypeError("LogicalNot: dtype " + name_of(x.dtype()) +
                    " is not supported (logical ops take bool tensors)");
  }
  return unary(UnaryOp::kInvert, x);
}

Tensor negative(const Tensor& x) { return unary(UnaryOp::kNegative, x); }
Tensor abs(const Tensor& x) { return unary(UnaryOp::kAbs, x); }
Tensor invert(const Tensor& x) { return unary(UnaryOp::kInvert, x); }

Tensor matmul(const Tensor& a_in, const Tensor& b_in, bool transpose_a, bool transpose_b) {
  std::pair<Tensor, Tensor> ab = unify_dtypes("MatMul", a_in, b_in);
  Tensor a = ab.first;
  Tensor b = ab.second;
  const std::string shapes =
      "In[0]: " + a.shape().to_string() + (transpose_a ? " (transposed)" : "") +
      ", In[1]: " + b.shape().to_string() + (transpose_b ? " (transposed)" : "");
  if (a.rank() != 2 || b.rank() != 2) {
    throw ValueError("MatMul: In[0] and In[1] must be matrices (rank 2): " + shapes);
  }
  const int64_t m = a.shape().dim(transpose_a ? 1 : 0), k = a.shape().dim(transpose_a ? 0 : 1);
  const int64_t k_b = b.shape().dim(transpose_b ? 1 : 0), n = b.shape().dim(transpose_b ? 0 : 1);
  if (k != k_b) throw ValueError("MatMul: Matrix size-incompatible: " + shapes);
  if (!matmul_supports(a.dtype())) {
    throw TypeError("MatMul: dtype " + name_of(a.dtype()) + " is not supported");
  }
  Device& device = a.device();
  b = b.on(device);
  Tensor out(a.dtype(), {m, n}, device);
  if (m * n == 0) return out;
  if (k == 0) {
    device.memset(out.raw_data(), 0, out.nbytes());
    return out;
  }
  dispatch_kernel_type(a.dtype(), "MatMul", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kernels::kIsFloating<T> || kernels::kIsComplex<T> || std::is_same_v<T, int32_t>) {
      const T* pa = static_cast<const T*>(a.raw_data());
      const T* pb = static_cast<const T*>(b.raw_data());
      T* pc = static_cast<T*>(out.raw_data());
      if (device.is_cpu()) {
        kernels::cpu::matmul<T>(pa, pb, pc, m, n, k, transpose_a, transpose_b);
      } else {
#ifdef VARSTATE_HAVE_CUDA
        kernels::cuda::matmul<T>(pa, pb, pc, m, n, k, transpose_a, transpose_b, device.index(),
                                 device.stream());
#endif
      }
    }
    return 0;
  });
  return out;
}

Tensor operator+(const Tensor& x, const Tensor& y) { return add(x, y); }
Tensor operator-(const Tensor& x, const Tensor& y) { return subtract(x, y); }
Tensor operator*(const Tensor& x, const Tensor& y) { return multiply(x, y); }
Tensor operator/(const Tensor& x, const Tensor& y) { return divide(x, y); }
Tensor operator%(const Tensor& x, const Tensor& y) { return mod(x, y); }
Tensor operator-(const Tensor& x) { return negative(x); }
Tensor operator~(const Tensor& x) { return invert(x); }
Tensor operator<(const Tensor& x, const Tensor& y) { return less(x, y); }
Tensor operator<=(const Tensor& x, const Tensor& y) { return less_equal(x, y); }
Tensor operator>(const Tensor& x, const Tensor& y) { return greater(x, y); }
Tensor operator>=(const Tensor& x, const Tensor& y) { return greater_equal(x, y); }
Tensor operator&(const Tensor& x, const Tensor& y) { return logical_and(x, y); }
Tensor operator|(const Tensor& x, const Tensor& y) { return logical_or(x, y); }
Tensor operator^(const Tensor& x, const Tensor& y) { return logical_xor(x, y); }

}  // namespace varstate
