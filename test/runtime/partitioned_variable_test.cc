// get_variable with a partitioner: TensorFlow's split, names, slice infos,
// initial values equal to the unpartitioned variable's, reads, dense and
// sparse updates compared with the same updates on an unpartitioned
// variable, and every error path leaving the parts untouched.
#include <catch2/catch.hpp>

#include <functional>
#include <random>
#include <string>

#include "device_fixture.h"
#include "runtime/partitioned_variable_internal.h"
#include "test_util.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/math_ops.h"
#include "varstate/placement.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;
using Catch::Matchers::Contains;

namespace {
std::vector<float> iota(int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<float>(i);
  return out;
}
}  // namespace

TEST_CASE_METHOD(FreshSession, "parts: names, TensorFlow's uneven split, slice infos",
                 "[partitioned]") {
  auto scope = variable_scope("scope");
  PartitionedVariable w =
      get_variable("w", {.shape = TensorShape{10, 3}, .partitioner = fixed_size_partitioner(3)});
  CHECK(w.name() == "scope/w");
  CHECK(w.shape() == TensorShape{10, 3});
  CHECK(w.partitions() == std::vector<int64_t>{3, 1});
  REQUIRE(w.size() == 3);
  CHECK(w[0].name() == "scope/w/part_0:0");
  CHECK(w[2].name() == "scope/w/part_2:0");
  CHECK(w[0].shape() == TensorShape{4, 3});
  CHECK(w[1].shape() == TensorShape{3, 3});
  CHECK(w[2].shape() == TensorShape{3, 3});
  CHECK(w.offsets() == std::vector<int64_t>{0, 4, 7, 10});
  REQUIRE(w[1].save_slice_info());
  CHECK(*w[1].save_slice_info() == SaveSliceInfo{"scope/w", {10, 3}, {4, 0}, {3, 3}});
  CHECK(*w[2].save_slice_info() == SaveSliceInfo{"scope/w", {10, 3}, {7, 0}, {3, 3}});
  // Collections hold the parts.
  std::vector<Variable> globals = global_variables();
  REQUIRE(globals.size() == 3);
  CHECK(globals[0].same_as(w[0]));
  CHECK(trainable_variables().size() == 3);
  // 5 into 2 along axis 1.
  PartitionedVariable c =
      get_variable("c", {.shape = TensorShape{2, 5}, .partitioner = fixed_size_partitioner(2, 1)});
  CHECK(c.axis() == 1);
  CHECK(c[0].shape() == TensorShape{2, 3});
  CHECK(c[1].shape() == TensorShape{2, 2});
  CHECK(c[1].save_slice_info()->var_offset == std::vector<int64_t>{0, 3});
}

TEST_CASE_METHOD(FreshSession, "partitioned initial values equal the unpartitioned variable's",
                 "[partitioned]") {
  Initializer init = glorot_uniform_initializer({.seed = 7});
  Variable whole = get_variable("whole", {.shape = TensorShape{10, 3}, .initializer = init});
  PartitionedVariable rows = get_variable(
      "rows",
      {.shape = TensorShape{10, 3}, .initializer = init, .partitioner = fixed_size_partitioner(3)});
  PartitionedVariable cols = get_variable("cols", {.shape = TensorShape{10, 3},
                                                   .initializer = init,
                                                   .partitioner = fixed_size_partitioner(2, 1)});
  PartitionedVariable from_tensor =
      get_variable("t", {.initializer = Tensor::from_vector<float>(iota(12), {6, 2}),
                         .partitioner = fixed_size_partitioner(4)});
  Session sess;
  sess.run(global_variables_initializer());
  const std::vector<float> expected = whole.eval().to_vector<float>();
  CHECK(rows.eval().to_vector<float>() == expected);
  CHECK(cols.eval().to_vector<float>() == expected);
  CHECK(from_tensor.size() == 4);
  CHECK(from_tensor[0].eval().to_vector<float>() == std::vector<float>{0, 1, 2, 3});
  CHECK(from_tensor[3].eval().to_vector<float>() == std::vector<float>{10, 11});
  CHECK(from_tensor.eval().to_vector<float>() == iota(12));
  // The implicit conversion reads the concatenation too.
  Tensor t = from_tensor;
  CHECK(t.shape() == TensorShape{6, 2});
}

