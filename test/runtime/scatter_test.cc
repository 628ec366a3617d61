// Sparse variable updates on the CPU: the reference's examples, every op x
// dtype x index dtype x index rank against a naive loop, duplicates, every
// error path (the variable left bit-identical), locking and concurrency,
// IndexedSlices forms and the determinism defaults. Each case runs in a
// fresh default graph.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "device_fixture.h"
#include "runtime/scatter_validate.h"
#include "runtime/variable_access.h"
#include "scatter_test_util.h"
#include "varstate/error.h"
#include "varstate/indexed_slices.h"
#include "varstate/initializers.h"
#include "varstate/partitioned_variable.h"
#include "varstate/partitioners.h"
#include "varstate/scatter.h"
#include "varstate/variable_scope.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }
}  // namespace

// ---------------------------------------------------------------------------
// The reference's formulas, one per index rank.

TEST_CASE_METHOD(FreshGraph, "scalar indices update one row", "[scatter]") {
  Variable ref = initialized_variable(Tensor({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}), "ref");
  // ref[indices, ...] = updates[...]
  scatter_update(ref, Tensor(1), Tensor({10.f, 20.f}));
  CHECK(floats(ref.value()) == std::vector<float>{1, 2, 10, 20, 5, 6});
  scatter_add(ref, Tensor(int64_t{0}), Tensor({1.f, 1.f}));
  CHECK(floats(ref.value()) == std::vector<float>{2, 3, 10, 20, 5, 6});
  scatter_sub(ref, Tensor(2), Tensor({5.f, 5.f}));
  scatter_mul(ref, Tensor(1), Tensor({2.f, 0.5f}));
  scatter_div(ref, Tensor(0), Tensor({2.f, 3.f}));
  CHECK(floats(ref.value()) == std::vector<float>{1, 1, 20, 10, 0, 1});
}

TEST_CASE_METHOD(FreshGraph, "vector indices update ref[indices[i], ...]", "[scatter]") {
  Variable ref = initialized_variable(Tensor({1, 2, 3, 4, 5, 6, 7, 8}), "ref");
  Tensor out = scatter_update(ref, Tensor({4, 3, 1, 7}), Tensor({9, 10, 11, 12}));
  CHECK(out.to_vector<int32_t>() == std::vector<int32_t>{1, 11, 3, 10, 9, 6, 7, 12});
  CHECK(out.shares_buffer_with(ref.ref()));  // the returned tensor is ref
  scatter_add(ref, Tensor({4, 3, 1, 7}), Tensor({1, 1, 1, 1}));
  scatter_sub(ref, Tensor({0}), Tensor({1}));
  scatter_mul(ref, Tensor({2, 2}), Tensor({2, 3}));  // duplicates multiply
  scatter_div(ref, Tensor({5}), Tensor({4}));
  CHECK(ref.value().to_vector<int32_t>() == std::vector<int32_t>{0, 12, 18, 11, 10, 1, 7, 13});
}

TEST_CASE_METHOD(FreshGraph, "high-rank indices update ref[indices[i, ..., j], ...]", "[scatter]") {
  Variable ref = initialized_variable(Tensor::zeros(DType::kFloat, {5, 2}), "ref");
  // indices [2, 2], updates [2, 2, 2] = indices.shape + ref.shape[1:]
  Tensor indices({{0, 4}, {2, 4}});
  Tensor updates({{{1.f, 2.f}, {3.f, 4.f}}, {{5.f, 6.f}, {7.f, 8.f}}});
  scatter_add(ref, indices, updates);
  CHECK(floats(ref.value()) == std::vector<float>{1, 2, 0, 0, 5, 6, 0, 0, 10, 12});
  scatter_max(ref, indices, Tensor(4.f));  // a scalar update applies to every element
  CHECK(floats(ref.value()) == std::vector<float>{4, 4, 0, 0, 5, 6, 0, 0, 10, 12});
  scatter_min(ref, Tensor({{4}}), Tensor({{{11.f, 3.f}}}));
  CHECK(floats(ref.value()) == std::vector<float>{4, 4, 0, 0, 5, 6, 0, 0, 10, 3});
}

