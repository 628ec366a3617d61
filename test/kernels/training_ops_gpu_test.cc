// CUDA training-op kernels against the CPU ones (which training_ops_test.cc
// checks against the reference loop): every op and dtype, dense and sparse
// with duplicate indices, byte for byte (both follow
// kernels/training_functors.h and nvcc runs with --fmad=false; Ftrl with an
// lr_power other than -0.5 calls pow, which the device rounds differently,
// so it is left to the runtime tests' tolerance), and reproducible run to
// run.
#include <catch2/catch.hpp>

#include "cuda_test_util.h"
#include "kernels/cpu/training_ops.h"
#include "kernels/cuda/training_ops.h"
#include "training_test_util.h"

using namespace varstate;
using namespace varstate::testing;
namespace cpu = varstate::kernels::cpu;
namespace gpu = varstate::kernels::cuda;

namespace {

// Runs the op on the GPU over a copy of `d`; returns the results.
template <typename T, typename Index>
TrainingData<T> run_gpu(TrainingOp op, const kernels::TrainingHyper& h, const TrainingData<T>& d,
                        int64_t rows, int64_t width, const std::vector<Index>* indices) {
  const Stream stream;
  const DeviceArray<T> var(d.var, kExactBytes), s0(d.s0, kExactBytes), s1(d.s1, kExactBytes),
      s2(d.s2, kExactBytes), grad(d.grad, kExactBytes);
  const kernels::TrainingSlots<T> slots{var.get(), s0.get(), s1.get(), s2.get()};
  if (indices == nullptr) {
    gpu::apply_dense<T>(op, h, slots, grad.get(), rows * width, width, stream.get());
  } else {
    const DeviceArray<Index> ids(*indices, kExactBytes);
    gpu::apply_sparse<T, Index>(op, h, slots, rows, width, ids.get(),
                                static_cast<int64_t>(indices->size()), grad.get(), true,
                                scratch_on(stream.get()), stream.get());
    stream.sync();
  }
  stream.sync();
  TrainingData<T> out = d;
  out.var = var.to_host();
  out.s0 = s0.to_host();
  out.s1 = s1.to_host();
  out.s2 = s2.to_host();
  return out;
}

template <typename T, typename Index>
void compare(TrainingOp op, int64_t rows, int64_t width, const std::vector<Index>* indices,
             double l1 = 0.01, double l2 = 0.02) {
  CAPTURE(static_cast<int>(op), rows, width, indices != nullptr, l1, l2, dtype_name(dtype_of<T>));
  const auto h = test_hyper(false, -0.5, 0, l1, l2);
  const int64_t grad_rows = indices ? static_cast<int64_t>(indices->size()) : rows;
  TrainingData<T> want = training_data<T>(rows * width, rows, grad_rows * width, kSeed + rows, op);
  const TrainingData<T> input = want;
  if (indices == nullptr) {
    cpu::apply_dense<T>(op, h, want.slots(), want.grad.data(), rows * width, width);
  } else {
    cpu::apply_sparse<T, Index>(op, h, want.slots(), rows, width, indices->data(), grad_rows,
                                want.grad.data(), true);
  }
  const TrainingData<T> got = run_gpu<T, Index>(op, h, input, rows, width, indices);
  CHECK(training_difference(got.var, want.var) == "");
  CHECK(training_difference(got.s0, want.s0) == "");
  CHECK(training_difference(got.s1, want.s1) == "");
  CHECK(training_difference(got.s2, want.s2) == "");
  const TrainingData<T> again = run_gpu<T, Index>(op, h, input, rows, width, indices);
  CHECK(training_difference(got.var, again.var) == "");
}

}  // namespace

TEMPLATE_TEST_CASE("gpu training ops equal the cpu kernels", "[training][gpu]", float, double, half,
                   bfloat16) {
  for (TrainingOp op : all_training_ops()) {
    for (auto [rows, width] : {std::pair{1, 1}, {7, 3}, {300, 64}, {1025, 129}}) {
      if (op != TrainingOp::kLazyAdam) compare<TestType, int64_t>(op, rows, width, nullptr);
      if (op == TrainingOp::kGradientDescent) continue;
      const auto dups = duplicate_indices<int32_t>(rows * 2, rows, kSeed);
      const auto unique = unique_indices<int64_t>((rows + 1) / 2, rows, kSeed);
      compare<TestType, int32_t>(op, rows, width, &dups);
      compare<TestType, int64_t>(op, rows, width, &unique);
      if (op == TrainingOp::kProximalGradientDescent || op == TrainingOp::kProximalAdagrad) {
        compare<TestType, int64_t>(op, rows, width, nullptr, 0.0);  // l1 = 0
        compare<TestType, int32_t>(op, rows, width, &dups, 0.0);
        compare<TestType, int64_t>(op, rows, width, nullptr, 0.01, 0.0);  // l2 = 0
      }
    }
  }
}
