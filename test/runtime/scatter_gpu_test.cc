// Sparse variable updates on a GPU: against the CPU on random inputs with
// heavy duplicates for every op and dtype, bad indices and zero divisors
// (synchronous and deferred errors; the table left unchanged), determinism
// run to run and against the CPU, concurrency, IndexedSlices and sparse_mask
// on the device. Each case runs in a fresh default graph.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <thread>

#include "device_fixture.h"
#include "scatter_test_util.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/indexed_slices.h"
#include "varstate/scatter.h"

#ifdef VARSTATE_HAVE_CUDA
#include "stream_gate.h"
#endif

using namespace varstate;
using namespace varstate::testing;

namespace {

Device& gpu() { return DeviceManager::instance().gpu(0); }
Device& cpu() { return DeviceManager::instance().cpu(); }

// Floats in [-1, 1) (not integer-valued: sums depend on their order).
Tensor random_reals(const TensorShape& shape, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(shape.num_elements());
  for (auto& x : v) x = dist(gen);
  return Tensor::from_vector<float>(v, shape);
}

// k distinct rows of [0, rows), shuffled.
Tensor unique_indices(DType dtype, int64_t k, int64_t rows, uint64_t seed) {
  std::vector<int64_t> all(rows);
  for (int64_t i = 0; i < rows; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), std::mt19937_64(seed));
  all.resize(k);
  Tensor t = Tensor::from_vector<int64_t>(all);
  return dtype == DType::kInt64 ? t : t.cast(DType::kInt32);
}

// Float results of atomic combining differ from the serial order only by
// rounding; integer-valued inputs keep add/sub/min/max/update exact.
bool exact_on_gpu(ScatterOp op, DType dtype, bool deterministic) {
  if (deterministic)
    return !(dtype_is_complex(dtype) && (op == ScatterOp::kMul || op == ScatterOp::kDiv));
  return dtype_is_integer(dtype) || op == ScatterOp::kMin || op == ScatterOp::kMax;
}
}  // namespace

TEST_CASE_METHOD(FreshSession, "GPU scatters equal the CPU's for every op and dtype",
                 "[gpu][scatter]") {
  uint64_t seed = kSeed;
  for (DType dtype : kScatterDTypes) {
    for (ScatterOp op : kScatterOps) {
      if (dtype_is_complex(dtype) && !defined_on_complex(op)) continue;
      for (DType index_dtype : {DType::kInt32, DType::kInt64}) {
        for (const TensorShape& table_shape :
             {TensorShape{37, 1}, TensorShape{300, 67}, TensorShape{64, 4, 8}}) {
          for (bool deterministic : {false, true}) {
            ++seed;
            const int64_t rows = table_shape.dim(0);
            // A non-deterministic scatter_update keeps an unspecified
            // duplicate: give it distinct rows.
            const bool distinct = op == ScatterOp::kUpdate && !deterministic;
            const TensorShape ishape = distinct     ? TensorShape{std::min<int64_t>(rows, 30)}
                                       : (seed % 2) ? TensorShape{257}
                                                    : TensorShape{16, 9};
            CAPTURE(dtype_name(dtype), op_name(op), dtype_name(index_dtype),
                    table_shape.to_string(), ishape.to_string(), deterministic, seed);
            Tensor start = random_values(dtype, table_shape, seed, 1, 8);
            // mul/div on hot rows would overflow 16-bit floats: spread those.
            const bool hot = !(op == ScatterOp::kMul || op == ScatterOp::kDiv);
            Tensor indices = distinct ? unique_indices(index_dtype, ishape.dim(0), rows, seed + 1)
                                      : random_indices(index_dtype, ishape, rows, seed + 1, hot);
            Tensor updates =
                random_updates(op, dtype, ishape.concatenate(table_shape.tail(1)), seed + 2);
            Variable cpu_var = initialized_variable(start.clone(), "cpu", &cpu());
            Variable gpu_var = initialized_variable(start, "gpu", &gpu());
            apply_scatter(op, cpu_var, indices, updates);
            // Indices and updates already on the GPU: the device-side check runs.
            Tensor out = apply_scatter(op, gpu_var, indices.to(gpu()), updates.to(gpu()),
                                       {.deterministic = deterministic, .synchronous = true});
            CHECK(&out.device() == &gpu());
            if (exact_on_gpu(op, dtype, deterministic)) {
              CHECK(same_bytes(out, cpu_var.value()));
            } else {
              CHECK(compare_tensors(out, cpu_var.value()).empty());
            }
          }
        }
      }
    }
  }
}

