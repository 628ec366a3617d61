// CPU training-op kernels against the naive reference loop
// (training_test_util.h): every op and dtype, dense and sparse, odd sizes,
// sizes large enough for the thread pool, unique and duplicate indices of
// both index types, byte for byte. [threads] runs again under
// VARSTATE_CPU_THREADS=3 (tests.cmake): the results must not change.
#include <catch2/catch.hpp>

#include <random>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/training_ops.h"
#include "training_test_util.h"

using namespace varstate;
using namespace varstate::testing;
namespace cpu = varstate::kernels::cpu;

namespace {

template <typename T>
void check_same(TrainingData<T>& got, TrainingData<T>& want) {
  CHECK(training_difference(got.var, want.var) == "");
  CHECK(training_difference(got.s0, want.s0) == "");
  CHECK(training_difference(got.s1, want.s1) == "");
  CHECK(training_difference(got.s2, want.s2) == "");
}

template <typename T>
void dense_case(TrainingOp op, int64_t rows, int64_t width, bool nesterov, double lr_power,
                double shrinkage = -1, double l1 = 0.01, double l2 = 0.02) {
  if (shrinkage < 0) shrinkage = lr_power == -0.5 ? 0.0 : 0.03;
  CAPTURE(static_cast<int>(op), rows, width, nesterov, lr_power, shrinkage, l1, l2,
          dtype_name(dtype_of<T>));
  const int64_t n = rows * width;
  const auto h = test_hyper(nesterov, lr_power, shrinkage, l1, l2);
  TrainingData<T> got = training_data<T>(n, rows, n, kSeed + n, op);
  TrainingData<T> want = got;
  cpu::apply_dense<T>(op, h, got.slots(), got.grad.data(), n, width);
  reference_apply<T, int64_t>(op, h, want, rows, width, nullptr);
  check_same(got, want);
  if (n > 1) CHECK(got.var != training_data<T>(n, rows, n, kSeed + n, op).var);  // not a no-op
}

// The sparse update of `indices` against the reference loop, with the
// distinct rows numbered each way (sorted, looked up) and chosen per call.
template <typename T, typename Index>
void sparse_indices_case(TrainingOp op, const kernels::TrainingHyper& h, int64_t rows,
                         int64_t width, const std::vector<Index>& indices) {
  const auto n = static_cast<int64_t>(indices.size());
  const TrainingData<T> start = training_data<T>(rows * width, rows, n * width, kSeed + rows, op);
  TrainingData<T> want = start;
  reference_apply<T, Index>(op, h, want, rows, width, &indices);
  for (const auto numbering :
       {cpu::RowNumbering::kSort, cpu::RowNumbering::kLookUp, cpu::RowNumbering::kAuto}) {
    CAPTURE(static_cast<int>(numbering));
    TrainingData<T> got = start;
    cpu::sparse_row_numbering() = numbering;
    cpu::apply_sparse<T, Index>(op, h, got.slots(), rows, width, indices.data(), n, got.grad.data(),
                                /*deterministic=*/false);
    cpu::sparse_row_numbering() = cpu::RowNumbering::kAuto;
    check_same(got, want);
  }
}

template <typename T, typename Index>
void sparse_case(TrainingOp op, int64_t rows, int64_t width, int64_t n, bool duplicates,
                 bool nesterov = false, double lr_power = -0.5, double shrinkage = 0,
                 double l1 = 0.01, double l2 = 0.02) {
  CAPTURE(static_cast<int>(op), rows, width, n, duplicates, nesterov, lr_power, shrinkage, l1, l2,
          dtype_name(dtype_of<T>));
  sparse_indices_case<T, Index>(op, test_hyper(nesterov, lr_power, shrinkage, l1, l2), rows, width,
                                duplicates ? duplicate_indices<Index>(n, rows, kSeed)
                                           : unique_indices<Index>(n, rows, kSeed));
}

template <typename T>
void all_cases() {
  for (TrainingOp op : all_training_ops()) {
    if (op != TrainingOp::kLazyAdam) {
      for (auto [rows, width] : {std::pair{1, 1}, {7, 3}, {33, 64}, {1001, 97}}) {
        dense_case<T>(op, rows, width, false, -0.5);
      }
      dense_case<T>(op, 5, 13, true, -0.3);
      // Each flag the dense loops are specialized on (Nesterov; Ftrl's
      // power and shrinkage), at a size with full vectors, a tail and the
      // pool.
      dense_case<T>(op, 1001, 97, true, -0.5);
      dense_case<T>(op, 1001, 97, false, -0.5, 0.03);
      dense_case<T>(op, 1001, 97, false, -0.3, 0.0);
      // The proximal ops' l1 > 0 (above) and l1 = 0; l2 = 0 (proximal
      // gradient descent's divisor of 1) with each.
      dense_case<T>(op, 1001, 97, false, -0.5, 0.0, 0.0);
      dense_case<T>(op, 1001, 97, false, -0.5, 0.0, 0.01, 0.0);
      dense_case<T>(op, 1001, 97, false, -0.5, 0.0, 0.0, 0.0);
    }
    if (op == TrainingOp::kGradientDescent) continue;
    sparse_case<T, int32_t>(op, 1, 1, 3, true);
    sparse_case<T, int64_t>(op, 50, 3, 20, false);
    sparse_case<T, int32_t>(op, 50, 64, 200, true);
    sparse_case<T, int64_t>(op, 4000, 65, 3000, true);
    // Each flag the sparse loops are specialized on, with duplicates summed
    // on the pool (3000 gradient rows of 65 elements).
    sparse_case<T, int64_t>(op, 4000, 65, 3000, true, true, -0.5);
    sparse_case<T, int32_t>(op, 4000, 65, 3000, true, false, -0.5, 0.03);
    sparse_case<T, int64_t>(op, 4000, 65, 3000, true, false, -0.3, 0.0);
    sparse_case<T, int32_t>(op, 4000, 65, 3000, true, false, -0.5, 0.0, 0.0);
    sparse_case<T, int64_t>(op, 4000, 65, 3000, true, false, -0.5, 0.0, 0.01, 0.0);
    // compat.v1 Adam decays the rows the batch leaves out in runs: a few
    // ids in a large table make long runs, decayed in pieces on the pool.
    if (op == TrainingOp::kAdam) sparse_case<T, int64_t>(op, 20000, 16, 60, true);
  }
}

}  // namespace