TEST_CASE_METHOD(FreshGraph, "duplicate entries combine; scatter_update keeps the last",
                 "[scatter]") {
  Variable ref = initialized_variable(Tensor({10.f, 10.f, 10.f}), "ref");
  scatter_add(ref, Tensor({0, 0, 0, 2}), Tensor({1.f, 2.f, 3.f, 4.f}));
  CHECK(floats(ref.value()) == std::vector<float>{16, 10, 14});
  scatter_sub(ref, Tensor({1, 1}), Tensor({1.f, 2.f}));  // their negated contributions add
  CHECK(floats(ref.value()) == std::vector<float>{16, 7, 14});
  scatter_mul(ref, Tensor({0, 0}), Tensor({2.f, 0.5f}));
  scatter_div(ref, Tensor({2, 2}), Tensor({2.f, 7.f}));
  CHECK(floats(ref.value()) == std::vector<float>{16, 7, 1});
  scatter_update(ref, Tensor({1, 1, 1}), Tensor({5.f, 8.f, 6.f}), {.deterministic = true});
  CHECK(floats(ref.value()) == std::vector<float>{16, 6, 1});
}

TEST_CASE_METHOD(FreshGraph, "every op, dtype, index dtype and index rank matches a naive loop",
                 "[scatter]") {
  const TensorShape table_shape{10, 3};
  const TensorShape index_shapes[] = {TensorShape{}, TensorShape{12}, TensorShape{3, 4},
                                      TensorShape{0}};
  uint64_t seed = kSeed;
  for (DType dtype : kScatterDTypes) {
    for (ScatterOp op : kScatterOps) {
      if (dtype_is_complex(dtype) && !defined_on_complex(op)) continue;
      for (DType index_dtype : {DType::kInt32, DType::kInt64}) {
        for (const TensorShape& ishape : index_shapes) {
          for (bool scalar_update : {false, true}) {
            ++seed;
            CAPTURE(dtype_name(dtype), op_name(op), dtype_name(index_dtype), ishape.to_string(),
                    scalar_update, seed);
            Tensor start = random_values(dtype, table_shape, seed, 1, 8);
            Tensor indices = random_indices(index_dtype, ishape, 10, seed + 1);
            Tensor updates = random_updates(
                op, dtype, scalar_update ? TensorShape{} : ishape.concatenate(table_shape.tail(1)),
                seed + 2);
            Tensor expected = naive_scatter(op, start, indices, updates);
            Variable v = initialized_variable(start.clone(), "v");
            // scatter_update keeps the last duplicate in deterministic mode
            // only (any one on a GPU's atomic path): checked both ways.
            const bool any_duplicate = op == ScatterOp::kUpdate && !scalar_update;
            UpdateOptions options;
            if (any_duplicate) options.deterministic = true;
            Tensor out = apply_scatter(op, v, indices, updates, options);
            CHECK(compare_tensors(out, expected).empty());
            CHECK(compare_tensors(v.value(), expected).empty());
            if (any_duplicate) {
              Variable w = initialized_variable(start.clone(), "w");
              apply_scatter(op, w, indices, updates, {.deterministic = false});
              CHECK(update_takes_a_duplicate(
                        w.value(), start, indices,
                        updates.reshaped(
                            TensorShape{indices.num_elements()}.concatenate(table_shape.tail(1))))
                        .empty());
            }
          }
        }
      }
    }
  }
}