// Variables of sub-word types whose buffer ends at an odd element, with the
// last row hot: the compare-and-swap of the GPU kernels must stay inside the
// allocation (run under compute-sanitizer memcheck) and match the CPU.
TEST_CASE_METHOD(FreshSession, "GPU scatters on odd-sized sub-word variables, last row hot",
                 "[gpu][scatter][quick]") {
  for (DType dtype : {DType::kHalf, DType::kBFloat16, DType::kInt8, DType::kUInt8, DType::kInt16,
                      DType::kUInt16, DType::kQInt8, DType::kQUInt16}) {
    for (ScatterOp op : kScatterOps) {
      for (bool deterministic : {false, true}) {
        if (op == ScatterOp::kUpdate && !deterministic) continue;  // duplicates: any one wins
        CAPTURE(dtype_name(dtype), op_name(op), deterministic);
        const TensorShape shape{37, 1};
        std::vector<int32_t> rows(200, 36);
        for (size_t i = 0; i < rows.size(); i += 4) rows[i] = static_cast<int32_t>(i % 37);
        Tensor indices = Tensor::from_vector<int32_t>(rows);
        Tensor start = random_values(dtype, shape, kSeed, 1, 4);
        Tensor updates = random_updates(op, dtype, {200, 1}, kSeed + 1);
        Variable cpu_var = initialized_variable(start.clone(), "cpu", &cpu());
        Variable gpu_var = initialized_variable(start, "gpu", &gpu());
        apply_scatter(op, cpu_var, indices, updates);
        Tensor out = apply_scatter(op, gpu_var, indices.to(gpu()), updates.to(gpu()),
                                   {.deterministic = deterministic, .synchronous = true});
        if (dtype_is_integer(dtype) || deterministic) {
          CHECK(same_bytes(out, cpu_var.value()));
        } else {
          CHECK(compare_tensors(out, cpu_var.value()).empty());
        }
      }
    }
  }
}

TEST_CASE_METHOD(FreshSession, "GPU scalar updates and host-side indices", "[gpu][scatter]") {
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {5, 3}), "v", &gpu());
  scatter_add(v, Tensor({1, 1, 4}), Tensor(2.f));  // CPU indices: checked on the host
  scatter_max(v, Tensor({4}).to(gpu()), Tensor(3.f).to(gpu()));
  CHECK(v.eval().to_vector<float>() ==
        std::vector<float>{0, 0, 0, 4, 4, 4, 0, 0, 0, 0, 0, 0, 3, 3, 3});
}

TEST_CASE_METHOD(FreshSession, "a bad index on the GPU raises synchronously and writes nothing",
                 "[gpu][scatter][errors]") {
  Tensor start = random_values(DType::kFloat, {500, 16}, kSeed);
  Variable emb = initialized_variable(start, "emb", &gpu());
  Tensor indices = Tensor::from_vector<int64_t>({1, 2, 3, 1000, 7}).to(gpu());
  Tensor updates = random_values(DType::kFloat, {5, 16}, kSeed + 1).to(gpu());
  for (ScatterOp op : kScatterOps) {
    for (bool deterministic : {false, true}) {
      CAPTURE(op_name(op), deterministic);
      CHECK_THROWS_WITH(apply_scatter(op, emb, indices, updates,
                                      {.deterministic = deterministic, .synchronous = true}),
                        Catch::StartsWith(std::string("scatter_") + op_name(op) +
                                          " on \"emb\": indices[3] = 1000 is not in [0, 500)"));
      CHECK(same_bytes(emb.eval(), start));
    }
  }
  // Checked on the host when the indices are there: raised at once too.
  CHECK_THROWS_WITH(scatter_add(emb, Tensor({1, 2, 3, 1000, 7}), updates),
                    "scatter_add on \"emb\": indices[3] = 1000 is not in [0, 500)");
  CHECK(same_bytes(emb.eval(), start));
}

