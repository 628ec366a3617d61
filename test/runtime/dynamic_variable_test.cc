// Dynamic (hash-keyed) variables: creation through variable scopes, rows
// drawn from (seed, key), every operation against a reference model (a
// std::map of rows), optimizers against the same steps on a dense variable
// with remapped ids, error paths that leave the table unchanged, and
// concurrent lookups, updates and erasures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "device_fixture.h"
#include "kernels/cpu/random.h"
#include "runtime/device_key_index.h"
#include "runtime/keyed_table.h"
#include "runtime/remote_storage.h"
#include "test_util.h"
#include "varstate/device_manager.h"
#include "varstate/dynamic_variable.h"
#include "varstate/error.h"
#include "varstate/gather.h"
#include "varstate/optimizers.h"
#include "varstate/placement.h"
#include "varstate/random_seed.h"
#include "varstate/scatter.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;
using Catch::Matchers::Contains;

namespace {

using Rows = std::map<int64_t, std::vector<float>>;

Tensor keys_tensor(const std::vector<int64_t>& keys) { return Tensor::from_vector(keys); }

// The keys once each, ascending.
std::vector<int64_t> distinct_of(std::vector<int64_t> keys) {
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

Tensor rows_tensor(const std::vector<float>& values, int64_t n, int64_t dim) {
  return Tensor::from_vector(values, TensorShape({n, dim})).on(test_device());
}

// The table's rows as a map, from export_rows().
Rows exported(const DynamicVariable& v) {
  KeysAndValues kv = v.export_rows();
  const std::vector<int64_t> keys = kv.keys.to_vector<int64_t>();
  const std::vector<float> values = kv.values.to_vector<float>();
  const size_t dim = static_cast<size_t>(v.dim());
  Rows out;
  for (size_t i = 0; i < keys.size(); ++i) {
    out[keys[i]] = std::vector<float>(values.begin() + static_cast<std::ptrdiff_t>(i * dim),
                                      values.begin() + static_cast<std::ptrdiff_t>((i + 1) * dim));
  }
  return out;
}

void init_all() { Session().run(global_variables_initializer()); }

// The shardings a test runs under: one table, and with GPUs (emulated in
// CI) one sharded over the CPU and every GPU.
std::vector<std::vector<std::string>> shardings() {
  std::vector<std::vector<std::string>> out = {{}};
  const int gpus = DeviceManager::instance().num_gpus();
  if (gpus > 0) {
    std::vector<std::string> devices = {"/device:CPU:0"};
    for (int g = 0; g < gpus; ++g) devices.push_back("/device:GPU:" + std::to_string(g));
    out.push_back(devices);
  }
  return out;
}

}  // namespace

TEST_CASE_METHOD(FreshSession, "dynamic variable: scope, collections, reuse and shape",
                 "[dynamic]") {
  DynamicVariable emb = [] {
    auto scope = variable_scope("tower");
    return get_dynamic_variable("emb", {.dim = 4});
  }();
  CHECK(emb.name() == "tower/emb:0");
  CHECK(emb.op_name() == "tower/emb");
  CHECK(emb.dtype() == DType::kFloat);
  CHECK(emb.key_dtype() == DType::kInt64);
  CHECK(emb.dim() == 4);
  CHECK(&emb.device() == &test_device());
  const std::vector<Variable> globals = global_variables();
  REQUIRE(globals.size() == 1);
  CHECK(globals[0].same_as(emb.variable()));
  CHECK(trainable_variables().size() == 1);
  CHECK(DynamicVariable::from_variable(globals[0]).has_value());
  CHECK_FALSE(emb.is_initialized());
  CHECK_THROWS_AS(emb.gather(keys_tensor({1})), FailedPreconditionError);
  init_all();
  CHECK(emb.size() == 0);
  CHECK(emb.variable().shape() == TensorShape({0, 4}));

  // Reuse: the same object; a mismatch or a missing variable is ValueError.
  {
    auto scope = variable_scope("tower", {.reuse = true});
    DynamicVariable again = get_dynamic_variable("emb", {.dim = 4});
    CHECK(again.same_as(emb));
    CHECK_THROWS_WITH(get_dynamic_variable("emb", {.dim = 8}),
                      Contains("specified dim 8 and found dim 4"));
    CHECK_THROWS_WITH(get_dynamic_variable("emb", {.dim = 4, .key_dtype = DType::kInt32}),
                      Contains("key dtype int32"));
    CHECK_THROWS_WITH(get_dynamic_variable("other", {.dim = 4}), Contains("does not exist"));
  }
  {
    auto scope = variable_scope("tower");
    CHECK_THROWS_WITH(get_dynamic_variable("emb", {.dim = 4}), Contains("already exists"));
  }
  {
    auto scope = variable_scope("d");
    get_variable("dense", {.shape = TensorShape{2, 2}});
  }
  {
    auto scope = variable_scope("d", {.reuse = true});
    CHECK_THROWS_WITH(get_dynamic_variable("dense", {.dim = 2}), Contains("dense variable"));
  }
  CHECK_THROWS_WITH(get_dynamic_variable("bad_dim", {.dim = 0}), Contains("at least 1"));
  CHECK_THROWS_WITH(get_dynamic_variable("bad_dtype", {.dim = 2, .dtype = DType::kInt32}),
                    Contains("float16, bfloat16, float32 or float64"));
  CHECK_THROWS_WITH(get_dynamic_variable("bad_keys", {.dim = 2, .key_dtype = DType::kString}),
                    Contains("int64 or int32"));
  CHECK_THROWS_WITH(
      get_dynamic_variable("bad_init", {.dim = 2, .initializer = glorot_uniform_initializer()}),
      Contains("draws each row from its key"));
  // A refused creation leaves no variable behind.
  CHECK(global_variables().size() == 2);
}

TEST_CASE_METHOD(FreshSession, "dynamic variable: a new key's row depends on the seed and key only",
                 "[dynamic]") {
  const int64_t dim = 6;
  const std::vector<int64_t> keys = {5, int64_t{1} << 40, -3, INT64_MIN, INT64_MIN + 1};
  auto make = [&](const char* name) {
    return get_dynamic_variable(
        name, {.dim = dim, .initializer = random_normal_initializer({.stddev = 0.5, .seed = 7})});
  };
  DynamicVariable a = make("a");
  DynamicVariable b = make("b");
  init_all();
  std::vector<int64_t> reversed(keys.rbegin(), keys.rend());
  const std::vector<float> ra = a.gather(keys_tensor(keys)).to_vector<float>();
  const std::vector<float> rb = b.gather(keys_tensor(reversed)).to_vector<float>();
  // The same seed pair gives the row of the random op with the key added
  // to seed2, whatever the order or the table.
  const SeedPair seeds = resolve_seed(int64_t{7});
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<float> expected(dim);
    kernels::cpu::random_normal<float>(
        expected.data(), dim, 0, static_cast<uint64_t>(seeds.seed),
        static_cast<uint64_t>(seeds.seed2) + static_cast<uint64_t>(keys[i]), 0.0f, 0.5f);
    const size_t j = keys.size() - 1 - i;
    for (int64_t e = 0; e < dim; ++e) {
      CAPTURE(keys[i], e);
      CHECK(ra[i * dim + static_cast<size_t>(e)] == expected[static_cast<size_t>(e)]);
      CHECK(rb[j * dim + static_cast<size_t>(e)] == expected[static_cast<size_t>(e)]);
    }
  }
  CHECK(a.size() == static_cast<int64_t>(keys.size()));
  // Different keys, different rows.
  CHECK(std::vector<float>(ra.begin(), ra.begin() + dim) !=
        std::vector<float>(ra.begin() + dim, ra.begin() + 2 * dim));
  // Evaluation reads insert nothing: an absent key reads its would-be row.
  const std::vector<float> fresh = a.lookup(keys_tensor({99})).to_vector<float>();
  CHECK(a.size() == static_cast<int64_t>(keys.size()));
  CHECK(a.gather(keys_tensor({99})).to_vector<float>() == fresh);
  CHECK(a.size() == static_cast<int64_t>(keys.size()) + 1);
}

