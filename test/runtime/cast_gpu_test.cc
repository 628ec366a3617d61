// The CUDA cast kernel against the CPU cast for every pair of numeric
// storage dtypes and bool, on values every dtype holds exactly, and on the
// float -> integer edge cases (NaN, infinities, the ends of each range).
#include <catch2/catch.hpp>

#include "cast_edge_cases.h"
#include "tensor_util.h"
#include "varstate/cast.h"
#include "varstate/device_manager.h"

using namespace varstate;
using namespace varstate::testing;

TEST_CASE("GPU casts equal the CPU's for every dtype pair", "[gpu][cast]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  const std::vector<DType> dtypes = {
      DType::kFloat,     DType::kDouble,     DType::kHalf,   DType::kBFloat16,
      DType::kInt8,      DType::kInt16,      DType::kInt32,  DType::kInt64,
      DType::kUInt8,     DType::kUInt16,     DType::kUInt32, DType::kUInt64,
      DType::kComplex64, DType::kComplex128, DType::kBool,   DType::kQInt8};
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{(1 << 18) + 5}}) {
    for (DType from : dtypes) {
      Tensor src = from == DType::kBool
                       ? random_tensor(DType::kInt32, {n}, kSeed, 0, 1).cast(DType::kBool)
                       : random_tensor(from, {n}, kSeed + n, 0, 100);
      Tensor on_gpu = src.to(gpu);
      for (DType to : dtypes) {
        CAPTURE(n, dtype_name(from), dtype_name(to));
        Tensor g = on_gpu.cast(to);
        CHECK(&g.device() == &gpu);
        CHECK(compare_tensors(g, src.cast(to)) == "");
      }
    }
  }
}

TEST_CASE("GPU float -> integer casts at the edges equal the CPU's", "[gpu][cast]") {
  Device& gpu = DeviceManager::instance().gpu(0);
  Device& cpu = DeviceManager::instance().cpu();
  for (const CastEdgeTable& table : cast_edge_tables()) {
    for (DType from : cast_edge_sources()) {
      CAPTURE(dtype_name(from), dtype_name(table.to));
      const auto [host_src, cases] = cast_edge_inputs(table, from, cpu);
      const std::vector<__int128> on_cpu = int128_values(cast_tensor(host_src, table.to));
      const std::vector<__int128> on_gpu = int128_values(cast_tensor(host_src.to(gpu), table.to));
      REQUIRE(on_gpu.size() == cases.size());
      for (size_t i = 0; i < cases.size(); ++i) {
        CAPTURE(cases[i].input, int128_string(on_cpu[i]), int128_string(on_gpu[i]));
        CHECK(on_gpu[i] == on_cpu[i]);
        CHECK(on_gpu[i] == cases[i].want);
      }
    }
  }
}
