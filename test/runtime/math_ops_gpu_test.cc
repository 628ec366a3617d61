// Element-wise ops and matmul on the GPU compared with the CPU on seeded
// random inputs: exact for integers and bool, per-dtype tolerance for
// floats. Covers the vectorized, scalar and broadcast paths, unaligned
// sizes, operands on different devices, and the device error flag.
#include <catch2/catch.hpp>

#include <functional>

#include "tensor_util.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/math_ops.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;

Tensor random_operand(DType dtype, const TensorShape& shape, uint64_t seed, int lo = -8,
                      int hi = 8) {
  if (dtype == DType::kBool)
    return random_tensor(DType::kInt32, shape, seed, 0, 1).cast(DType::kBool);
  return random_tensor(dtype, shape, seed, lo, hi);
}

const std::vector<std::pair<TensorShape, TensorShape>> kShapes = {
    {{1}, {1}},
    {{7}, {7}},
    {{255}, {}},
    {{}, {2051}},
    {{3, 1}, {1, 4}},
    {{2, 3, 4}, {4}},
    {{4, 1, 3, 1, 2}, {1, 5, 1, 6, 1}},
    {{1 << 20}, {1 << 20}},
    {{513, 1}, {1, 301}},
    {{0, 3}, {3}},
};

void check_gpu_binary(const char* what, const BinaryFn& op, const std::vector<DType>& dtypes,
                      int lo = -8, int hi = 8, bool nonzero_y = false) {
  Device& gpu = DeviceManager::instance().gpu(0);
  int seed = 0;
  for (DType dtype : dtypes) {
    for (const auto& [xs, ys] : kShapes) {
      CAPTURE(what, dtype_name(dtype), xs.to_string(), ys.to_string(), kSeed);
      Tensor x = random_operand(dtype, xs, kSeed + seed++, lo, hi);
      Tensor y = random_operand(dtype, ys, kSeed + 1000 + seed++, lo, hi);
      if (nonzero_y) y = y + equal(y, 0).cast(dtype);  // no zero divisors
      Tensor on_cpu = op(x, y);
      Tensor on_gpu = op(x.to(gpu), y.to(gpu));
      CHECK(&on_gpu.device() == &gpu);
      CHECK(compare_tensors(on_gpu, on_cpu) == "");
      if (y.num_elements() == 1) {
        // A host scalar y: its value is the kernel's argument, not a copy.
        Tensor host_y = op(x.to(gpu), y);
        CHECK(&host_y.device() == &gpu);
        CHECK(compare_tensors(host_y, on_cpu) == "");
      }
    }
  }
}

const std::vector<DType> kAll = {
    DType::kFloat,  DType::kDouble, DType::kHalf,      DType::kBFloat16,  DType::kInt8,
    DType::kInt16,  DType::kInt32,  DType::kInt64,     DType::kUInt8,     DType::kUInt16,
    DType::kUInt32, DType::kUInt64, DType::kComplex64, DType::kComplex128};
const std::vector<DType> kReal = {DType::kFloat,    DType::kDouble, DType::kHalf,
                                  DType::kBFloat16, DType::kInt8,   DType::kInt32,
                                  DType::kInt64,    DType::kUInt8,  DType::kUInt16};

}  // namespace

TEST_CASE("GPU arithmetic equals the CPU's", "[gpu][math_ops]") {
  check_gpu_binary("add", add, kAll);
  check_gpu_binary("subtract", subtract, kAll);
  check_gpu_binary("multiply", multiply, kAll);
  check_gpu_binary("divide", divide,
                   {DType::kFloat, DType::kDouble, DType::kHalf, DType::kInt32, DType::kInt16,
                    DType::kComplex64},
                   -8, 8, true);
  check_gpu_binary("floordiv", floordiv, kReal, -8, 8, true);
  check_gpu_binary("mod", mod, kReal, -8, 8, true);
  check_gpu_binary("maximum", maximum, kReal);
  check_gpu_binary("minimum", minimum, kReal);
  auto pow_op = [](const Tensor& a, const Tensor& b) { return varstate::pow(a, b); };
  check_gpu_binary("pow", pow_op, {DType::kInt32, DType::kInt64, DType::kInt8}, 0, 5);
  check_gpu_binary("pow", pow_op, {DType::kFloat, DType::kDouble, DType::kComplex64}, 1, 4);
}

TEST_CASE("GPU multiply_add equals the CPU's one pass bit for bit", "[gpu][math_ops]") {
  // float32 without FMA contraction on either side (nvcc runs with
  // --fmad=false): the GPU's two multiplies and add give the CPU's bits.
  Device& gpu = DeviceManager::instance().gpu(0);
  const Tensor e = random_operand(DType::kFloat, {4099, 1}, 1) * Tensor(0.37f);
  const Tensor v = random_operand(DType::kFloat, {4099, 16}, 2) * Tensor(0.11f);
  const Tensor u = random_operand(DType::kFloat, {4099, 16}, 3) * Tensor(0.23f);
  const Tensor l2 = Tensor(0.002f);
  const Tensor host = multiply_add(e, v, u, l2);
  const Tensor device = multiply_add(e.to(gpu), v.to(gpu), u.to(gpu), l2.to(gpu));
  CHECK(&device.device() == &gpu);
  CHECK(same_bits(device.to_host(), host));
}