TEST_CASE_METHOD(FreshGraph, "large and duplicate-heavy scatters match the naive loop",
                 "[scatter]") {
  // Big enough for the multithreaded kernel; most indices hit three rows.
  for (DType dtype : {DType::kFloat, DType::kInt32, DType::kBFloat16}) {
    for (ScatterOp op : {ScatterOp::kUpdate, ScatterOp::kAdd, ScatterOp::kSub, ScatterOp::kMax}) {
      CAPTURE(dtype_name(dtype), op_name(op), kSeed);
      Tensor start = random_values(dtype, {2000, 67}, kSeed);
      Tensor indices = random_indices(DType::kInt64, {5000}, 2000, kSeed + 1, /*hot=*/true);
      Tensor updates = random_updates(op, dtype, {5000, 67}, kSeed + 2);
      Variable v = initialized_variable(start.clone(), "big");
      apply_scatter(op, v, indices, updates, {.deterministic = true});
      CHECK(compare_tensors(v.value(), naive_scatter(op, start, indices, updates)).empty());
    }
  }
}

TEST_CASE_METHOD(FreshGraph, "scatter_update copies any dtype but string, bool included",
                 "[scatter]") {
  Variable flags = initialized_variable(Tensor({false, false, false}), "flags");
  scatter_update(flags, Tensor({2, 0}), Tensor({true, true}));
  CHECK(flags.value().to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK_THROWS_AS(scatter_add(flags, Tensor({0}), Tensor({true})), TypeError);
  Variable names = initialized_variable(Tensor("a").reshaped({1}), "names");
  CHECK_THROWS_AS(scatter_update(names, Tensor({0}), Tensor("b").reshaped({1})), TypeError);
}

TEST_CASE_METHOD(FreshGraph, "integers wrap around and INT_MIN / -1 does not trap", "[scatter]") {
  Variable v = initialized_variable(Tensor::from_vector<int8_t>({127, -128, 100}, {3}), "v");
  scatter_add(v, Tensor({0}), Tensor::from_vector<int8_t>({1}));
  scatter_div(v, Tensor({1}), Tensor::from_vector<int8_t>({-1}));
  scatter_mul(v, Tensor({2}), Tensor::from_vector<int8_t>({3}));
  CHECK(v.value().to_vector<int8_t>() == std::vector<int8_t>{-128, -128, 44});
}

// ---------------------------------------------------------------------------
// Errors: raised before anything is written.

namespace {

// Runs `fn`, expecting E with `message` (if given), and checks that `v` is
// bit-identical and at the same version afterwards.
template <typename E, typename Fn>
void check_rejected(Variable& v, Fn fn, const std::string& message = {}) {
  Tensor before = v.ref().clone();
  const uint64_t version = v.version();
  CHECK_THROWS_AS(fn(), E);
  if (!message.empty()) CHECK_THROWS_WITH(fn(), message);
  CHECK(same_bytes(v.ref(), before));
  CHECK(v.version() == version);
}

}  // namespace

TEST_CASE_METHOD(FreshGraph, "an out-of-range index names the op, position and value",
                 "[scatter][errors]") {
  Variable emb = initialized_variable(random_values(DType::kFloat, {500, 4}, kSeed), "emb");
  std::vector<int32_t> idx = {1, 2, 3, 1000, 7};
  Tensor indices = Tensor::from_vector<int32_t>(idx);
  Tensor updates = random_values(DType::kFloat, {5, 4}, kSeed + 1);
  check_rejected<InvalidArgumentError>(
      emb, [&] { scatter_add(emb, indices, updates); },
      "scatter_add on \"emb\": indices[3] = 1000 is not in [0, 500)");
  check_rejected<InvalidArgumentError>(
      emb,
      [&] {
        scatter_update(emb, Tensor({{0, 1}, {-1, 2}}), Tensor(0.f));
      },
      "scatter_update on \"emb\": indices[1,0] = -1 is not in [0, 500)");
  check_rejected<InvalidArgumentError>(
      emb, [&] { scatter_mul(emb, Tensor(int64_t{500}), Tensor(2.f), {.name = "decay"}); },
      "scatter_mul \"decay\" on \"emb\": indices = 500 is not in [0, 500)");
  // Every op, both index dtypes, the bad index last (after good ones).
  for (ScatterOp op : kScatterOps) {
    for (DType index_dtype : {DType::kInt32, DType::kInt64}) {
      CAPTURE(op_name(op), dtype_name(index_dtype));
      Tensor bad = Tensor::from_vector<int64_t>({0, 499, 500}).cast(index_dtype);
      check_rejected<InvalidArgumentError>(emb, [&] { apply_scatter(op, emb, bad, Tensor(3.f)); });
    }
  }
}

TEST_CASE_METHOD(FreshGraph, "shape, dtype and rank mismatches are rejected", "[scatter][errors]") {
  Variable v = initialized_variable(random_values(DType::kFloat, {6, 3}, kSeed), "v");
  check_rejected<ValueError>(
      v,
      [&] {
        scatter_add(v, Tensor({1, 2}), Tensor::zeros(DType::kFloat, {2, 4}));
      },
      "scatter_add on \"v\": updates shape [2,4] must equal indices.shape + ref.shape[1:] = "
      "[2,3] (indices shape [2], ref shape [6,3]) or be a scalar");
  check_rejected<ValueError>(v, [&] {
    scatter_update(v, Tensor({1, 2}), Tensor::zeros(DType::kFloat, {3}));
  });
  check_rejected<TypeError>(v, [&] {
    scatter_add(v, Tensor({1}), Tensor::zeros(DType::kDouble, {1, 3}));
  });
  check_rejected<TypeError>(
      v,
      [&] {
        scatter_add(v, Tensor({1.f}), Tensor::zeros(DType::kFloat, {1, 3}));
      },
      "scatter_add on \"v\": indices must be int32 or int64, got float32");
  check_rejected<TypeError>(v, [&] {
    scatter_add(v, Tensor::from_vector<int16_t>({1}), Tensor::zeros(DType::kFloat, {1, 3}));
  });
  // A weakly typed literal converts; a strongly typed one does not.
  scatter_add(v, Tensor({0}), Tensor({{1, 1, 1}}));
  check_rejected<TypeError>(v, [&] {
    scatter_add(v, Tensor({0}), Tensor({{1, 1, 1}}).strongly_typed());
  });

  Variable c = initialized_variable(Tensor::zeros(DType::kComplex64, {3}), "c");
  check_rejected<InvalidArgumentError>(
      c, [&] { scatter_max(c, Tensor({0}), Tensor::zeros(DType::kComplex64, {1})); });
  check_rejected<InvalidArgumentError>(
      c, [&] { scatter_min(c, Tensor({0}), Tensor::zeros(DType::kComplex64, {1})); });

  Variable s = initialized_variable(Tensor(1.f), "s");
  check_rejected<InvalidArgumentError>(s, [&] { scatter_add(s, Tensor(0), Tensor(1.f)); });
}

TEST_CASE_METHOD(FreshGraph, "integer division by zero is rejected, float division is IEEE",
                 "[scatter][errors]") {
  for (DType dtype : {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8,
                      DType::kUInt16, DType::kUInt32, DType::kUInt64, DType::kQInt32}) {
    CAPTURE(dtype_name(dtype));
    Variable v = initialized_variable(random_values(dtype, {4, 2}, kSeed, 1, 8), "v");
    const DType plain = dtype == DType::kQInt32 ? DType::kInt32 : dtype;
    Tensor divisors =
        retyped(Tensor::from_vector<int64_t>({3, 1, 2, 0}).cast(plain), dtype).reshaped({2, 2});
    check_rejected<InvalidArgumentError>(
        v,
        [&] {
          scatter_div(v, Tensor({0, 1}), divisors);
        },
        "scatter_div on \"" + v.op_name() + "\": updates[1,1] is 0 (integer division by zero)");
    check_rejected<InvalidArgumentError>(v, [&] {
      scatter_div(v, Tensor({0, 1}), retyped(Tensor::zeros(dtype, {}), dtype));
    });
  }
  Variable f = initialized_variable(Tensor({1.f, -1.f}), "f");
  scatter_div(f, Tensor({0, 1}), Tensor({0.f, 0.f}));
  CHECK(std::isinf(floats(f.value())[0]));
  CHECK(floats(f.value())[1] < 0);
}

TEST_CASE_METHOD(FreshGraph, "an uninitialized variable raises FailedPreconditionError",
                 "[scatter][errors]") {
  Variable v(Tensor({1.f, 2.f}), {.name = "later"});
  CHECK_THROWS_AS(scatter_add(v, Tensor({0}), Tensor({1.f})), FailedPreconditionError);
  CHECK_THROWS_WITH(scatter_update(v, Tensor({0}), Tensor({1.f})),
                    "Attempting to use uninitialized value later");
  CHECK_FALSE(v.is_initialized());
}

// ---------------------------------------------------------------------------
// Locking and concurrency.

TEST_CASE_METHOD(FreshGraph, "concurrent scatter_adds lose nothing, locked or not",
                 "[scatter][threads]") {
  for (bool use_locking : {false, true}) {
    CAPTURE(use_locking);
    const int threads = 6, per_thread = 200;
    const int64_t rows = 50, width = 40;  // 16 KB of updates per call
    Variable v = initialized_variable(Tensor::zeros(DType::kInt64, {rows, width}), "counts");
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        Tensor indices = random_indices(DType::kInt32, {100}, rows, kSeed + t);
        Tensor ones = Tensor::filled(DType::kInt64, {100, width}, Tensor(int64_t{1}), v.device());
        for (int i = 0; i < per_thread; ++i) {
          scatter_add(v, indices, ones, {.use_locking = use_locking});
        }
      });
    }
    for (auto& th : pool) th.join();
    const std::vector<int64_t> counts = v.value().to_vector<int64_t>();
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    CHECK(total == int64_t{threads} * per_thread * 100 * width);
    CHECK(v.version() == 1 + uint64_t{threads} * per_thread);
  }
}