#ifdef VARSTATE_HAVE_CUDA  // holds the device stream with a StreamGate
TEST_CASE_METHOD(FreshSession, "a deferred GPU bounds error surfaces at the next sync and read",
                 "[gpu][scatter][errors]") {
  Tensor start = random_values(DType::kFloat, {500, 8}, kSeed);
  Variable emb = initialized_variable(start, "emb", &gpu());
  Tensor bad = Tensor::from_vector<int32_t>({0, -5}).to(gpu());
  Tensor good = Tensor::from_vector<int32_t>({0, 1}).to(gpu());
  Tensor ones = Tensor::filled(DType::kFloat, {2, 8}, Tensor(1.f), gpu());

  // The call returns; eval() waits for the check and raises once.
  scatter_add(emb, bad, ones, {.synchronous = false});
  CHECK_THROWS_WITH(
      emb.eval(), Catch::StartsWith("scatter_add on \"emb\": indices[1] = -5 is not in [0, 500)"));
  CHECK(same_bytes(emb.eval(), start));  // raised once; nothing was written

  // A good scatter after a bad one is applied; sync() reports the bad one.
  // The gate keeps the bad one's check queued until both are enqueued (a
  // check that has finished is raised by the next scatter instead: below).
  {
    StreamGate gate(gpu().stream());
    scatter_sub(emb, bad, ones, {.synchronous = false});
    scatter_add(emb, good, ones, {.synchronous = false});
    gate.open();
    CHECK_THROWS_AS(emb.sync(), InvalidArgumentError);
    CHECK_FALSE(gate.timed_out());
  }
  emb.sync();
  std::vector<float> expected = start.to_vector<float>();
  for (int c = 0; c < 16; ++c) expected[c] += 1.f;
  CHECK(emb.eval().to_vector<float>() == expected);

  // Reads raise once the check has finished; the next scatter does too.
  scatter_mul(emb, bad, ones, {.synchronous = false});
  gpu().synchronize();
  CHECK_THROWS_AS(emb.value(), InvalidArgumentError);
  scatter_update(emb, bad, ones, {.synchronous = false});
  gpu().synchronize();
  CHECK_THROWS_AS(scatter_add(emb, good, ones), InvalidArgumentError);
  CHECK(emb.eval().to_vector<float>() == expected);  // that add was refused before enqueueing

  // More scatters than check slots in flight: the oldest are waited for.
  for (int i = 0; i < 3 * kMaxPendingChecks; ++i) scatter_add(emb, good, ones);
  emb.sync();
  for (int c = 0; c < 16; ++c) expected[c] += 3.f * kMaxPendingChecks;
  CHECK(emb.eval().to_vector<float>() == expected);
}
#endif  // VARSTATE_HAVE_CUDA

TEST_CASE_METHOD(FreshSession, "integer scatter_div by zero on the GPU writes nothing",
                 "[gpu][scatter][errors]") {
  for (DType dtype : {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8}) {
    CAPTURE(dtype_name(dtype));
    Tensor start = random_values(dtype, {8, 4}, kSeed, 1, 8);
    Variable v = initialized_variable(start, "v", &gpu());
    Tensor divisors =
        retyped(Tensor::from_vector<int64_t>({1, 2, 0, 1, 1, 1, 1, 1}).cast(dtype), dtype)
            .reshaped({2, 4})
            .to(gpu());
    CHECK_THROWS_WITH(scatter_div(v, Tensor({0, 3}).to(gpu()), divisors, {.synchronous = true}),
                      Catch::StartsWith("scatter_div on \"" + v.op_name() +
                                        "\": updates[0,2] is 0 (integer division by zero)"));
    CHECK(same_bytes(v.eval(), start));
    // A bad index takes precedence over a zero divisor.
    CHECK_THROWS_WITH(scatter_div(v, Tensor({0, 9}).to(gpu()), divisors, {.synchronous = true}),
                      Catch::StartsWith("scatter_div on \"" + v.op_name() +
                                        "\": indices[1] = 9 is not in [0, 8)"));
    CHECK(same_bytes(v.eval(), start));
  }
}

TEST_CASE_METHOD(FreshSession, "deterministic GPU scatters are bitwise identical run to run",
                 "[gpu][scatter]") {
  for (DType dtype : {DType::kFloat, DType::kHalf, DType::kBFloat16, DType::kDouble}) {
    for (ScatterOp op : {ScatterOp::kAdd, ScatterOp::kSub, ScatterOp::kUpdate, ScatterOp::kMul}) {
      CAPTURE(dtype_name(dtype), op_name(op), kSeed);
      // Non-integer values so that the order of additions shows in the bits.
      Tensor start = random_reals({64, 33}, kSeed).cast(dtype);
      Tensor indices = random_indices(DType::kInt64, {20000}, 64, kSeed + 1, true).to(gpu());
      Tensor updates = op == ScatterOp::kMul
                           ? random_updates(op, DType::kFloat, {20000, 33}, kSeed + 2)
                           : random_reals({20000, 33}, kSeed + 2);
      updates = updates.cast(dtype);
      updates = updates.to(gpu());
      Tensor first;
      for (int run = 0; run < 3; ++run) {
        Variable v = initialized_variable(start, "v", &gpu());
        apply_scatter(op, v, indices, updates, {.deterministic = true, .synchronous = true});
        Tensor now = v.eval();
        if (run == 0) {
          first = now;
        } else {
          CHECK(same_bytes(now, first));
        }
      }
      if (op == ScatterOp::kAdd || op == ScatterOp::kSub || op == ScatterOp::kUpdate) {
        Variable c = initialized_variable(start, "c", &cpu());
        apply_scatter(op, c, indices, updates);
        CHECK(same_bytes(c.value(), first));  // equal to the CPU's serial loop
      }
    }
  }
}