TEST_CASE_METHOD(FreshSession, "scatter updates route rows to their parts", "[partitioned]") {
  const int64_t rows = 23, cols = 5;
  std::mt19937 rng(testing::kSeed);
  INFO("seed " << testing::kSeed);
  std::vector<float> init(static_cast<size_t>(rows * cols));
  for (auto& x : init) x = static_cast<float>(static_cast<int>(rng() % 100));
  Tensor init_t = Tensor::from_vector<float>(init, {rows, cols});
  Variable reference = get_variable("reference", {.initializer = init_t});
  PartitionedVariable emb =
      get_variable("emb", {.initializer = init_t, .partitioner = fixed_size_partitioner(4)});
  Session sess;
  sess.run(global_variables_initializer());

  SECTION("add/sub/mul/max with duplicates, int64 and int32 indices") {
    for (int round = 0; round < 4; ++round) {
      CAPTURE(round);
      const int64_t n = 40;
      std::vector<int64_t> idx(static_cast<size_t>(n));
      std::vector<float> upd(static_cast<size_t>(n * cols));
      for (auto& i : idx) i = static_cast<int64_t>(rng() % rows);
      for (auto& u : upd) u = static_cast<float>(static_cast<int>(rng() % 7) + 1);
      Tensor indices = Tensor::from_vector<int64_t>(idx, {n});
      if (round % 2) indices = indices.cast(DType::kInt32);
      Tensor updates = Tensor::from_vector<float>(upd, {n, cols});
      if (round == 0) {
        emb.scatter_add(indices, updates);
        scatter_add(reference, indices, updates);
      }
      if (round == 1) {
        emb.scatter_sub(IndexedSlices(updates, indices));
        reference.scatter_sub(IndexedSlices(updates, indices));
      }
      if (round == 2) {
        emb.scatter_mul(indices, updates);
        scatter_mul(reference, indices, updates);
      }
      if (round == 3) {
        emb.scatter_max(indices, updates);
        scatter_max(reference, indices, updates);
      }
      CHECK(emb.eval().to_vector<float>() == reference.eval().to_vector<float>());
    }
  }
  SECTION("rank-2 indices, a scalar update, scatter_update with unique rows, min, div") {
    Tensor idx2 = Tensor({{0, 22}, {5, 11}});
    Tensor upd2 =
        Tensor::filled(DType::kFloat, {2, 2, cols}, Tensor(3.f), DeviceManager::instance().cpu());
    emb.scatter_add(idx2, upd2);
    scatter_add(reference, idx2, upd2);
    emb.scatter_update(Tensor({1, 6, 20}), Tensor(-1.f));
    scatter_update(reference, Tensor({1, 6, 20}), Tensor(-1.f));
    emb.scatter_min(Tensor({2, 9}), Tensor(0.5f));
    scatter_min(reference, Tensor({2, 9}), Tensor(0.5f));
    emb.scatter_div(Tensor({3, 16}), Tensor(2.f));
    scatter_div(reference, Tensor({3, 16}), Tensor(2.f));
    CHECK(emb.eval().to_vector<float>() == reference.eval().to_vector<float>());
  }
  SECTION("errors change nothing") {
    const std::vector<float> before = emb.eval().to_vector<float>();
    // Index 0 (part 0) is valid, 23 is not: part 0 must stay untouched.
    CHECK_THROWS_MATCHES(
        emb.scatter_add(Tensor({0, 23}), Tensor::zeros(DType::kFloat, {2, cols}) + 1.f),
        InvalidArgumentError,
        Catch::Matchers::Message("scatter_add on \"emb\": indices[1] = 23 is not in [0, 23)"));
    CHECK_THROWS_WITH(emb.scatter_add(Tensor({-1}), Tensor::zeros(DType::kFloat, {1, cols})),
                      Contains("indices[0] = -1"));
    CHECK_THROWS_WITH(emb.scatter_add(Tensor({1, 2}), Tensor::zeros(DType::kFloat, {2, cols + 1})),
                      Contains("updates shape [2,6] must equal indices.shape + ref.shape[1:] = "
                               "[2,5]"));
    CHECK_THROWS_AS(emb.scatter_add(Tensor({1.f}), Tensor::zeros(DType::kFloat, {1, cols})),
                    TypeError);
    CHECK(emb.eval().to_vector<float>() == before);
    PartitionedVariable by_cols = get_variable(
        "by_cols", {.shape = TensorShape{4, 4}, .partitioner = fixed_size_partitioner(2, 1)});
    by_cols.initializer().run();
    CHECK_THROWS_WITH(by_cols.scatter_add(Tensor({0}), Tensor::zeros(DType::kFloat, {1, 4})),
                      Contains("partitioned along axis 1"));
    PartitionedVariable fresh = get_variable(
        "fresh", {.shape = TensorShape{4, 2}, .partitioner = fixed_size_partitioner(2)});
    fresh[0].initializer().run();  // part 1 stays uninitialized
    const std::vector<float> part0 = fresh[0].eval().to_vector<float>();
    CHECK_THROWS_MATCHES(
        fresh.scatter_add(Tensor({0}), Tensor::zeros(DType::kFloat, {1, 2}) + 1.f),
        FailedPreconditionError,
        Catch::Matchers::Message("Attempting to use uninitialized value fresh/part_1"));
    CHECK(fresh[0].eval().to_vector<float>() == part0);
  }
  SECTION("integer division by zero is found before any part is written") {
    PartitionedVariable ints = get_variable("ints", {.initializer = Tensor({10, 20, 30, 40}),
                                                     .partitioner = fixed_size_partitioner(2)});
    ints.initializer().run();
    CHECK_THROWS_AS(ints.scatter_div(Tensor({0, 3}), Tensor({2, 0})), InvalidArgumentError);
    CHECK(ints.eval().to_vector<int32_t>() == std::vector<int32_t>{10, 20, 30, 40});
    ints.scatter_div(Tensor({0, 3}), Tensor({2, 4}));
    CHECK(ints.eval().to_vector<int32_t>() == std::vector<int32_t>{5, 20, 30, 10});
  }
}