TEST_CASE("training ops: float32 kernels equal the reference loop", "[training][threads]") {
  all_cases<float>();
  // A table far larger than the batch: the duplicates are grouped through a
  // hash index of the batch's rows instead of a scratch entry per row.
  for (TrainingOp op : {TrainingOp::kAdagrad, TrainingOp::kLazyAdam}) {
    sparse_case<float, int64_t>(op, 4200000, 1, 3000, true);
    // Repeating rows, the split forced (the pool may have raised the
    // thresholds after splits that did not pay): on two threads or more
    // the rows split by owner, each part with a hash index of its own.
    const cpu::ParallelThresholds saved = cpu::parallel_thresholds();
    cpu::parallel_thresholds().sparse_row_parts_bytes = 0;
    sparse_case<float, int64_t>(op, 4200000, 1, 20000, true);
    cpu::parallel_thresholds() = saved;
  }
}

TEST_CASE("training ops: rows numbered by sorting, where the sort's passes change", "[training]") {
  const auto h = test_hyper(false);
  for (TrainingOp op : {TrainingOp::kAdagrad, TrainingOp::kLazyAdam, TrainingOp::kFtrl}) {
    CAPTURE(static_cast<int>(op));
    // A table of 4,000 rows sorts in two 6-bit passes; ids under 64 share
    // their high digit, so that pass is skipped.
    std::vector<int64_t> low = duplicate_indices<int64_t>(500, 64, kSeed);
    sparse_indices_case<float, int64_t>(op, h, 4000, 5, low);
    // One id, and ids all naming one row.
    sparse_indices_case<float, int32_t>(op, h, 4000, 5, std::vector<int32_t>{3999});
    sparse_indices_case<float, int32_t>(op, h, 4000, 5, std::vector<int32_t>(300, 17));
    // A large batch naming every row of its table once, in a shuffled
    // order: chosen per call (kAuto), it is sorted, split over the pool.
    const int64_t rows = int64_t{1} << 19;
    sparse_indices_case<float, int64_t>(op, h, rows, 1, unique_indices<int64_t>(rows, rows, kSeed));
  }
}