TEST_CASE_METHOD(FreshSession,
                 "dynamic variable: evaluation lookups match a CPU twin, keys on host or device",
                 "[dynamic]") {
  // On a GPU an evaluation lookup is resolved and composed there (absent
  // keys: their default or their initial rows drawn in place) without the
  // host waiting; here its rows must equal a CPU table's bit for bit, for
  // batches below and above the device index's threshold, keys on the host
  // and in the table's memory.
  const int64_t dim = 5;
  auto make = [&](const std::string& name, std::optional<Tensor> fallback) {
    return get_dynamic_variable(
        name, {.dim = dim,
               .initializer = truncated_normal_initializer({.stddev = 0.3, .seed = 11}),
               .default_value = fallback});
  };
  DynamicVariable drawn = make("drawn", std::nullopt);
  DynamicVariable with_default = make("with_default", Tensor(-2.5f));
  DynamicVariable with_row = make("with_row", Tensor::from_vector<float>({1, 2, 3, 4, 5}));
  std::vector<DynamicVariable> twins;
  {
    DeviceScope cpu("/device:CPU:0");
    twins = {make("drawn_cpu", std::nullopt), make("with_default_cpu", Tensor(-2.5f)),
             make("with_row_cpu", Tensor::from_vector<float>({1, 2, 3, 4, 5}))};
  }
  init_all();
  std::mt19937_64 rng(kSeed);
  std::vector<int64_t> present(3000);
  for (auto& k : present) k = static_cast<int64_t>(rng());
  const std::vector<DynamicVariable*> tables = {&drawn, &with_default, &with_row};
  // The present keys' rows moved off their initial rows (so that a row
  // drawn where it should have been read shows).
  std::vector<int64_t> distinct = distinct_of(present);
  const Tensor moved =
      Tensor::filled(DType::kFloat, TensorShape({static_cast<int64_t>(distinct.size()), dim}),
                     Tensor(10.0f), DeviceManager::instance().cpu());
  for (size_t t = 0; t < tables.size(); ++t) {
    tables[t]->scatter_update(keys_tensor(distinct), moved);  // inserts them
    twins[t].scatter_update(keys_tensor(distinct), moved);
  }
  for (const int64_t n : {int64_t{7}, int64_t{2500}}) {
    std::vector<int64_t> keys;
    for (int64_t i = 0; i < n; ++i) {
      // About half present; absent ones include the reserved key words.
      const uint64_t r = rng();
      keys.push_back(r % 2 ? present[r % present.size()]
                           : (r % 7 == 0 ? INT64_MIN : static_cast<int64_t>(r)));
    }
    const Tensor host_keys = keys_tensor(keys);
    const Tensor device_keys = host_keys.on(test_device());
    for (size_t t = 0; t < tables.size(); ++t) {
      CAPTURE(n, t);
      const int64_t size = tables[t]->size();
      const std::vector<float> want = twins[t].lookup(host_keys).to_vector<float>();
      CHECK(tables[t]->lookup(host_keys).to_vector<float>() == want);
      CHECK(tables[t]->lookup(device_keys).to_vector<float>() == want);
      CHECK(tables[t]->size() == size);  // evaluation inserts nothing
    }
  }
}

TEST_CASE_METHOD(FreshSession, "dynamic variable: every operation against a reference map",
                 "[dynamic]") {
  const int64_t dim = 3;
  const std::vector<std::string> devices = GENERATE(from_range(shardings()));
  CAPTURE(devices);
  DynamicVariable v = get_dynamic_variable(
      "emb", {.dim = dim, .initializer = constant_initializer(Tensor(0.5)), .devices = devices});
  DynamicVariable with_default = get_dynamic_variable(
      "emb_default", {.dim = dim, .default_value = Tensor(-1.0f), .devices = devices});
  init_all();
  Rows ref;
  std::mt19937_64 rng(kSeed);
  auto random_keys = [&](int n) {
    std::vector<int64_t> k(static_cast<size_t>(n));
    // A small key space (with the reserved words) so that keys repeat.
    for (auto& key : k) {
      const int64_t r = static_cast<int64_t>(rng() % 40);
      key = r == 0 ? INT64_MIN : r == 1 ? INT64_MIN + 1 : (r - 20) * 1000003;
    }
    return k;
  };
  auto random_rows = [&](size_t n) {
    std::vector<float> out(n * static_cast<size_t>(dim));
    for (float& x : out) x = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 4.0f;
    return out;
  };
  auto ensure = [&](int64_t key) {
    if (!ref.count(key)) ref[key] = std::vector<float>(static_cast<size_t>(dim), 0.5f);
    return &ref[key];
  };
  for (int step = 0; step < 300; ++step) {
    const int op = static_cast<int>(rng() % 8);
    const std::vector<int64_t> keys = random_keys(1 + static_cast<int>(rng() % 12));
    const int64_t n = static_cast<int64_t>(keys.size());
    CAPTURE(step, op);
    if (op == 0) {  // training gather
      const std::vector<float> got = v.gather(keys_tensor(keys)).to_vector<float>();
      for (size_t i = 0; i < keys.size(); ++i) {
        const std::vector<float>& row = *ensure(keys[i]);
        for (int64_t e = 0; e < dim; ++e) REQUIRE(got[i * dim + e] == row[e]);
      }
    } else if (op == 1) {  // evaluation lookup
      const std::vector<float> got = v.lookup(keys_tensor(keys)).to_vector<float>();
      for (size_t i = 0; i < keys.size(); ++i) {
        const auto it = ref.find(keys[i]);
        for (int64_t e = 0; e < dim; ++e) {
          REQUIRE(got[i * dim + e] == (it == ref.end() ? 0.5f : it->second[e]));
        }
      }
    } else if (op == 2) {  // insert: the last row of a repeated key wins
      const std::vector<float> rows = random_rows(keys.size());
      v.insert(keys_tensor(keys), rows_tensor(rows, n, dim));
      for (size_t i = 0; i < keys.size(); ++i) {
        ref[keys[i]] = std::vector<float>(rows.begin() + i * dim, rows.begin() + (i + 1) * dim);
      }
    } else if (op == 3) {  // erase
      int64_t expected = 0;
      for (int64_t k : keys) expected += static_cast<int64_t>(ref.erase(k));
      CHECK(v.erase(keys_tensor(keys)) == expected);
    } else {  // the scatter family, duplicates applied one after another
      const std::vector<float> rows = random_rows(keys.size());
      const Tensor k = keys_tensor(keys);
      const Tensor u = rows_tensor(rows, n, dim);
      std::function<float(float, float)> f;
      switch (op) {
        case 4:
          v.scatter_add(k, u);
          f = [](float a, float b) { return a + b; };
          break;
        case 5:
          v.scatter_sub(k, u);
          f = [](float a, float b) { return a - b; };
          break;
        case 6:
          v.scatter_max(k, u);
          f = [](float a, float b) { return std::max(a, b); };
          break;
        default:
          v.scatter_mul(k, u);
          f = [](float a, float b) { return a * b; };
          break;
      }
      for (size_t i = 0; i < keys.size(); ++i) {
        std::vector<float>& row = *ensure(keys[i]);
        for (int64_t e = 0; e < dim; ++e) row[e] = f(row[e], rows[i * dim + e]);
      }
    }
    REQUIRE(v.size() == static_cast<int64_t>(ref.size()));
    REQUIRE(exported(v) == ref);
  }
  // The Variable reads the rows in ascending key order.
  const std::vector<float> value = v.variable().value().to_vector<float>();
  std::vector<float> expected;
  for (const auto& [key, row] : ref) expected.insert(expected.end(), row.begin(), row.end());
  CHECK(value == expected);
  CHECK(v.variable().shape() == TensorShape({static_cast<int64_t>(ref.size()), dim}));
  // A default value for absent keys in evaluation.
  with_default.insert(keys_tensor({4}), rows_tensor({1, 2, 3}, 1, dim));
  CHECK(with_default.lookup(keys_tensor({4, 5})).to_vector<float>() ==
        std::vector<float>{1, 2, 3, -1, -1, -1});
  CHECK(with_default.size() == 1);
}