TEST_CASE_METHOD(FreshGraph, "use_locking serializes with other locked updates",
                 "[scatter][threads]") {
  Variable v = initialized_variable(Tensor::zeros(DType::kInt64, {4}), "v");
  std::thread a([&] {
    for (int i = 0; i < 500; ++i)
      scatter_add(v, Tensor({0, 1, 2, 3}), Tensor(int64_t{1}), {.use_locking = true});
  });
  std::thread b([&] {
    for (int i = 0; i < 500; ++i) v.assign_add(int64_t{1}, {.use_locking = true});
  });
  a.join();
  b.join();
  CHECK(v.value().to_vector<int64_t>() == std::vector<int64_t>{1000, 1000, 1000, 1000});
}

TEST_CASE_METHOD(FreshGraph, "use_locking defaults: scatter_update locks, the others do not",
                 "[scatter][threads]") {
  // TensorFlow's op defaults: ScatterUpdate use_locking=true, ScatterAdd/Sub/
  // Mul/Div/Min/Max false. Observed: does the call wait for the update lock?
  Variable v = initialized_variable(Tensor({1.f, 2.f, 3.f}), "v");
  auto waits = [&](const std::function<void()>& update) {
    std::unique_lock held(internal::update_mutex(v));
    auto done = std::async(std::launch::async, update);
    const bool waited =
        done.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout;
    held.unlock();
    done.get();
    return waited;
  };
  const Tensor idx({0}), upd({2.f});
  CHECK(waits([&] { scatter_update(v, idx, upd); }));
  CHECK_FALSE(waits([&] { scatter_update(v, idx, upd, {.use_locking = false}); }));
  CHECK_FALSE(waits([&] { scatter_add(v, idx, upd); }));
  CHECK(waits([&] { scatter_add(v, idx, upd, {.use_locking = true}); }));
  CHECK_FALSE(waits([&] { scatter_sub(v, idx, upd); }));
  CHECK_FALSE(waits([&] { scatter_mul(v, idx, upd); }));
  CHECK_FALSE(waits([&] { scatter_div(v, idx, upd); }));
  CHECK_FALSE(waits([&] { scatter_min(v, idx, upd); }));
  CHECK_FALSE(waits([&] { scatter_max(v, idx, upd); }));
  CHECK_FALSE(waits([&] { v.scatter_update(IndexedSlices(upd, idx)); }));  // method: False
}