TEST_CASE("training ops: float64 kernels equal the reference loop", "[training][threads]") {
  all_cases<double>();
}

TEST_CASE("training ops: float16 and bfloat16 kernels equal the reference loop",
          "[training][threads]") {
  all_cases<half>();
  all_cases<bfloat16>();
}

// The 16-bit kernels' fast paths against the reference loop, element by
// element, on random bits: every 16-bit pattern is a value of T, so they
// cover NaNs, infinities, zeros of both signs, subnormals and ties of the
// rounding. The accumulators stay positive and finite (square roots). The
// arrays start at element 0 (4-byte aligned: bfloat16's pairs of elements
// as 32-bit words) and at element 1 (2-byte aligned: bfloat16 one element
// at a time); odd and even lengths, lengths either side of float16's
// block of 256, and one large enough to split over the pool (odd range
// ends).
namespace {

// check_same takes any NaN for any other; a float16 kernel stores the
// portable conversion's NaN (host16.h), 0x7e00 or 0xfe00, whatever it
// computed on (F16C keeps a NaN's payload: half_blocks.h). Checked where
// `got` changed an element of `start`.
void only_portable_nans(const TrainingData<half>& got, const TrainingData<half>& start) {
  const std::pair<const std::vector<half>*, const std::vector<half>*> arrays[] = {
      {&got.var, &start.var}, {&got.s0, &start.s0}, {&got.s1, &start.s1}, {&got.s2, &start.s2}};
  for (const auto& [now, before] : arrays) {
    for (size_t i = 0; i < now->size(); ++i) {
      const uint16_t bits = (*now)[i].bits;
      if (bits == (*before)[i].bits || (bits & 0x7c00) != 0x7c00 || (bits & 0x3ff) == 0) continue;
      CAPTURE(i, bits);
      REQUIRE((bits & 0x7fff) == 0x7e00);
    }
  }
}

template <typename T>
void random_bits_cases() {
  std::mt19937_64 gen(kSeed);
  // Zeros of both signs every few elements besides (a product with -0, or
  // a sum from zero, decides the sign of a zero result).
  auto random_bits = [&](std::vector<T>& v) {
    for (auto& x : v) x = T::from_bits(static_cast<uint16_t>(gen()));
    for (size_t i = 0; i < v.size(); i += 5) v[i] = T::from_bits(i % 2 ? 0x8000 : 0);
  };
  for (TrainingOp op : all_training_ops()) {
    if (op == TrainingOp::kLazyAdam || op == TrainingOp::kRowwiseAdagrad) continue;
    for (const int64_t n : {int64_t{1}, int64_t{2}, int64_t{37}, int64_t{64}, int64_t{255},
                            int64_t{256}, int64_t{1000}, int64_t{70001}}) {
      for (const int64_t offset : {0, 1}) {
        CAPTURE(static_cast<int>(op), n, offset, dtype_name(dtype_of<T>));
        const int64_t total = n + offset;
        TrainingData<T> start = training_data<T>(total, total, total, kSeed + n);
        random_bits(start.var);
        random_bits(start.grad);
        random_bits(start.s1);
        for (int64_t i = 0; i < total; i += 7) start.s0[static_cast<size_t>(i)] = T(0.0f);
        TrainingData<T> got = start, want = start;
        const auto h = test_hyper(false, -0.5, 0.0);
        auto at = [&](std::vector<T>& v) { return v.data() + offset; };
        cpu::apply_dense<T>(op, h, {at(got.var), at(got.s0), at(got.s1), at(got.s2)}, at(got.grad),
                            n, n);
        reference_apply<T, int64_t>(op, h, want, 1, total, nullptr);
        // The reference updated every element; the kernel the last n.
        for (auto* v : {&want.var, &want.s0, &want.s1, &want.s2}) {
          const std::vector<T>* from = v == &want.var  ? &start.var
                                       : v == &want.s0 ? &start.s0
                                       : v == &want.s1 ? &start.s1
                                                       : &start.s2;
          std::copy(from->begin(), from->begin() + offset, v->begin());
        }
        check_same(got, want);
        if constexpr (std::is_same_v<T, half>) only_portable_nans(got, start);
      }
    }
    // The sparse updates of 16-bit rows (bfloat16: pairs of elements in
    // rows of even width, the odd ones element by element; float16: rows
    // of a block or more in blocks); a gradient row of its own (summed from
    // zero) or summed with its repeats.
    if (op == TrainingOp::kGradientDescent) continue;
    // compat.v1 Adam decays the rows not in the batch (float16: runs of a
    // block or more in blocks; bfloat16: pairs, from odd elements when the
    // width is odd): a batch of 700 ids into 1,001 rows leaves runs of a
    // row or two, one of 30 ids into 20,000 rows runs of hundreds.
    for (const int64_t width :
         {int64_t{3}, int64_t{16}, int64_t{20}, int64_t{64}, int64_t{264}, int64_t{300}}) {
      for (const auto& [rows, ids] : {std::pair<int64_t, int64_t>{1001, 700}, {20000, 30}}) {
        if (ids == 30 && (op != TrainingOp::kAdam || width > 64)) continue;
        CAPTURE(static_cast<int>(op), width, rows, dtype_name(dtype_of<T>));
        const std::vector<int64_t> indices = duplicate_indices<int64_t>(ids, rows, kSeed);
        const auto n = static_cast<int64_t>(indices.size());
        TrainingData<T> start = training_data<T>(rows * width, rows, n * width, kSeed + width);
        random_bits(start.var);
        random_bits(start.grad);
        random_bits(start.s1);
        TrainingData<T> got = start, want = start;
        const auto h = test_hyper(false, -0.5, 0.0);
        cpu::apply_sparse<T, int64_t>(op, h, got.slots(), rows, width, indices.data(), n,
                                      got.grad.data(), /*deterministic=*/false);
        reference_apply<T, int64_t>(op, h, want, rows, width, &indices);
        check_same(got, want);
        if constexpr (std::is_same_v<T, half>) only_portable_nans(got, start);
      }
    }
  }
}

}  // namespace