TEST_CASE_METHOD(FreshSession, "concurrent GPU scatter_adds lose nothing",
                 "[gpu][scatter][threads]") {
  for (bool use_locking : {false, true}) {
    CAPTURE(use_locking);
    const int threads = 4, per_thread = 100;
    Variable v = initialized_variable(Tensor::zeros(DType::kInt64, {50, 40}), "counts", &gpu());
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        Tensor indices = random_indices(DType::kInt32, {100}, 50, kSeed + t, true).to(gpu());
        Tensor ones = Tensor::filled(DType::kInt64, {100, 40}, Tensor(int64_t{1}), gpu());
        for (int i = 0; i < per_thread; ++i) {
          scatter_add(v, indices, ones, {.use_locking = use_locking});
        }
      });
    }
    for (auto& th : pool) th.join();
    int64_t total = 0;
    for (int64_t c : v.eval().to_vector<int64_t>()) total += c;
    CHECK(total == int64_t{threads} * per_thread * 100 * 40);
  }
}

TEST_CASE_METHOD(FreshSession, "IndexedSlices and sparse_mask on the GPU",
                 "[gpu][indexed_slices]") {
  Tensor values = random_values(DType::kFloat, {4, 10}, kSeed);
  IndexedSlices a(values.to(gpu()), Tensor({12, 26, 37, 45}), Tensor({1000, 10}));
  CHECK(&a.indices().device() == &gpu());
  IndexedSlices b = sparse_mask(a, Tensor({12, 45}));
  CHECK(&b.values().device() == &gpu());
  CHECK(b.indices().to_vector<int32_t>() == std::vector<int32_t>{26, 37});
  const std::vector<float> all = values.to_vector<float>();
  CHECK(b.values().to_vector<float>() == std::vector<float>(all.begin() + 10, all.begin() + 30));
  Tensor dense = (-a).to_dense();
  CHECK(&dense.device() == &gpu());
  const std::vector<float> d = dense.to_vector<float>();
  CHECK(d[26 * 10 + 3] == -all[13]);
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {1000, 10}), "v", &gpu());
  v.scatter_sub(a);
  CHECK(same_bytes(v.eval(), dense));
}

TEST_CASE_METHOD(FreshSession, "GPU-resident bad indices and zero divisors into a CPU variable",
                 "[gpu][scatter][errors]") {
  Tensor start = random_values(DType::kInt32, {6, 3}, kSeed, 1, 8);
  Variable v = initialized_variable(start, "table", &cpu());
  Tensor updates = Tensor::filled(DType::kInt32, {3, 3}, Tensor(2), gpu());
  for (DType index_dtype : {DType::kInt32, DType::kInt64}) {
    CAPTURE(dtype_name(index_dtype));
    Tensor bad = Tensor::from_vector<int64_t>({0, 6, 1}).cast(index_dtype).to(gpu());
    for (ScatterOp op : kScatterOps) {
      CAPTURE(op_name(op));
      CHECK_THROWS_MATCHES(
          apply_scatter(op, v, bad, updates, {}), InvalidArgumentError,
          Catch::Matchers::Message(std::string("scatter_") + op_name(op) +
                                   " on \"table\": indices[1] = 6 is not in [0, 6)"));
      CHECK(same_bytes(v.eval(), start));
    }
    Tensor good = Tensor::from_vector<int64_t>({0, 5, 1}).cast(index_dtype).to(gpu());
    Tensor divisors = Tensor::from_vector<int32_t>({1, 2, 1, 3, 0, 1, 1, 1, 1}, {3, 3}).to(gpu());
    CHECK_THROWS_MATCHES(
        scatter_div(v, good, divisors), InvalidArgumentError,
        Catch::Matchers::Message("scatter_div on \"table\": updates[1,1] is 0 (integer division by "
                                 "zero)"));
    CHECK(same_bytes(v.eval(), start));
  }
  // A plain CPU tensor takes the same checks.
  Tensor table = start.clone();
  CHECK_THROWS_AS(scatter_add(table, Tensor({0, 6, 1}).to(gpu()), updates), InvalidArgumentError);
  CHECK(same_bytes(table, start));
}