// ---------------------------------------------------------------------------
// IndexedSlices forms, determinism defaults.

TEST_CASE_METHOD(FreshGraph, "Variable::scatter_sub/add/update take IndexedSlices", "[scatter]") {
  Variable v = initialized_variable(Tensor({{1.f, 1.f}, {2.f, 2.f}, {3.f, 3.f}}), "v");
  IndexedSlices delta(Tensor({{1.f, 1.f}, {2.f, 2.f}}), Tensor({2, 0}), Tensor({3, 2}));
  Tensor out = v.scatter_sub(delta);
  CHECK(floats(out) == std::vector<float>{-1, -1, 2, 2, 2, 2});
  v.scatter_add(delta, {.use_locking = true});
  CHECK(floats(v.value()) == std::vector<float>{1, 1, 2, 2, 3, 3});
  v.scatter_update(-delta);
  CHECK(floats(v.value()) == std::vector<float>{-2, -2, 2, 2, -1, -1});
  scatter_add(v, delta, {.use_locking = true});
  CHECK(floats(v.value()) == std::vector<float>{0, 0, 2, 2, 0, 0});
  IndexedSlices wrong(Tensor({{1.f, 1.f}}), Tensor({0}), Tensor({4, 2}));
  check_rejected<InvalidArgumentError>(v, [&] { v.scatter_sub(wrong); });
  IndexedSlices out_of_range(Tensor({{1.f, 1.f}}), Tensor({3}));
  check_rejected<InvalidArgumentError>(
      v, [&] { v.scatter_add(out_of_range); },
      "scatter_add on \"v\": indices[0] = 3 is not in [0, 3)");
}