TEST_CASE(
    "training ops: bfloat16 dense updates, a word of two elements at a time, round as one "
    "at a time",
    "[training][threads]") {
  random_bits_cases<bfloat16>();
}

TEST_CASE("training ops: float16 updates, in blocks converted by F16C, round as one at a time",
          "[training][threads]") {
  random_bits_cases<half>();
}

TEST_CASE("training ops: a large dense Adam is split across threads identically",
          "[training][threads]") {
  dense_case<float>(TrainingOp::kAdam, 1 << 12, 257, false, -0.5);
  dense_case<float>(TrainingOp::kFtrl, 1 << 12, 129, false, -0.5);
}

TEST_CASE("training ops: sparse Adam decays the rows without a gradient; lazy Adam leaves them",
          "[training]") {
  const auto h = test_hyper(false);
  for (TrainingOp op : {TrainingOp::kAdam, TrainingOp::kLazyAdam}) {
    TrainingData<float> d = training_data<float>(6, 3, 2, kSeed);
    const TrainingData<float> before = d;
    const std::vector<int32_t> indices = {1};
    cpu::apply_sparse<float, int32_t>(op, h, d.slots(), 3, 2, indices.data(), 1, d.grad.data(),
                                      false);
    CHECK(d.var[2] != before.var[2]);
    if (op == TrainingOp::kAdam) {
      CHECK(d.s0[0] == before.s0[0] * 0.9f);
      CHECK(d.var[5] != before.var[5]);
    } else {
      CHECK(d.s0[0] == before.s0[0]);
      CHECK(d.var[5] == before.var[5]);
    }
  }
}