// The class and message of the error `update` throws on `target`.
template <typename Target, typename Update>
std::string error_of(Target& target, Update update) {
  try {
    update(target);
  } catch (const Error& e) {
    return std::string(error_code_name(e.code())) + ": " + e.what();
  }
  FAIL("no error");
  return {};
}

TEST_CASE_METHOD(FreshSession, "a partitioned and an unpartitioned variable give the same errors",
                 "[partitioned]") {
  // The same variable twice, each named "t" in its own graph: split in
  // three parts, and whole.
  const Tensor init = Tensor::from_vector<int32_t>(std::vector<int32_t>(14, 12), {7, 2});
  PartitionedVariable split =
      get_variable("t", {.initializer = init, .partitioner = fixed_size_partitioner(3)});
  split.initializer().run();
  Graph other;
  Variable whole(init, {.name = "t", .graph = &other});
  whole.initializer().run();
  REQUIRE(whole.op_name() == split.name());

  struct Case {
    const char* what;
    std::function<void(PartitionedVariable&)> on_split;
    std::function<void(Variable&)> on_whole;
  };
  const Tensor ones = Tensor::from_vector<int32_t>({1, 1, 1, 1}, {2, 2});
  const std::vector<Case> cases = {
      {"index out of range",
       [&](auto& v) {
         v.scatter_add(Tensor({{0, 3}, {7, 1}}), Tensor(1));
       },
       [&](auto& v) {
         scatter_add(v, Tensor({{0, 3}, {7, 1}}), Tensor(1));
       }},
      {"negative index",
       [&](auto& v) {
         v.scatter_update(Tensor({2, -1}), ones);
       },
       [&](auto& v) {
         scatter_update(v, Tensor({2, -1}), ones);
       }},
      {"float indices",
       [&](auto& v) {
         v.scatter_sub(Tensor({1.f, 2.f}), ones);
       },
       [&](auto& v) {
         scatter_sub(v, Tensor({1.f, 2.f}), ones);
       }},
      {"updates of another dtype",
       [&](auto& v) {
         v.scatter_add(Tensor({0, 1}), Tensor::zeros(DType::kString, {2, 2}));
       },
       [&](auto& v) {
         scatter_add(v, Tensor({0, 1}), Tensor::zeros(DType::kString, {2, 2}));
       }},
      {"updates shape",
       [&](auto& v) {
         v.scatter_max(Tensor({0, 6}), Tensor::zeros(DType::kInt32, {2, 3}));
       },
       [&](auto& v) {
         scatter_max(v, Tensor({0, 6}), Tensor::zeros(DType::kInt32, {2, 3}));
       }},
      {"zero divisor",
       [&](auto& v) {
         v.scatter_div(Tensor({1, 5}), Tensor::from_vector<int32_t>({2, 3, 0, 4}, {2, 2}));
       },
       [&](auto& v) {
         scatter_div(v, Tensor({1, 5}), Tensor::from_vector<int32_t>({2, 3, 0, 4}, {2, 2}));
       }},
      {"options.name", [&](auto& v) { v.scatter_mul(Tensor({9}), Tensor(2), {.name = "mul"}); },
       [&](auto& v) { scatter_mul(v, Tensor({9}), Tensor(2), {.name = "mul"}); }},
      {"IndexedSlices of another dense_shape",
       [&](auto& v) {
         v.scatter_update(IndexedSlices(ones, Tensor({0, 1}), Tensor({8, 2})));
       },
       [&](auto& v) {
         scatter_update(v, IndexedSlices(ones, Tensor({0, 1}), Tensor({8, 2})));
       }},
      {"assign shape", [&](auto& v) { v.assign(ones); }, [&](auto& v) { v.assign(ones); }},
      {"assign of a scalar", [&](auto& v) { v.assign(Tensor(1)); },
       [&](auto& v) { v.assign(Tensor(1)); }},
      {"assign dtype",
       [&](auto& v) {
         v.assign(Tensor::zeros(DType::kFloat, {7, 2}));
       },
       [&](auto& v) {
         v.assign(Tensor::zeros(DType::kFloat, {7, 2}));
       }},
      {"assign_add shape", [&](auto& v) { v.assign_add(ones); },
       [&](auto& v) { v.assign_add(ones); }},
      {"assign_sub shape",
       [&](auto& v) {
         v.assign_sub(Tensor({1, 2}));
       },
       [&](auto& v) {
         v.assign_sub(Tensor({1, 2}));
       }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const std::string from_split = error_of(split, c.on_split);
    CHECK(from_split == error_of(whole, c.on_whole));
  }
  auto split_error = [&](std::string_view what) {
    for (const Case& c : cases) {
      if (c.what == what) return error_of(split, c.on_split);
    }
    FAIL("no case " << what);
    return std::string();
  };
  const std::string shapes = "ValueError: Assign to \"t\": shapes must match: target shape [7,2]";
  CHECK(split_error("assign shape") == shapes + ", value shape [2,2]");
  CHECK(split_error("assign of a scalar") == shapes + ", value shape []");
  CHECK(split_error("assign_add shape") ==
        "ValueError: AssignAdd to \"t\": shapes must match: target shape [7,2], value shape "
        "[2,2] (or a scalar)");
  CHECK(split_error("updates shape").starts_with("ValueError: scatter_max on \"t\": updates"));
  CHECK(split_error("IndexedSlices of another dense_shape") ==
        "InvalidArgumentError: scatter_update on \"t\": the IndexedSlices' dense_shape [8,2] "
        "differs from the variable's shape [7,2]");
  CHECK(split_error("index out of range").starts_with("InvalidArgumentError: scatter_add"));
  CHECK(split.eval().to_vector<int32_t>() == std::vector<int32_t>(14, 12));
  CHECK(whole.eval().to_vector<int32_t>() == std::vector<int32_t>(14, 12));
}

TEST_CASE_METHOD(FreshSession, "a part given twice is rejected", "[partitioned]") {
  // Accepted, every scatter would lock the part's mutex twice and hang.
  Variable p(Tensor::zeros(DType::kFloat, {2, 2}), {.name = "p"});
  Variable q(Tensor::zeros(DType::kFloat, {2, 2}), {.name = "q"});
  CHECK_THROWS_MATCHES(
      PartitionedVariable("t", TensorShape{6, 2}, DType::kFloat, {q, p, p}, {3, 1}), ValueError,
      Catch::Matchers::Message("PartitionedVariable \"t\": part \"p\" is given twice (parts 1 "
                               "and 2)"));
  PartitionedVariable t("t", TensorShape{4, 2}, DType::kFloat, {p, q}, {2, 1});
  t.initializer().run();
  t.scatter_add(Tensor({0, 3}), Tensor(1.f));
  CHECK(t.eval().to_vector<float>() == std::vector<float>{1, 1, 0, 0, 0, 0, 1, 1});
}

TEST_CASE_METHOD(FreshSession, "dense updates of a partitioned variable", "[partitioned]") {
  PartitionedVariable p =
      get_variable("p", {.initializer = Tensor::from_vector<float>(iota(10), {5, 2}),
                         .partitioner = fixed_size_partitioner(2)});
  p.initializer().run();
  p.assign_add(Tensor::from_vector<float>(std::vector<float>(10, 1.f), {5, 2}));
  std::vector<float> expected = iota(10);
  for (auto& x : expected) x += 1;
  CHECK(p.eval().to_vector<float>() == expected);
  p.assign_sub(Tensor(2.f));
  for (auto& x : expected) x -= 2;
  CHECK(p.eval().to_vector<float>() == expected);
  p.assign(Tensor::from_vector<float>(iota(10), {5, 2}) * 3.f);
  CHECK(p[0].eval().to_vector<float>() == std::vector<float>{0, 3, 6, 9, 12, 15});
  CHECK(p[1].eval().to_vector<float>() == std::vector<float>{18, 21, 24, 27});
  CHECK_THROWS_MATCHES(p.assign(Tensor::zeros(DType::kFloat, {4, 2})), ValueError,
                       Catch::Matchers::Message("Assign to \"p\": shapes must match: target "
                                                "shape [5,2], value shape [4,2]"));
  CHECK_THROWS_AS(p.assign(Tensor(1.f)), ValueError);
  CHECK(p[1].eval().to_vector<float>() == std::vector<float>{18, 21, 24, 27});
}

TEST_CASE_METHOD(FreshSession, "partitioned reuse and its errors", "[partitioned]") {
  GetVariableOptions o{.shape = TensorShape{8, 2}, .partitioner = fixed_size_partitioner(2)};
  PartitionedVariable a = [&] {
    auto s = variable_scope("s");
    return PartitionedVariable(get_variable("a", o));
  }();
  {
    auto s = variable_scope("s");
    CHECK_THROWS_MATCHES(
        get_variable("a", o), ValueError,
        Catch::Matchers::Message("Partitioned variable with name s/a already exists. Did you "
                                 "mean to set reuse=True in VarScope?"));
  }
  {
    auto t = variable_scope("t");
    get_variable("plain", {.shape = TensorShape{4}});
    CHECK_THROWS_WITH(
        get_variable("plain", {.shape = TensorShape{4}, .partitioner = fixed_size_partitioner(2)}),
        Contains("A partitioner was provided, but an unpartitioned version of the variable was "
                 "found: t/plain."));
    CHECK_THROWS_WITH(get_variable("scalar", {.initializer = Tensor(1.f),
                                              .partitioner = fixed_size_partitioner(2)}),
                      Contains("A partitioned Variable must have rank at least 1"));
    Partitioner two_axes = [](const TensorShape&, DType) { return std::vector<int64_t>{2, 2}; };
    CHECK_THROWS_WITH(get_variable("m", {.shape = TensorShape{4, 4}, .partitioner = two_axes}),
                      Contains("Can only slice a variable along one dimension"));
    Partitioner wrong_rank = [](const TensorShape&, DType) { return std::vector<int64_t>{2}; };
    CHECK_THROWS_WITH(
        get_variable("r", {.shape = TensorShape{4, 4}, .partitioner = wrong_rank}),
        Contains("Partitioner returned a partition list that does not match the Variable's rank"));
    Partitioner zero = [](const TensorShape&, DType) { return std::vector<int64_t>{0, 1}; };
    CHECK_THROWS_WITH(get_variable("z", {.shape = TensorShape{4, 4}, .partitioner = zero}),
                      Contains("Partitioner returned zero partitions for some axes: [0, 1]"));
  }
  auto s = variable_scope("s", {.reuse = true});
  CHECK(PartitionedVariable(get_variable("a", o)).same_as(a));
  GetVariableOptions other = o;
  other.partitioner = fixed_size_partitioner(4);
  CHECK_THROWS_MATCHES(
      get_variable("a", other), ValueError,
      Catch::Matchers::Message("Trying to reuse partitioned variable s/a, but specified "
                               "partitions [4, 1] and found partitions [2, 1]."));
  other = o;
  other.shape = TensorShape{9, 2};
  CHECK_THROWS_WITH(get_variable("a", other),
                    Contains("specified shape [9,2] and found shape [8,2]"));
  CHECK_THROWS_WITH(get_variable("missing", o),
                    Contains("PartitionedVariable s/missing does not exist, or was not created "
                             "with tf.get_variable()"));
  CHECK_THROWS_AS(Variable(get_variable("a", o)), ValueError);  // not a plain Variable
}

TEST_CASE_METHOD(FreshSession, "parts spread over devices; reads land on the chosen device",
                 "[partitioned]") {
  DeviceScope spread(round_robin_gpus());
  PartitionedVariable p =
      get_variable("p", {.initializer = Tensor::from_vector<float>(iota(12), {6, 2}),
                         .partitioner = fixed_size_partitioner(3)});
  auto& dm = DeviceManager::instance();
  for (size_t i = 0; i < p.size(); ++i) {
    if (dm.num_gpus() == 0) {
      CHECK(p[i].device().is_cpu());
    } else {
      CHECK(p[i].device().name() == dm.gpu(static_cast<int>(i) % dm.num_gpus()).name());
    }
  }
  p.initializer().run();
  Tensor on_cpu = p.as_tensor(dm.cpu());
  CHECK(on_cpu.device().is_cpu());
  CHECK(on_cpu.to_vector<float>() == iota(12));
}

TEST_CASE("locate_row routes every row of uneven parts as a naive loop does", "[partitioned]") {
  // Up to 8 parts the part is counted, above by binary search: both, with
  // empty parts.
  const std::vector<std::vector<int64_t>> layouts = {
      {6, 2},
      {2, 6},
      {1, 1, 8},
      {3, 0, 5},
      {8},
      {2, 0, 3, 1, 1, 0, 4, 2, 5, 0, 1, 3},
      {0, 1, 1, 1, 1, 1, 1, 1, 1, 0},  // 10 parts, empty at both ends
      {3, 3, 3, 3, 3, 3, 3, 3, 3},     // 9: the first searched count
      std::vector<int64_t>(33, 2)};
  for (const std::vector<int64_t>& sizes : layouts) {
    CAPTURE(sizes);
    std::vector<int64_t> offsets = {0};
    for (int64_t size : sizes) offsets.push_back(offsets.back() + size);
    for (int64_t row = 0; row < offsets.back(); ++row) {
      CAPTURE(row);
      size_t part = 0;
      int64_t start = 0;
      while (row >= start + sizes[part]) start += sizes[part++];
      const internal::PartRow at = internal::locate_row(offsets, row);
      CHECK(at.part == part);
      CHECK(at.local == row - start);
    }
  }
}

TEST_CASE("PartRoutes splits ids by part in order, as locate_row routes each", "[partitioned]") {
  // Counted parts (up to 8) and searched ones, empty parts, ids repeated
  // and out of order; each part's positions ascend.
  const std::vector<std::vector<int64_t>> layouts = {
      {5}, {6, 2}, {0, 4, 4}, {3, 0, 5, 2}, {1, 2, 3, 4, 5, 6, 7, 8}, std::vector<int64_t>(17, 3)};
  std::mt19937_64 rng(11);
  for (const std::vector<int64_t>& sizes : layouts) {
    CAPTURE(sizes);
    std::vector<int64_t> offsets = {0};
    for (int64_t size : sizes) offsets.push_back(offsets.back() + size);
    for (const size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
      CAPTURE(n);
      std::vector<int64_t> idx(n);
      for (int64_t& x : idx)
        x = static_cast<int64_t>(rng() % static_cast<uint64_t>(offsets.back()));
      const internal::PartRoutes routes(offsets, idx);
      REQUIRE(routes.num_parts() == sizes.size());
      REQUIRE(routes.local().size() == sizes.size());
      std::vector<std::vector<int64_t>> want_positions(sizes.size()), want_local(sizes.size());
      for (size_t i = 0; i < n; ++i) {
        size_t part = 0;
        int64_t start = 0;
        while (idx[i] >= start + sizes[part]) start += sizes[part++];
        want_positions[part].push_back(static_cast<int64_t>(i));
        want_local[part].push_back(idx[i] - start);
      }
      // Routes held at once (each thread keeps one buffer of positions)
      // do not share it: the second's ids reversed leave the first's intact.
      const std::vector<int64_t> reversed(idx.rbegin(), idx.rend());
      const internal::PartRoutes second(offsets, reversed);
      for (size_t k = 0; k < sizes.size(); ++k) {
        const std::span<const int64_t> theirs = second.positions(k);
        REQUIRE(theirs.size() == want_positions[k].size());
        for (size_t j = 0; j < theirs.size(); ++j) {
          CHECK(theirs[j] ==
                static_cast<int64_t>(n) - 1 - want_positions[k][want_positions[k].size() - 1 - j]);
        }
      }
      for (size_t k = 0; k < sizes.size(); ++k) {
        CAPTURE(k);
        const std::span<const int64_t> positions = routes.positions(k);
        CHECK(std::vector<int64_t>(positions.begin(), positions.end()) == want_positions[k]);
        CHECK(routes.local()[k].to_vector<int64_t>() == want_local[k]);
      }
    }
  }
}