TEST_CASE_METHOD(FreshSession,
                 "dynamic variable: a large insert keeps each repeated key's last row on every "
                 "path",
                 "[dynamic]") {
  // Batches past the thresholds from which an insert splits over the pool
  // (by index shard, and its rows by slot): a table reserved ahead (each
  // shard writes its keys' rows as it inserts them), one that grows (the
  // rows written after the index), a capped one (the policy's path), and
  // present keys overwritten. Keys repeat at random positions, far apart.
  const int64_t dim = 64;
  const int64_t n = 40000;
  const int64_t initial_capacity = GENERATE(int64_t{0}, int64_t{100000});
  const int64_t max_rows = GENERATE(int64_t{0}, int64_t{90000});
  const std::vector<std::string> devices = GENERATE(from_range(shardings()));
  CAPTURE(initial_capacity, max_rows, devices);
  DynamicVariable v = get_dynamic_variable("emb", {.dim = dim,
                                                   .initializer = zeros_initializer(),
                                                   .devices = devices,
                                                   .initial_capacity = initial_capacity,
                                                   .max_rows = max_rows});
  init_all();
  std::mt19937_64 rng(kSeed + 3);
  Rows ref;
  std::vector<int64_t> first_keys;  // the first round's distinct keys
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    // n / 2 distinct keys, each named twice: new ones, and in the second
    // round half of the first round's keys again (overwritten).
    std::vector<int64_t> distinct(static_cast<size_t>(n / 2));
    for (size_t i = 0; i < distinct.size(); ++i) {
      distinct[i] = round == 1 && i % 2 == 0 ? first_keys[i] : static_cast<int64_t>(rng() >> 1);
    }
    if (round == 0) first_keys = distinct;
    std::vector<int64_t> keys = distinct;
    keys.insert(keys.end(), distinct.begin(), distinct.end());
    std::shuffle(keys.begin(), keys.end(), rng);
    std::vector<float> rows(static_cast<size_t>(n * dim));
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i] = static_cast<float>((i + static_cast<size_t>(round)) % 1000003);
    }
    v.insert(keys_tensor(keys), rows_tensor(rows, n, dim));
    for (int64_t i = 0; i < n; ++i) {
      ref[keys[static_cast<size_t>(i)]] =
          std::vector<float>(rows.begin() + i * dim, rows.begin() + (i + 1) * dim);
    }
  }
  REQUIRE(v.size() == static_cast<int64_t>(ref.size()));
  // The keys whose row is not their last one (the first named).
  const Rows got = exported(v);
  int64_t wrong = 0;
  int64_t first_wrong = 0;
  for (const auto& [key, row] : ref) {
    const auto it = got.find(key);
    if ((it == got.end() || it->second != row) && wrong++ == 0) first_wrong = key;
  }
  CAPTURE(first_wrong);
  CHECK(wrong == 0);
}

TEST_CASE_METHOD(FreshSession, "dynamic variable: the Variable's scatter and gather take keys",
                 "[dynamic]") {
  DynamicVariable v = get_dynamic_variable("emb", {.dim = 2, .initializer = zeros_initializer()});
  init_all();
  Variable var = v.variable();
  scatter_add(var, keys_tensor({10, 10, -7}), rows_tensor({1, 2, 3, 4, 5, 6}, 3, 2));
  CHECK(exported(v) == Rows{{-7, {5, 6}}, {10, {4, 6}}});
  CHECK(gather(var, keys_tensor({10, 3})).to_vector<float>() == std::vector<float>{4, 6, 0, 0});
  CHECK(v.size() == 3);
  // int32 literals convert to the key dtype; a strongly typed int32 tensor
  // is a TypeError, and nothing changes.
  v.scatter_update(Tensor({3}), Tensor({{1.0f, 1.0f}}));
  CHECK(exported(v)[3] == std::vector<float>{1, 1});
  CHECK_THROWS_AS(v.scatter_add(Tensor::from_vector<int32_t>({3}), Tensor({{1.0f, 1.0f}})),
                  TypeError);
  CHECK_THROWS_AS(v.gather(Tensor::from_vector<int32_t>({4})), TypeError);
  CHECK(exported(v)[3] == std::vector<float>{1, 1});
  CHECK(v.size() == 3);
}

TEST_CASE_METHOD(FreshSession, "dynamic variable: bad input changes nothing", "[dynamic]") {
  DynamicVariable v = get_dynamic_variable("emb", {.dim = 2});
  init_all();
  v.insert(keys_tensor({1, 2}), rows_tensor({1, 2, 3, 4}, 2, 2));
  const Rows before = exported(v);
  CHECK_THROWS_WITH(v.insert(keys_tensor({3}), rows_tensor({1, 2, 3, 4}, 2, 2)),
                    Contains("values must have shape [1,2]") && Contains("\"emb\""));
  CHECK_THROWS_AS(v.scatter_add(keys_tensor({3, 4}), rows_tensor({1, 2}, 1, 2)), ValueError);
  CHECK_THROWS_AS(v.insert(keys_tensor({3}), Tensor({{1.0, 2.0}}).cast(DType::kDouble)), TypeError);
  CHECK_THROWS_WITH(v.variable().assign(Tensor::zeros(DType::kFloat, {2, 2})),
                    Contains("dynamic variable"));
  CHECK_THROWS_AS(v.variable().assign_add(Tensor::zeros(DType::kFloat, {2, 2})),
                  UnimplementedError);
  CHECK_THROWS_WITH(v.gradient(keys_tensor({1}), rows_tensor({1, 2, 3, 4}, 2, 2)),
                    Contains("grads must have shape [1,2]"));
  GradientDescentOptimizer sgd(0.1);
  CHECK_THROWS_WITH(sgd.apply_gradients({{Tensor::zeros(DType::kFloat, {2, 2}), v.variable()}}),
                    Contains("sparse gradients"));
  CHECK(exported(v) == before);
}