// Every op of the family in every IndexedSlices form (the free function,
// the method, a PartitionedVariable's method) equals the same op with plain
// indices and updates on a copy; the method leaves use_locking unset false.
TEST_CASE_METHOD(FreshSession, "every scatter op takes IndexedSlices in every form", "[scatter]") {
  using SliceFn = Tensor (*)(Variable&, const IndexedSlices&, const UpdateOptions&);
  using PlainFn = Tensor (*)(Variable&, const Tensor&, const Tensor&, const UpdateOptions&);
  using MethodFn = Tensor (Variable::*)(const IndexedSlices&, const UpdateOptions&);
  using PartFn = void (PartitionedVariable::*)(const IndexedSlices&, const UpdateOptions&);
  struct Form {
    const char* name;
    SliceFn slices;
    PlainFn plain;
    MethodFn method;
    PartFn part;
  };
  const Form forms[] = {
      {"update", scatter_update, scatter_update, &Variable::scatter_update,
       &PartitionedVariable::scatter_update},
      {"add", scatter_add, scatter_add, &Variable::scatter_add, &PartitionedVariable::scatter_add},
      {"sub", scatter_sub, scatter_sub, &Variable::scatter_sub, &PartitionedVariable::scatter_sub},
      {"mul", scatter_mul, scatter_mul, &Variable::scatter_mul, &PartitionedVariable::scatter_mul},
      {"div", scatter_div, scatter_div, &Variable::scatter_div, &PartitionedVariable::scatter_div},
      {"min", scatter_min, scatter_min, &Variable::scatter_min, &PartitionedVariable::scatter_min},
      {"max", scatter_max, scatter_max, &Variable::scatter_max, &PartitionedVariable::scatter_max},
  };
  const Tensor start({{4.f, -2.f}, {6.f, 8.f}, {-3.f, 5.f}, {1.f, 7.f}});
  const Tensor rows({{2.f, 3.f}, {-1.f, 4.f}});
  const Tensor ids({3, 1});
  const IndexedSlices delta(rows, ids, Tensor({4, 2}));
  for (const Form& f : forms) {
    CAPTURE(f.name);
    Variable expected = initialized_variable(start.clone(), "expected");
    f.plain(expected, ids, rows, {});
    Variable by_function = initialized_variable(start.clone(), "by_function");
    const Tensor returned = f.slices(by_function, delta, {});
    CHECK(floats(returned) == floats(expected.value()));
    Variable by_method = initialized_variable(start.clone(), "by_method");
    (by_method.*f.method)(delta, {});
    CHECK(floats(by_method.value()) == floats(expected.value()));
    PartitionedVariable parts =
        get_variable(std::string("parts_") + f.name, {.shape = TensorShape{4, 2},
                                                      .initializer = zeros_initializer(),
                                                      .partitioner = fixed_size_partitioner(2)});
    session.run(parts.initializer());
    parts.assign(start);
    (parts.*f.part)(delta, {});
    CHECK(floats(parts.eval()) == floats(expected.value()));
    // A dense_shape that is not the variable's changes nothing.
    const IndexedSlices wrong(rows, ids, Tensor({5, 2}));
    check_rejected<InvalidArgumentError>(by_method, [&] { (by_method.*f.method)(wrong, {}); });
    CHECK_THROWS_AS((parts.*f.part)(wrong, {}), InvalidArgumentError);
    CHECK(floats(parts.eval()) == floats(expected.value()));
  }
}

