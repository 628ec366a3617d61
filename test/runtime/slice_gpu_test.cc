// Slicing on the GPU compared with the CPU: every element size, negative
// indices and steps, ellipses and newaxes, slice assigns (also from a CPU value), and errors
// that leave the GPU tensor unchanged.
#include <catch2/catch.hpp>

#include "tensor_util.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/slice.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

std::vector<std::vector<SliceSpec>> slice_cases() {
  return {
      {},
      {Slice::range(1, 3)},
      {Slice::range({}, {}, -1)},
      {Slice::range(-2, {}), Slice::range({}, -1), Slice::range({}, {}, 2)},
      {Slice::range(10, -10, -2), Slice::range(-100, 100, 3)},
      {Slice::index(-1), Slice::range(1, 2), Slice::index(0)},
      {Slice::all(), Slice::index(-5)},
      {Slice::range(2, 2)},
      {Slice::ellipsis(), Slice::index(1)},
      {Slice::index(-1), Slice::ellipsis(), Slice::range({}, {}, -2)},
      {Slice::all(), Slice::newaxis(), Slice::range(1, 3)},
      {Slice::newaxis(), Slice::ellipsis(), Slice::index(0), Slice::newaxis()},
  };
}

}  // namespace

TEST_CASE("GPU strided_slice equals the CPU's for every element size", "[gpu][slice]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  for (DType dtype :
       {DType::kInt8, DType::kHalf, DType::kFloat, DType::kInt64, DType::kComplex128}) {
    Tensor t = random_tensor(dtype, {4, 5, 6}, kSeed);
    Tensor g = t.to(gpu);
    int c = 0;
    for (const auto& specs : slice_cases()) {
      CAPTURE(dtype_name(dtype), c++);
      Tensor s = strided_slice(g, specs);
      CHECK(&s.device() == &gpu);
      CHECK(compare_tensors(s, strided_slice(t, specs)) == "");
    }
  }
  Tensor big = random_tensor(DType::kFloat, {1000, 3, 700}, kSeed);
  const std::vector<SliceSpec> specs = {Slice::range({}, {}, -3), Slice::index(1),
                                        Slice::range(5, -5, 2)};
  CHECK(compare_tensors(strided_slice(big.to(gpu), specs), strided_slice(big, specs)) == "");
}

TEST_CASE("GPU slice assign writes only the region", "[gpu][slice]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  Tensor a = Tensor({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}, {7.f, 8.f, 9.f}}).to(gpu);
  strided_slice_assign(a, {Slice::range({}, 2), Slice::range({}, 2)},
                       Tensor({{22.f, 22.f}, {22.f, 22.f}}).to(gpu));
  CHECK(a.to_vector<float>() == std::vector<float>{22, 22, 3, 22, 22, 6, 7, 8, 9});
  // A CPU value is copied to the GPU first.
  strided_slice_assign(a, {Slice::index(2), Slice::range({}, {}, -2)}, Tensor({70.f, 90.f}));
  CHECK(a.to_vector<float>() == std::vector<float>{22, 22, 3, 22, 22, 6, 90, 8, 70});
  for (DType dtype :
       {DType::kUInt8, DType::kBFloat16, DType::kInt32, DType::kDouble, DType::kComplex128}) {
    CAPTURE(dtype_name(dtype));
    Tensor cpu_t = random_tensor(dtype, {6, 7, 8}, kSeed);
    Tensor gpu_t = cpu_t.to(gpu);
    for (const std::vector<SliceSpec>& specs :
         {std::vector<SliceSpec>{Slice::range(-1, 0, -2), Slice::index(3), Slice::range(1, {}, 3)},
          std::vector<SliceSpec>{Slice::ellipsis(), Slice::newaxis(), Slice::range({}, {}, -3)},
          std::vector<SliceSpec>{Slice::newaxis(), Slice::index(2), Slice::ellipsis()}}) {
      Tensor value = random_tensor(dtype, slice_shape(cpu_t.shape(), specs), kSeed + 1);
      strided_slice_assign(cpu_t, specs, value);
      strided_slice_assign(gpu_t, specs, value.to(gpu));
      CHECK(compare_tensors(gpu_t, cpu_t) == "");
    }
  }
  const std::vector<float> before = a.to_vector<float>();
  CHECK_THROWS_AS(strided_slice_assign(a, {Slice::index(0)}, Tensor({1.f, 2.f}).to(gpu)),
                  InvalidArgumentError);
  CHECK_THROWS_AS(
      strided_slice_assign(a, {Slice::range(2, 0)}, Tensor::zeros(DType::kFloat, {0, 3}, gpu)),
      ValueError);
  CHECK_THROWS_AS(strided_slice_assign(a, {Slice::ellipsis(), Slice::ellipsis()}, a.clone()),
                  ValueError);
  CHECK(a.to_vector<float>() == before);
}