TEST_CASE_METHOD(FreshSession, "dynamic variable: optimizers match a dense variable step by step",
                 "[dynamic]") {
  const int64_t dim = 3;
  // Keys and their positions in a dense table.
  const std::vector<int64_t> key_space = {-900, 17, 1 << 30, int64_t{1} << 50, 5};
  std::mt19937_64 rng(kSeed + 1);
  struct Case {
    const char* name;
    std::function<std::unique_ptr<Optimizer>()> make;
  };
  const std::vector<Case> cases = {
      {"sgd", [] { return std::make_unique<GradientDescentOptimizer>(0.1); }},
      {"momentum", [] { return std::make_unique<MomentumOptimizer>(0.1, 0.9); }},
      {"adagrad", [] { return std::make_unique<AdagradOptimizer>(0.1); }},
      {"rowwise_adagrad", [] { return std::make_unique<RowwiseAdagradOptimizer>(0.1); }},
      {"adam", [] { return std::make_unique<AdamOptimizer>(); }},
      {"lazy_adam", [] { return std::make_unique<LazyAdamOptimizer>(); }},
      {"rmsprop", [] { return std::make_unique<RMSPropOptimizer>(0.01); }},
      {"ftrl", [] { return std::make_unique<FtrlOptimizer>(0.1); }},
      {"adadelta", [] { return std::make_unique<AdadeltaOptimizer>(); }},
      {"proximal_sgd",
       [] {
         return std::make_unique<ProximalGradientDescentOptimizer>(
             0.1, ProximalGradientDescentOptions{.l1_regularization_strength = 0.01});
       }},
      {"proximal_adagrad", [] { return std::make_unique<ProximalAdagradOptimizer>(0.1); }},
      // Each optimizer reads a step variable of its own, both at 5.
      {"adagrad_da",
       [] {
         return std::make_unique<AdagradDAOptimizer>(
             0.1, Variable(Tensor(int64_t{5}), {.trainable = false, .name = "da_step"}),
             AdagradDAOptions{.l1_regularization_strength = 0.01});
       }},
  };
  const std::vector<std::string> devices = GENERATE(from_range(shardings()));
  CAPTURE(devices);
  for (const Case& c : cases) {
    SECTION(c.name) {
      DynamicVariable dyn = get_dynamic_variable(
          "dyn",
          {.dim = dim, .initializer = constant_initializer(Tensor(0.25)), .devices = devices});
      Variable dense =
          get_variable("dense", {.shape = TensorShape{static_cast<int64_t>(key_space.size()), dim},
                                 .initializer = constant_initializer(Tensor(0.25))});
      std::unique_ptr<Optimizer> opt_dyn = c.make();
      std::unique_ptr<Optimizer> opt_dense = c.make();
      init_all();
      for (int step = 0; step < 8; ++step) {
        // Some keys (with repeats); a key's first batch creates its rows,
        // which the dense table has held untouched at the same values.
        std::vector<int64_t> positions;
        for (int j = 0; j < 5; ++j) positions.push_back(static_cast<int64_t>(rng() % 5));
        std::vector<int64_t> keys;
        for (int64_t p : positions) keys.push_back(key_space[static_cast<size_t>(p)]);
        std::vector<float> g(positions.size() * dim);
        for (float& x : g) x = static_cast<float>(static_cast<int>(rng() % 9) - 4) / 8.0f;
        const int64_t n = static_cast<int64_t>(positions.size());
        opt_dyn->apply_gradients({dyn.gradient(keys_tensor(keys), rows_tensor(g, n, dim))});
        opt_dense->apply_gradients(
            {{IndexedSlices(rows_tensor(g, n, dim), keys_tensor(positions).on(test_device())),
              dense}});
      }
      const Rows got = exported(dyn);
      const std::vector<float> want = dense.value().to_vector<float>();
      CHECK(got.size() >= 3);
      for (size_t p = 0; p < key_space.size(); ++p) {
        for (int64_t e = 0; e < dim; ++e) {
          CAPTURE(p, e);
          const auto it = got.find(key_space[p]);
          CHECK((it == got.end() ? 0.25f : it->second[e]) == want[p * dim + e]);
        }
      }
      // The slots are dynamic, keyed like the variable.
      for (const std::string& slot_name : opt_dyn->get_slot_names()) {
        std::optional<Variable> slot = opt_dyn->get_slot(dyn.variable(), slot_name);
        REQUIRE(slot.has_value());
        CHECK(slot->shape().dim(0) == dyn.size());
        CHECK_FALSE(DynamicVariable::from_variable(*slot).has_value());  // a slot, not a table
      }
    }
  }
}

TEST_CASE_METHOD(FreshSession, "dynamic variable: slots are created and erased with their keys",
                 "[dynamic]") {
  DynamicVariable v =
      get_dynamic_variable("emb", {.dim = 2, .initializer = constant_initializer(Tensor(1.0))});
  AdagradOptimizer opt(0.5, {.initial_accumulator_value = 0.1});
  init_all();
  opt.apply_gradients({v.gradient(keys_tensor({7, 8}), rows_tensor({1, 1, 2, 2}, 2, 2))});
  Variable accum = *opt.get_slot(v.variable(), "accumulator");
  CHECK(accum.shape() == TensorShape({2, 2}));
  CHECK(accum.value().to_vector<float>() == std::vector<float>{1.1f, 1.1f, 4.1f, 4.1f});
  // A key inserted later has the slot's initial value; an erased one leaves
  // both, and comes back fresh.
  v.insert(keys_tensor({9}), rows_tensor({3, 3}, 1, 2));
  CHECK(accum.value().to_vector<float>() == std::vector<float>{1.1f, 1.1f, 4.1f, 4.1f, 0.1f, 0.1f});
  CHECK(v.erase(keys_tensor({7, 100})) == 1);
  CHECK(accum.shape() == TensorShape({2, 2}));
  v.gather(keys_tensor({7}));
  CHECK(accum.value().to_vector<float>() == std::vector<float>{0.1f, 0.1f, 4.1f, 4.1f, 0.1f, 0.1f});
  CHECK(exported(v).at(7) == std::vector<float>{1, 1});
}

TEST_CASE_METHOD(FreshSession,
                 "dynamic variable: arenas that grow past 2 MiB keep their rows and slots",
                 "[dynamic]") {
  // 40,000 keys of 64 floats: the arenas (the rows' and Adagrad's
  // accumulators) grow by half many times past 2 MiB, where the CPU remaps
  // them instead of copying. A twin reserved ahead never grows: both must
  // end bitwise alike.
  const int64_t dim = 64, keys_total = 40000, batch = 2500;
  const std::vector<std::string> devices = GENERATE(from_range(shardings()));
  CAPTURE(devices);
  auto make = [&](const std::string& name, int64_t capacity) {
    return get_dynamic_variable(name, {.dim = dim,
                                       .initializer = constant_initializer(Tensor(0.25)),
                                       .devices = devices,
                                       .initial_capacity = capacity});
  };
  DynamicVariable grown = make("grown", 0);
  DynamicVariable reserved = make("reserved", keys_total);
  AdagradOptimizer opt(0.1, {.initial_accumulator_value = 0.1});
  init_all();
  std::mt19937_64 rng(kSeed);
  std::vector<int64_t> all;
  for (int64_t b = 0; b < keys_total; b += batch) {
    std::vector<int64_t> keys(static_cast<size_t>(batch));
    for (auto& k : keys) k = static_cast<int64_t>(rng());
    std::vector<float> values(static_cast<size_t>(batch * dim));
    for (float& x : values) x = static_cast<float>(static_cast<int>(rng() % 201) - 100) / 64.0f;
    for (DynamicVariable* v : {&grown, &reserved}) {
      v->insert(keys_tensor(keys), rows_tensor(values, batch, dim));
    }
    all.insert(all.end(), keys.begin(), keys.end());
    // A step on some of the keys so far (older and new ones): the
    // accumulators' rows must survive the next growth too.
    std::vector<int64_t> some;
    for (int i = 0; i < 300; ++i) some.push_back(all[rng() % all.size()]);
    std::vector<float> g(some.size() * static_cast<size_t>(dim));
    for (float& x : g) x = static_cast<float>(static_cast<int>(rng() % 9) - 4) / 8.0f;
    const Tensor grads = rows_tensor(g, static_cast<int64_t>(some.size()), dim);
    opt.apply_gradients(
        {grown.gradient(keys_tensor(some), grads), reserved.gradient(keys_tensor(some), grads)});
  }
  REQUIRE(grown.size() == keys_total);
  // Compared element by element (Catch would print whole tables).
  auto first_difference = [](const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return int64_t{-2};
    const auto at = std::mismatch(a.begin(), a.end(), b.begin());
    return at.first == a.end() ? int64_t{-1} : static_cast<int64_t>(at.first - a.begin());
  };
  KeysAndValues a = grown.export_rows(), b = reserved.export_rows();
  CHECK(a.keys.to_vector<int64_t>() == b.keys.to_vector<int64_t>());
  CHECK(first_difference(a.values.to_vector<float>(), b.values.to_vector<float>()) == -1);
  const Tensor probe = keys_tensor(all);
  CHECK(first_difference(grown.lookup(probe).to_vector<float>(),
                         reserved.lookup(probe).to_vector<float>()) == -1);
  const Variable accum_grown = *opt.get_slot(grown.variable(), "accumulator");
  const Variable accum_reserved = *opt.get_slot(reserved.variable(), "accumulator");
  CHECK(first_difference(accum_grown.value().to_vector<float>(),
                         accum_reserved.value().to_vector<float>()) == -1);
}