TEST_CASE("deterministic_ops is a settable global default", "[scatter]") {
  const bool before = deterministic_ops();
  set_deterministic_ops(true);
  CHECK(deterministic_ops());
  set_deterministic_ops(false);
  CHECK_FALSE(deterministic_ops());
  set_deterministic_ops(before);
  const bool sync_before = synchronous_scatter_checks();
  set_synchronous_scatter_checks(!sync_before);
  CHECK(synchronous_scatter_checks() == !sync_before);
  set_synchronous_scatter_checks(sync_before);
}

TEST_CASE("scatters into a plain tensor validate the same way", "[scatter]") {
  Tensor t = Tensor::zeros(DType::kFloat, {3, 2});
  scatter_add(t, Tensor({1, 1}), Tensor({{1.f, 2.f}, {3.f, 4.f}}));
  CHECK(floats(t) == std::vector<float>{0, 0, 4, 6, 0, 0});
  Tensor before = t.clone();
  CHECK_THROWS_WITH(scatter_max(t, Tensor({3}), Tensor(1.f)),
                    "scatter_max: indices[0] = 3 is not in [0, 3)");
  CHECK(same_bytes(t, before));
}

TEST_CASE("where a scatter operand is checked: on the host unless table and operand are on a GPU",
          "[scatter][errors]") {
  using internal::check_on_host;
  // A CPU table: its CPU kernel trusts the operands, so they are always
  // checked on the host (a GPU operand is copied there first).
  CHECK(check_on_host(/*operand_on_cpu=*/true, /*table_on_cpu=*/true));
  CHECK(check_on_host(/*operand_on_cpu=*/false, /*table_on_cpu=*/true));
  // A GPU table: host operands on the host, GPU ones by the device check.
  CHECK(check_on_host(/*operand_on_cpu=*/true, /*table_on_cpu=*/false));
  CHECK_FALSE(check_on_host(/*operand_on_cpu=*/false, /*table_on_cpu=*/false));
}