TEST_CASE("GPU comparisons and logical ops equal the CPU's", "[gpu][math_ops]") {
  check_gpu_binary("less", less, kReal);
  check_gpu_binary("less_equal", less_equal, kReal);
  check_gpu_binary("greater", greater, kReal);
  check_gpu_binary("greater_equal", greater_equal, kReal);
  check_gpu_binary("equal", equal, kAll);
  check_gpu_binary("not_equal", not_equal, {DType::kBool, DType::kComplex128, DType::kInt16});
  check_gpu_binary("logical_and", logical_and, {DType::kBool});
  check_gpu_binary("logical_or", logical_or, {DType::kBool});
  check_gpu_binary("logical_xor", logical_xor, {DType::kBool});
}

TEST_CASE("GPU unary ops equal the CPU's", "[gpu][math_ops]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  for (int64_t n : {int64_t{1}, int64_t{37}, int64_t{(1 << 20) + 3}}) {
    for (DType dtype : {DType::kFloat, DType::kDouble, DType::kHalf, DType::kBFloat16, DType::kInt8,
                        DType::kInt32, DType::kInt64, DType::kComplex64, DType::kComplex128}) {
      CAPTURE(dtype_name(dtype), n);
      Tensor x = random_operand(dtype, {n}, kSeed + n);
      CHECK(compare_tensors(negative(x.to(gpu)), negative(x)) == "");
      CHECK(compare_tensors(abs(x.to(gpu)), abs(x)) == "");
    }
    for (DType dtype : {DType::kBool, DType::kInt8, DType::kUInt16, DType::kInt64}) {
      Tensor x = random_operand(dtype, {n}, kSeed + n);
      CHECK(compare_tensors(invert(x.to(gpu)), invert(x)) == "");
    }
  }
}

TEST_CASE("GPU integer division by zero raises and does not crash", "[gpu][math_ops]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  Tensor a = Tensor({1, 2, 3}).to(gpu);
  Tensor z = Tensor({1, 0, 1}).to(gpu);
  CHECK_THROWS_AS(floordiv(a, z), InvalidArgumentError);
  CHECK_THROWS_WITH(mod(a, z), Catch::Contains("Integer division by zero"));
  CHECK_THROWS_AS(varstate::pow(a, Tensor({-1, 1, 1}).to(gpu)), InvalidArgumentError);
  // The same through a host scalar divisor (the kernel's argument).
  CHECK_THROWS_WITH(floordiv(a, Tensor(0)), Catch::Contains("Integer division by zero"));
  CHECK_THROWS_AS(varstate::pow(a, Tensor(-1)), InvalidArgumentError);
  // The device is still usable afterwards.
  CHECK(floordiv(a, 2).to_vector<int32_t>() == std::vector<int32_t>{0, 1, 1});
}

TEST_CASE("a CPU operand goes to the first operand's GPU (a scalar as the kernel's argument)",
          "[gpu][math_ops]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  Tensor x = Tensor({1.f, 2.f, 3.f}).to(gpu);
  Tensor r = x + Tensor({10.f, 20.f, 30.f});
  CHECK(&r.device() == &gpu);
  CHECK(r.to_vector<float>() == std::vector<float>{11.f, 22.f, 33.f});
  Tensor l = Tensor({10.f, 20.f, 30.f}) - x;  // runs on the CPU
  CHECK(l.on_cpu());
  CHECK(l.to_vector<float>() == std::vector<float>{9.f, 18.f, 27.f});
  CHECK(((x * 2) > 3).to_vector<bool>() == std::vector<bool>{false, true, true});
}

TEST_CASE("GPU matmul equals the CPU's", "[gpu][math_ops][matmul]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  for (DType dtype : {DType::kFloat, DType::kDouble, DType::kHalf, DType::kBFloat16,
                      DType::kComplex64, DType::kComplex128, DType::kInt32}) {
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                           {3, 5, 4},
                           {65, 33, 129},
                           {256, 128, 64}}) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          CAPTURE(dtype_name(dtype), m, n, k, ta, tb);
          const int r = dtype == DType::kBFloat16 ? 1 : 3;
          Tensor a =
              random_operand(dtype, ta ? TensorShape{k, m} : TensorShape{m, k}, kSeed + m, -r, r);
          Tensor b =
              random_operand(dtype, tb ? TensorShape{n, k} : TensorShape{k, n}, kSeed + n, -r, r);
          CHECK(compare_tensors(matmul(a.to(gpu), b.to(gpu), ta, tb), matmul(a, b, ta, tb)) == "");
        }
      }
    }
  }
}