TEST_CASE_METHOD(FreshSession, "dynamic variable: concurrent lookups, updates and erasures",
                 "[dynamic][stress]") {
  const int64_t dim = 4;
  // One table, and (with GPUs) tables sharded over the CPU and every GPU.
  const std::vector<std::string> devices = GENERATE(from_range(shardings()));
  CAPTURE(devices);
  DynamicVariable v = get_dynamic_variable(
      "emb", {.dim = dim, .initializer = zeros_initializer(), .devices = devices});
  init_all();
  // Training steps on new keys meanwhile, in another table, while a
  // second thread inserts into it: its row count (and its slot's) moves
  // while each step is checked.
  DynamicVariable trained = get_dynamic_variable(
      "trained", {.dim = dim, .initializer = zeros_initializer(), .devices = devices});
  AdagradOptimizer opt(0.1);
  init_all();
  constexpr int kThreads = 4;
  constexpr int kRounds = 150;
  // Thread t owns keys t, t + kThreads, ...: it adds 1 to each of its keys
  // every round, and erases and re-creates its key 1000 + t; everyone
  // gathers every key and exports meanwhile.
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  std::string error;
  auto fail = [&] {
    std::lock_guard lock(error_mu);
    try {
      throw;
    } catch (const std::exception& e) {
      error = e.what();
    }
    failed = true;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        std::vector<int64_t> mine;
        for (int64_t k = t; k < 64; k += kThreads) mine.push_back(k * 7919);
        const int64_t m = static_cast<int64_t>(mine.size());
        const Tensor ones = Tensor::filled(DType::kFloat, {m, dim}, Tensor(1.0f), test_device());
        for (int r = 0; r < kRounds; ++r) {
          v.scatter_add(keys_tensor(mine), ones);
          std::vector<int64_t> all;
          for (int64_t k = 0; k < 64; ++k) all.push_back(k * 7919);
          v.lookup(keys_tensor(all));
          v.gather(keys_tensor({1000 + t}));
          if (r % 3 == 0) v.erase(keys_tensor({1000 + t}));
          if (r % 25 == 0) v.export_rows();
        }
      } catch (...) {
        fail();
      }
    });
  }
  Graph& graph = get_default_graph();
  threads.emplace_back([&] {
    try {
      auto in_graph = graph.as_default();  // the optimizer's graph on this thread too
      for (int r = 0; r < kRounds; ++r) {
        opt.apply_gradients({trained.gradient(
            keys_tensor({r, -1 - r}),
            Tensor::filled(DType::kFloat, {2, dim}, Tensor(1.0f), test_device()))});
      }
    } catch (...) {
      fail();
    }
  });
  threads.emplace_back([&] {
    try {
      for (int r = 0; r < kRounds; ++r) trained.gather(keys_tensor({100000 + r}));
    } catch (...) {
      fail();
    }
  });
  for (auto& th : threads) th.join();
  CAPTURE(error);
  REQUIRE_FALSE(failed);
  CHECK(trained.size() == 3 * kRounds);
  const Rows rows = exported(v);
  for (int64_t k = 0; k < 64; ++k) {
    CAPTURE(k);
    REQUIRE(rows.count(k * 7919));
    CHECK(rows.at(k * 7919) == std::vector<float>(dim, static_cast<float>(kRounds)));
  }
  // Keys 1000 + t: present (their last round gathered after the erase).
  for (int t = 0; t < kThreads; ++t) CHECK(rows.count(1000 + t) == 1);
  CHECK(v.size() == 64 + kThreads);
}

TEST_CASE_METHOD(FreshSession, "dynamic variable: admission after k sightings", "[dynamic]") {
  DynamicVariable v = get_dynamic_variable("emb", {.dim = 2,
                                                   .initializer = constant_initializer(Tensor(1.0)),
                                                   .default_value = Tensor(0.0f),
                                                   .admit_after = 3});
  GradientDescentOptimizer sgd(1.0);
  init_all();
  // Two sightings: the default row, no key.
  for (int i = 0; i < 2; ++i) {
    CHECK(v.gather(keys_tensor({5})).to_vector<float>() == std::vector<float>{0, 0});
  }
  CHECK(v.size() == 0);
  // A gradient of a candidate is dropped (and counts as its third sighting:
  // the key is admitted, at its initial row, by this step).
  sgd.apply_gradients({v.gradient(keys_tensor({5}), rows_tensor({1, 1}, 1, 2))});
  CHECK(v.size() == 1);
  CHECK(exported(v).at(5) == std::vector<float>{0, 0});
  // Three sightings in one batch admit a key at once; two do not.
  v.gather(keys_tensor({7, 7, 7, 8, 8}));
  CHECK(exported(v).count(7) == 1);
  CHECK(exported(v).count(8) == 0);
  // Updates of a candidate change nothing; it then reads the default row.
  v.scatter_add(keys_tensor({9}), rows_tensor({4, 4}, 1, 2));
  CHECK(exported(v).count(9) == 0);
  CHECK(v.lookup(keys_tensor({9})).to_vector<float>() == std::vector<float>{0, 0});
  // insert() admits at once.
  v.insert(keys_tensor({10}), rows_tensor({3, 3}, 1, 2));
  CHECK(exported(v).at(10) == std::vector<float>{3, 3});
}

TEST_CASE_METHOD(FreshSession, "dynamic variable: a row cap evicts the least recently updated",
                 "[dynamic]") {
  DynamicVariable v =
      get_dynamic_variable("emb", {.dim = 2, .initializer = zeros_initializer(), .max_rows = 3});
  AdagradOptimizer opt(0.1);
  init_all();
  for (int64_t k : {30, 10, 20}) {  // updated at steps 0, 1, 2
    opt.apply_gradients({v.gradient(keys_tensor({k}), rows_tensor({1, 1}, 1, 2))});
  }
  CHECK(v.step() == 3);
  Variable accum = *opt.get_slot(v.variable(), "accumulator");
  // Key 40 needs room: 30 was updated longest ago.
  v.gather(keys_tensor({40}));
  Rows rows = exported(v);
  CHECK(rows.size() == 3);
  CHECK(rows.count(30) == 0);
  CHECK(accum.shape() == TensorShape({3, 2}));
  // Keys of the batch itself are never evicted: 10 and 20 are in it, so 40
  // (inserted at step 3, never updated since) goes.
  v.gather(keys_tensor({10, 20, 50}));
  rows = exported(v);
  CHECK((rows.count(10) && rows.count(20) && rows.count(50) && !rows.count(40)));
  // A batch of more new keys than the cap allows: nothing changes.
  CHECK_THROWS_WITH(v.gather(keys_tensor({1, 2, 3, 4})),
                    Contains("max_rows 3") && Contains("\"emb\"") && Contains("nothing"));
  CHECK(exported(v) == rows);
}

