// Dense updates on the GPU compared with the CPU kernels on random data,
// every dtype, sizes that straddle vector and block boundaries, unaligned
// views, and values that live on another device.
#include <catch2/catch.hpp>

#include "tensor_util.h"
#include "varstate/dense_update.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

void apply(int op, Tensor& t, const Tensor& v) {
  if (op == 0) assign(t, v);
  if (op == 1) assign_add(t, v);
  if (op == 2) assign_sub(t, v);
}

}  // namespace

TEST_CASE("GPU dense updates equal the CPU's for every dtype", "[gpu][dense_update]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{255}, int64_t{256 * 8 + 3}, int64_t{1} << 20}) {
    for (DType dtype :
         {DType::kFloat, DType::kDouble, DType::kHalf, DType::kBFloat16, DType::kInt8,
          DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8, DType::kUInt16,
          DType::kUInt32, DType::kUInt64, DType::kComplex64, DType::kComplex128, DType::kQInt8}) {
      for (int op = 0; op < 3; ++op) {
        for (bool scalar : {false, true}) {
          CAPTURE(dtype_name(dtype), n, op, scalar, kSeed);
          Tensor cpu_t = random_tensor(dtype, {n}, kSeed + n + op);
          Tensor value =
              random_tensor(dtype, scalar ? TensorShape{} : TensorShape{n}, kSeed + 7 * n);
          Tensor gpu_t = cpu_t.to(gpu);
          Tensor gpu_v = value.to(gpu);
          apply(op, cpu_t, value);
          apply(op, gpu_t, gpu_v);
          CHECK(&gpu_t.device() == &gpu);
          CHECK(compare_tensors(gpu_t, cpu_t).empty());
        }
      }
    }
  }
}

TEST_CASE("a value on the CPU updates a GPU tensor (copied first)", "[gpu][dense_update]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  Tensor t = Tensor({1.f, 2.f, 3.f}).to(gpu);
  assign_add(t, Tensor({10.f, 20.f, 30.f}));
  assign_sub(t, 1);
  CHECK(t.to_vector<float>() == std::vector<float>{10.f, 21.f, 32.f});
  Tensor cpu_target({0.f, 0.f, 0.f});
  assign(cpu_target, t);
  CHECK(cpu_target.to_vector<float>() == std::vector<float>{10.f, 21.f, 32.f});
}

TEST_CASE("bad GPU updates leave the target unchanged", "[gpu][dense_update]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  Tensor t = Tensor({{1.f, 2.f}, {3.f, 4.f}}).to(gpu);
  CHECK_THROWS_AS(assign(t, Tensor({1.f, 2.f, 3.f}).to(gpu)), ValueError);
  CHECK_THROWS_AS(assign_add(t, Tensor({1, 2, 3, 4}).cast(DType::kInt32).reshaped({2, 2})),
                  TypeError);
  CHECK(t.to_vector<float>() == std::vector<float>{1.f, 2.f, 3.f, 4.f});
}

TEST_CASE("large GPU updates past 2^31 bytes use 64-bit indexing", "[gpu][dense_update][large]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  const int64_t n = (int64_t{1} << 31) + 17;  // int8 elements: > 2^31 indices
  if (gpu.total_memory() < 3 * static_cast<size_t>(n)) {
    WARN("not enough GPU memory for the large-index test");
    return;
  }
  Tensor t = Tensor::zeros(DType::kInt8, {n}, gpu);
  assign_add(t, Tensor(int8_t{3}).strongly_typed());
  // Closed form: every element is 3. Check the tail past 2^31.
  Tensor host = t.to_host();
  const int8_t* p = host.data<int8_t>();
  CHECK(p[0] == 3);
  CHECK(p[(int64_t{1} << 31) - 1] == 3);
  CHECK(p[n - 1] == 3);
}