TEST_CASE_METHOD(FreshSession, "dynamic variable: LFU eviction, no eviction, expiry", "[dynamic]") {
  SECTION("least frequently updated, ties by the smaller key") {
    DynamicVariable v = get_dynamic_variable(
        "emb", {.dim = 1,
                .initializer = zeros_initializer(),
                .max_rows = 3,
                .eviction = DynamicVariableOptions::Eviction::kLeastFrequentlyUpdated});
    init_all();
    v.scatter_add(keys_tensor({1, 1, 1, 2, 3, 3}), rows_tensor({1, 1, 1, 1, 1, 1}, 6, 1));
    v.scatter_add(keys_tensor({3}), rows_tensor({1}, 1, 1));
    v.gather(keys_tensor({4}));  // 2 has the fewest updates
    CHECK(exported(v) == Rows{{1, {3}}, {3, {3}}, {4, {0}}});
    v.gather(keys_tensor({5}));  // 4 (never updated) goes
    CHECK(exported(v).count(4) == 0);
  }
  SECTION("eviction off: a full table refuses new keys") {
    DynamicVariable v =
        get_dynamic_variable("emb", {.dim = 1,
                                     .initializer = zeros_initializer(),
                                     .max_rows = 2,
                                     .eviction = DynamicVariableOptions::Eviction::kNone});
    init_all();
    v.insert(keys_tensor({1, 2}), rows_tensor({5, 6}, 2, 1));
    CHECK_THROWS_AS(v.insert(keys_tensor({3}), rows_tensor({7}, 1, 1)), ResourceExhaustedError);
    CHECK_THROWS_WITH(v.gather(keys_tensor({3})), Contains("eviction is off"));
    CHECK(exported(v) == Rows{{1, {5}}, {2, {6}}});
    v.insert(keys_tensor({2}), rows_tensor({8}, 1, 1));  // present keys still update
    CHECK(exported(v).at(2) == std::vector<float>{8});
  }
  SECTION("expiry after T training steps without an update") {
    DynamicVariable v = get_dynamic_variable(
        "emb", {.dim = 1, .initializer = zeros_initializer(), .expire_after = 2});
    GradientDescentOptimizer sgd(1.0);
    init_all();
    sgd.apply_gradients({v.gradient(keys_tensor({1, 2}), rows_tensor({1, 1}, 2, 1))});
    for (int step = 0; step < 2; ++step) {
      sgd.apply_gradients({v.gradient(keys_tensor({2}), rows_tensor({1}, 1, 1))});
    }
    // Key 1 was last updated at step 0, the clock is at 3.
    CHECK(v.expire() == 1);
    CHECK(exported(v) == Rows{{2, {-3}}});
    CHECK(v.expire() == 0);
  }
  CHECK_THROWS_WITH(get_dynamic_variable("bad", {.dim = 1, .admit_after = 0}),
                    Contains("admit_after must be >= 1"));
}

TEST_CASE_METHOD(FreshSession, "dynamic variable: int32 keys", "[dynamic]") {
  DynamicVariable v = get_dynamic_variable(
      "emb", {.dim = 2, .key_dtype = DType::kInt32, .initializer = zeros_initializer()});
  init_all();
  CHECK(v.key_dtype() == DType::kInt32);
  const Tensor keys = Tensor::from_vector<int32_t>({INT32_MIN, -1, 7, INT32_MAX});
  v.scatter_add(keys, Tensor::filled(DType::kFloat, {4, 2}, Tensor(1.5f), test_device()));
  KeysAndValues kv = v.export_rows();
  CHECK(kv.keys.dtype() == DType::kInt32);
  CHECK(kv.keys.to_vector<int32_t>() == std::vector<int32_t>{INT32_MIN, -1, 7, INT32_MAX});
  CHECK(kv.values.to_vector<float>() == std::vector<float>(8, 1.5f));
  // int64 keys into an int32 table: TypeError, nothing inserted.
  CHECK_THROWS_AS(v.gather(Tensor::from_vector<int64_t>({3})), TypeError);
  CHECK(v.size() == 4);
}

TEST_CASE_METHOD(FreshSession, "dynamic variable: placed on cluster tasks, made by the cluster",
                 "[dynamic]") {
  // Without a Cluster, devices naming tasks are refused.
  CHECK_THROWS_WITH(
      get_dynamic_variable("early", {.dim = 2, .devices = {"/job:ps/task:0", "/job:ps/task:1"}}),
      Contains("\"early\"") && Contains("no Cluster is active"));
  // A process in a cluster (factories installed, as Cluster installs them;
  // distributed/mpi_keyed_table.h is the real one): a table placed on tasks
  // is the cluster's, made with its placements, its name and its policy;
  // one placed on this process's devices is not.
  internal::set_remote_storage_factory(
      [](const std::string&, const std::string&, DType, const TensorShape&) {
        return std::shared_ptr<internal::RemoteStorage>();
      });
  std::vector<std::pair<std::string, std::vector<std::string>>> asked;
  internal::set_remote_keyed_table_factory(
      [&asked](const std::string& name, DType key_dtype, const std::vector<std::string>& placements,
               const internal::KeyedPolicy& policy) -> std::shared_ptr<internal::KeyedTable> {
        asked.emplace_back(name, placements);
        if (placements.front().find("/job:") == std::string::npos) return nullptr;
        return std::make_shared<internal::DeviceKeyedTable>(
            name, key_dtype, DeviceManager::instance().cpu(), policy);
      });
  struct Uninstall {
    ~Uninstall() {
      internal::set_remote_storage_factory(nullptr);
      internal::set_remote_keyed_table_factory(nullptr);
    }
  } uninstall;
  {
    DeviceScope ps("/job:ps/task:0");
    DynamicVariable on_ps = get_dynamic_variable("emb", {.dim = 2, .max_rows = 10});
    CHECK(on_ps.variable().placement().find("/job:ps/task:0") != std::string::npos);
  }
  DynamicVariable sharded =
      get_dynamic_variable("sharded", {.dim = 2, .devices = {"/job:ps/task:0", "/job:ps/task:1"}});
  REQUIRE(asked.size() == 2);
  CHECK(asked[0].first == "emb");
  CHECK(asked[0].second.size() == 1);
  CHECK(asked[0].second[0].find("/job:ps/task:0") != std::string::npos);
  CHECK(asked[1] == std::pair<std::string, std::vector<std::string>>(
                        "sharded", {"/job:ps/task:0", "/job:ps/task:1"}));
  // Bad task lists: ValueError naming the variable, nothing created.
  CHECK_THROWS_WITH(get_dynamic_variable(
                        "mixed", {.dim = 2, .devices = {"/job:ps/task:0/device:CPU:0", "/cpu:0"}}),
                    Contains("\"mixed\"") && Contains("mixes cluster tasks"));
  CHECK_THROWS_WITH(get_dynamic_variable(
                        "again", {.dim = 2, .devices = {"/job:ps/task:1", "/job:ps/task:1/cpu:0"}}),
                    Contains("\"again\"") && Contains("/job:ps/task:1 twice"));
  CHECK(global_variables().size() == 2);
  DynamicVariable here = get_dynamic_variable("here", {.dim = 2});
  CHECK(here.variable().placement().find("job") == std::string::npos);
  CHECK(asked.size() == 3);  // asked, and declined
  CHECK(here.size() == 0);
}

TEST_CASE_METHOD(FreshSession, "dynamic variable: sharded over devices", "[dynamic]") {
  // Bad device lists: ValueError naming the variable, nothing created.
  CHECK_THROWS_WITH(get_dynamic_variable("one", {.dim = 2, .devices = {"/device:CPU:0"}}),
                    Contains("\"one\"") && Contains("two or more"));
  CHECK_THROWS_WITH(
      get_dynamic_variable("twice", {.dim = 2, .devices = {"/device:CPU:0", "/cpu:0"}}),
      Contains("\"twice\"") && Contains("twice"));
  CHECK_THROWS_WITH(
      get_dynamic_variable("nowhere", {.dim = 2, .devices = {"/device:CPU:0", "/device:GPU:64"}}),
      Contains("\"nowhere\"") && Contains("/device:GPU:64"));
  CHECK_THROWS_WITH(get_dynamic_variable(
                        "remote", {.dim = 2, .devices = {"/job:ps/task:0/device:CPU:0", "/cpu:0"}}),
                    Contains("\"remote\"") && Contains("mixes cluster tasks"));
  CHECK(global_variables().empty());
  const std::vector<std::vector<std::string>> all = shardings();
  if (all.size() < 2) return;  // one device: nothing to shard over
  const std::vector<std::string>& devices = all.back();
  DynamicVariable sharded =
      get_dynamic_variable("emb", {.dim = 4,
                                   .initializer = random_uniform_initializer({.seed = 5}),
                                   .devices = devices,
                                   .max_rows = 3000});
  DynamicVariable single = get_dynamic_variable(
      "ref", {.dim = 4, .initializer = random_uniform_initializer({.seed = 5})});
  init_all();
  {
    // Reuse: the same table, unless asked for another sharding.
    auto reuse = variable_scope(get_variable_scope(), {.reuse = true});
    CHECK(get_dynamic_variable("emb", {.dim = 4}).same_as(sharded));
    CHECK(get_dynamic_variable("emb", {.dim = 4, .devices = devices}).same_as(sharded));
    CHECK_THROWS_WITH(get_dynamic_variable("emb", {.dim = 4, .devices = {devices[1], devices[0]}}),
                      Contains("Trying to share dynamic variable emb, but specified devices"));
  }
  // The variable and the rows returned are on the first device.
  CHECK(sharded.device().name() == resolve_device(DeviceSpec::parse(devices[0])).name());
  std::mt19937_64 rng(kSeed + 3);
  std::vector<int64_t> keys(2000);
  for (int64_t& k : keys) k = static_cast<int64_t>(rng());
  const Tensor rows = sharded.gather(keys_tensor(keys));
  CHECK(&rows.device() == &sharded.device());
  // Rows depend on the seed and key alone: the same as in one table.
  CHECK(rows.to_vector<float>() == single.gather(keys_tensor(keys)).to_vector<float>());
  CHECK(sharded.size() == 2000);
  // A cap holds for the shards together: new keys past it are refused
  // whole without eviction; with LRU eviction a shard makes room.
  const DynamicVariable capped =
      get_dynamic_variable("capped", {.dim = 1,
                                      .devices = devices,
                                      .max_rows = static_cast<int64_t>(devices.size()),
                                      .eviction = DynamicVariableOptions::Eviction::kNone});
  init_all();
  DynamicVariable c = capped;
  std::vector<int64_t> many(40);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>(i) * 7777;
  CHECK_THROWS_WITH(c.gather(keys_tensor(many)), Contains("\"capped\"") &&
                                                     Contains("eviction is off") &&
                                                     Contains("nothing was inserted"));
  CHECK(c.size() == 0);
  // Under a cap, a sharded table evicts what one table would (the least
  // recently updated over every shard), step by step.
  for (const auto eviction : {DynamicVariableOptions::Eviction::kLeastRecentlyUpdated,
                              DynamicVariableOptions::Eviction::kLeastFrequentlyUpdated}) {
    CAPTURE(static_cast<int>(eviction));
    reset_default_graph();
    const DynamicVariableOptions base = {
        .dim = 2, .initializer = zeros_initializer(), .max_rows = 50, .eviction = eviction};
    DynamicVariableOptions on_shards = base;
    on_shards.devices = devices;
    DynamicVariable a = get_dynamic_variable("a", base);
    DynamicVariable b = get_dynamic_variable("b", on_shards);
    AdagradOptimizer opt(0.1);
    init_all();
    std::mt19937_64 gen(kSeed + 4);
    for (int step = 0; step < 40; ++step) {
      CAPTURE(step);
      std::vector<int64_t> k(12);
      for (int64_t& key : k) key = static_cast<int64_t>(gen() % 200) * 1000003;
      const Tensor g = Tensor::filled(DType::kFloat, {12, 2}, Tensor(0.5f), test_device());
      opt.apply_gradients({a.gradient(keys_tensor(k), g), b.gradient(keys_tensor(k), g)});
      REQUIRE(exported(a) == exported(b));
      REQUIRE(b.size() <= 50);
    }
  }
}

// On a GPU a batch of keys all present is resolved by the device's copy of
// the index (runtime/device_key_index.h), which follows every change of
// the host's: inserts, erasures, evictions, expiry, clearing and restores.
// The same calls on a table on the CPU are the reference, step by step.
TEST_CASE_METHOD(FreshSession, "dynamic variable: the GPU's device index follows every change",
                 "[dynamic]") {
  if (!testing_on_gpu()) return;  // a GPU table's path; test_runtime_on_gpu runs it
  struct Policy {
    const char* name;
    int64_t admit_after, max_rows, expire_after;
  };
  const Policy policy = GENERATE(Policy{"none", 1, 0, 0}, Policy{"capped, admit 2", 2, 2500, 0},
                                 Policy{"expiring", 1, 0, 3});
  CAPTURE(policy.name);
  const int64_t dim = 4;
  const DynamicVariableOptions options = {
      .dim = dim,
      .initializer = random_uniform_initializer({.minval = -1, .maxval = 1, .seed = 9}),
      .admit_after = policy.admit_after,
      .max_rows = policy.max_rows,
      .expire_after = policy.expire_after};
  DynamicVariable gpu = get_dynamic_variable("gpu", options);
  std::optional<DynamicVariable> cpu_table;
  {
    DeviceScope cpu_scope("/device:CPU:0");
    cpu_table = get_dynamic_variable("cpu", options);
  }
  DynamicVariable& cpu = *cpu_table;
  REQUIRE(!gpu.device().is_cpu());
  REQUIRE(cpu.device().is_cpu());
  GradientDescentOptimizer sgd(0.5);
  AdagradOptimizer adagrad(0.5);
  init_all();
  std::mt19937_64 rng(kSeed + 11);
  // Batches past the device path's threshold (1,024 keys on a real GPU),
  // over 6,000 keys so that they repeat within and across batches.
  auto batch = [&] {
    std::vector<int64_t> k(1100 + rng() % 500);
    for (int64_t& key : k) {
      const int64_t r = static_cast<int64_t>(rng() % 6000);
      key = r == 0 ? INT64_MIN : r == 1 ? INT64_MIN + 1 : (r - 3000) * 1000003;
    }
    return k;
  };
  // Multiples of 1/4 (the updates; the rows they meet are random).
  auto quarters = [&](size_t n) {
    std::vector<float> out(n * dim);
    for (float& x : out) x = static_cast<float>(static_cast<int>(rng() % 9) - 4) / 4.0f;
    return out;
  };
  const int64_t finds_before = internal::DeviceKeyIndex::finds_for_testing();
  for (int step = 0; step < 36; ++step) {
    const int op = step % 9;
    CAPTURE(step, op);
    const std::vector<int64_t> keys = batch();
    const int64_t n = std::ssize(keys);
    const Tensor k = keys_tensor(keys);
    switch (op) {
      case 0:  // training gathers (inserting), then read again (all present)
        REQUIRE(gpu.gather(k).to_vector<float>() == cpu.gather(k).to_vector<float>());
        REQUIRE(gpu.gather(k).to_vector<float>() == cpu.gather(k).to_vector<float>());
        break;
      case 1: {  // the same with the keys in the GPU's memory
        const Tensor on_gpu = k.to(gpu.device());
        REQUIRE(gpu.gather(on_gpu).to_vector<float>() == cpu.gather(k).to_vector<float>());
        REQUIRE(gpu.gather(on_gpu).to_vector<float>() == cpu.gather(k).to_vector<float>());
        break;
      }
      case 2:  // evaluation lookups, absent keys among them
        REQUIRE(gpu.lookup(k).to_vector<float>() == cpu.lookup(k).to_vector<float>());
        break;
      case 3: {  // insert of distinct keys
        const std::vector<int64_t> distinct = distinct_of(keys);
        const int64_t m = std::ssize(distinct);
        const std::vector<float> rows = quarters(distinct.size());
        gpu.insert(keys_tensor(distinct), rows_tensor(rows, m, dim));
        cpu.insert(keys_tensor(distinct), Tensor::from_vector(rows, TensorShape({m, dim})));
        break;
      }
      case 4: {  // erase a third of a batch
        const std::vector<int64_t> some(keys.begin(), keys.begin() + n / 3);
        REQUIRE(gpu.erase(keys_tensor(some)) == cpu.erase(keys_tensor(some)));
        break;
      }
      case 5: {  // scatter_add of distinct keys, the keys in the GPU's memory
        const std::vector<int64_t> distinct = distinct_of(keys);
        const int64_t m = std::ssize(distinct);
        const std::vector<float> u = quarters(distinct.size());
        gpu.scatter_add(keys_tensor(distinct).to(gpu.device()), rows_tensor(u, m, dim));
        cpu.scatter_add(keys_tensor(distinct), Tensor::from_vector(u, TensorShape({m, dim})));
        break;
      }
      case 6: {  // a training step: gradient descent, or Adagrad with the keys on the GPU
        const std::vector<float> g = quarters(keys.size());
        const Tensor on_cpu = Tensor::from_vector(g, TensorShape({n, dim}));
        if (step % 2 == 0) {  // distinct keys (the GPU adds duplicates in no fixed order)
          const std::vector<int64_t> distinct = distinct_of(keys);
          const int64_t m = std::ssize(distinct);
          const std::vector<float> d(g.begin(), g.begin() + m * dim);
          sgd.apply_gradients(
              {gpu.gradient(keys_tensor(distinct), rows_tensor(d, m, dim)),
               cpu.gradient(keys_tensor(distinct), Tensor::from_vector(d, TensorShape({m, dim})))});
        } else {  // the deterministic path sums a key's duplicates in order, as the CPU
          // (Its accumulators are slots: rows of the same keys, created on
          // first use for every key present.)
          adagrad.apply_gradients(
              {gpu.gradient(k.to(gpu.device()), rows_tensor(g, n, dim)), cpu.gradient(k, on_cpu)});
        }
        break;
      }
      case 7:  // expiry (a no-op without it)
        REQUIRE(gpu.expire() == cpu.expire());
        break;
      default: {  // every key erased, and the rows put back (tombstones to rebuild past)
        const KeysAndValues kv = cpu.export_rows();
        REQUIRE(gpu.erase(kv.keys) == kv.keys.num_elements());
        REQUIRE(cpu.erase(kv.keys) == kv.keys.num_elements());
        REQUIRE(gpu.size() == 0);
        if (kv.keys.num_elements() > 0) {
          gpu.insert(kv.keys, kv.values.to(gpu.device()));
          cpu.insert(kv.keys, kv.values);
        }
        break;
      }
    }
    REQUIRE(gpu.size() == cpu.size());
    REQUIRE(exported(gpu) == exported(cpu));
    // Every live key read back through the device path.
    const KeysAndValues kv = cpu.export_rows();
    if (kv.keys.num_elements() > 0) {
      REQUIRE(gpu.lookup(kv.keys).to_vector<float>() == kv.values.to_vector<float>());
    }
  }
  // The lookups above took the device's path (the count is process-wide).
  CHECK(internal::DeviceKeyIndex::finds_for_testing() - finds_before >= 36);
}

// A scatter or a training step whose keys are in the GPU's memory and
// meet an absent key looks the batch up on the device once: the keys then
// go to the host index, which inserts them, without a second lookup on
// either side. The results are the CPU twin's.
TEST_CASE_METHOD(FreshSession, "dynamic variable: device keys meeting an absent key, one lookup",
                 "[dynamic]") {
  if (!testing_on_gpu()) return;  // a GPU table's path; test_runtime_on_gpu runs it
  const DynamicVariableOptions options = {
      .dim = 3, .initializer = random_uniform_initializer({.minval = -1, .maxval = 1, .seed = 5})};
  DynamicVariable gpu = get_dynamic_variable("gpu", options);
  std::optional<DynamicVariable> cpu_table;
  {
    DeviceScope cpu_scope("/device:CPU:0");
    cpu_table = get_dynamic_variable("cpu", options);
  }
  DynamicVariable& cpu = *cpu_table;
  AdagradOptimizer adagrad(0.5);
  init_all();
  std::vector<int64_t> keys(1500);
  std::iota(keys.begin(), keys.end(), int64_t{-700});
  const std::vector<int64_t> half(keys.begin(), keys.begin() + 750);
  gpu.gather(keys_tensor(half));
  cpu.gather(keys_tensor(half));
  std::vector<float> u(keys.size() * 3);
  for (size_t i = 0; i < u.size(); ++i) u[i] = static_cast<float>(i % 7) * 0.25f;
  const Tensor on_cpu = Tensor::from_vector(u, TensorShape({1500, 3}));
  const Tensor on_gpu_keys = keys_tensor(keys).to(gpu.device());
  int64_t finds = internal::DeviceKeyIndex::finds_for_testing();
  gpu.scatter_add(on_gpu_keys, on_cpu.to(gpu.device()));
  CHECK(internal::DeviceKeyIndex::finds_for_testing() - finds == 1);
  cpu.scatter_add(keys_tensor(keys), on_cpu);
  CHECK(exported(gpu) == exported(cpu));
  std::vector<int64_t> more(keys.size());
  std::iota(more.begin(), more.end(), int64_t{500});  // 1,200 of them new
  finds = internal::DeviceKeyIndex::finds_for_testing();
  adagrad.apply_gradients(
      {gpu.gradient(keys_tensor(more).to(gpu.device()), on_cpu.to(gpu.device())),
       cpu.gradient(keys_tensor(more), on_cpu)});
  CHECK(internal::DeviceKeyIndex::finds_for_testing() - finds == 1);
  CHECK(exported(gpu) == exported(cpu));
  CHECK(gpu.size() == 2700);  // -700..1999
}

// Lookups through the GPU's device index while another thread churns the
// table: inserts and erasures of other keys grow and rebuild both indexes
// and reuse freed rows. Every lookup of the keys that stay must read their
// own rows, whatever change it meets.
TEST_CASE_METHOD(FreshSession, "dynamic variable: device-index lookups during churn",
                 "[dynamic][stress]") {
  if (!testing_on_gpu()) return;  // the GPU table's path; test_runtime_on_gpu runs it
  const int64_t dim = 2;
  DynamicVariable v = get_dynamic_variable("emb", {.dim = dim, .initializer = zeros_initializer()});
  init_all();
  // 1,100 keys that stay (past the device path's threshold on a real GPU),
  // each row (k, -k).
  std::vector<int64_t> stay(1100);
  std::vector<float> rows;
  for (size_t i = 0; i < stay.size(); ++i) {
    stay[i] = static_cast<int64_t>(i) * 7919 + 1;
    rows.push_back(static_cast<float>(i));
    rows.push_back(-static_cast<float>(i));
  }
  const int64_t n = std::ssize(stay);
  v.insert(keys_tensor(stay), rows_tensor(rows, n, dim));
  const Tensor stay_on_gpu = keys_tensor(stay).to(v.device());
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::atomic<int> reads{0};
  const int64_t finds_before = internal::DeviceKeyIndex::finds_for_testing();
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      // (At least 20 reads each, however fast the churn.)
      for (int i = 0; !done.load() || i < 20; ++i) {
        const Tensor got = t == 0 ? v.lookup(keys_tensor(stay)) : v.gather(stay_on_gpu);
        if (got.to_vector<float>() != rows) bad.fetch_add(1);
        reads.fetch_add(1);
      }
    });
  }
  // Churn: rounds of 3,000 new keys inserted, then erased (tombstones in
  // the device index, freed rows reused by the next round's keys).
  for (int round = 0; round < 12; ++round) {
    std::vector<int64_t> churn(3000);
    for (size_t i = 0; i < churn.size(); ++i) {
      churn[i] = -1 - static_cast<int64_t>(round * 100000 + static_cast<int>(i));
    }
    v.gather(keys_tensor(churn));
    REQUIRE(v.size() == n + 3000);
    REQUIRE(v.erase(keys_tensor(churn)) == 3000);
  }
  done = true;
  for (auto& r : readers) r.join();
  CAPTURE(reads.load());
  CHECK(bad.load() == 0);
  // The reads took the device's path (the count is process-wide).
  CHECK(internal::DeviceKeyIndex::finds_for_testing() - finds_before >= reads.load());
  CHECK(v.lookup(keys_tensor(stay)).to_vector<float>() == rows);
  CHECK(v.size() == n);
}
