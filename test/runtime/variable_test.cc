// Variable: construction, naming, lifecycle, reads, updates, locking,
// count_up_to, caching device, VariableDef round trip. Each test case runs
// in a fresh default graph.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "device_fixture.h"
#include "runtime/variable_access.h"
#include "tensor_util.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/initializers.h"
#include "varstate/math_ops.h"
#include "varstate/placement.h"
#include "varstate/variables.h"

using namespace varstate;
using namespace varstate::testing;

TEST_CASE_METHOD(FreshGraph, "variables are named Variable, Variable_1, ... with :0",
                 "[variable]") {
  Variable a(1.f), b(2.f), c(3.f, {.name = "w"}), d(4.f, {.name = "w"});
  CHECK(a.name() == "Variable:0");
  CHECK(a.op_name() == "Variable");
  CHECK(b.name() == "Variable_1:0");
  CHECK(c.name() == "w:0");
  CHECK(d.name() == "w_1:0");
  {
    NameScope scope("layer");
    Variable e(1.f, {.name = "w"});
    CHECK(e.name() == "layer/w:0");
    NameScope inner("dense");
    Variable f(1.f);
    CHECK(f.name() == "layer/dense/Variable:0");
  }
  {
    NameScope again("layer");  // second entry: uniquified
    Variable g(1.f, {.name = "w"});
    CHECK(g.name() == "layer_1/w:0");
  }
  // An explicitly requested "x_1" reserves that name.
  Variable x1(1.f, {.name = "x_1"}), x(1.f, {.name = "x"}), x_next(1.f, {.name = "x"});
  CHECK(x1.name() == "x_1:0");
  CHECK(x.name() == "x:0");
  CHECK(x_next.name() == "x_2:0");
}

TEST_CASE_METHOD(FreshGraph, "a variable starts uninitialized", "[variable]") {
  Variable v(Tensor({1.f, 2.f}), {.name = "v"});
  CHECK_FALSE(v.is_initialized());
  CHECK_THROWS_AS(v.value(), FailedPreconditionError);
  CHECK_THROWS_WITH(v.value(), "Attempting to use uninitialized value v");
  CHECK_THROWS_AS(v.assign_add(1), FailedPreconditionError);
  CHECK_THROWS_AS(v.read_value(), FailedPreconditionError);
  Session sess;
  sess.run(v.initializer());
  CHECK(v.is_initialized());
  CHECK(v.eval(sess).to_vector<float>() == std::vector<float>{1.f, 2.f});
  CHECK(v.dtype() == DType::kFloat);
  CHECK(v.shape() == TensorShape{2});
  CHECK(v.get_shape() == TensorShape{2});
  CHECK(v.initializer().name() == "v/Assign");
  CHECK(&v.graph() == &get_default_graph());
}

TEST_CASE_METHOD(FreshGraph, "the reference's Variable example", "[variable]") {
  // w = tf.Variable(<initial-value>); w.assign(w + 1.0); w.assign_add(1.0)
  Variable w(Tensor({{1.f, 2.f}, {3.f, 4.f}}), {.name = "w"});
  Session sess;
  sess.run(initialize_all_variables());
  Tensor plus_one = w.value().clone();
  assign_add(plus_one, 1.0);
  w.assign(plus_one);
  Tensor after = w.assign_add(1.0);
  CHECK(after.to_vector<float>() == std::vector<float>{3.f, 4.f, 5.f, 6.f});
  CHECK(w.eval(sess).to_vector<float>() == std::vector<float>{3.f, 4.f, 5.f, 6.f});
  w.assign_sub(Tensor({{1.f, 1.f}, {1.f, 1.f}}));
  CHECK(w.eval(sess).to_vector<float>() == std::vector<float>{2.f, 3.f, 4.f, 5.f});
}

TEST_CASE_METHOD(FreshGraph, "eval through the default session", "[variable][session]") {
  Variable v(Tensor({1, 2}));
  Session sess;
  sess.run(initialize_all_variables());
  CHECK_THROWS_AS(v.eval(), ValueError);
  {
    auto guard = sess.as_default();
    CHECK(v.eval().to_vector<int32_t>() == std::vector<int32_t>{1, 2});
    CHECK(Session::default_session() == &sess);
  }
  CHECK(Session::default_session() == nullptr);
  CHECK(sess.run(v).to_vector<int32_t>() == std::vector<int32_t>{1, 2});
}

TEST_CASE_METHOD(FreshGraph, "initialized_value picks random values once", "[variable]") {
  // v = Variable(truncated_normal(...)); w = Variable(v.initialized_value() * 2)
  int calls = 0;
  Variable v(
      [&] {
        ++calls;
        return random_tensor(DType::kFloat, {10, 4}, kSeed + calls);
      },
      {.dtype = DType::kFloat, .expected_shape = TensorShape{10, 4}});
  CHECK(calls == 0);  // deferred: nothing computed yet
  Tensor doubled = v.initialized_value().clone();
  assign_add(doubled, v.initialized_value());
  Variable w(doubled, {.name = "w"});
  CHECK(calls == 1);
  Session sess;
  sess.run(initialize_all_variables());
  CHECK(calls == 1);
  auto vv = v.eval(sess).to_vector<float>();
  auto ww = w.eval(sess).to_vector<float>();
  for (size_t i = 0; i < vv.size(); ++i) REQUIRE(ww[i] == 2 * vv[i]);
  // Once initialized, initialized_value is the current value.
  v.assign_add(1.f);
  CHECK(v.initialized_value().to_vector<float>()[0] == vv[0] + 1.f);
  // Once initialized, initial_value runs the callable again (TensorFlow
  // evaluates the initial value's ops again).
  CHECK(v.initial_value().to_vector<float>()[0] != vv[0]);
  CHECK(calls == 2);
}

TEST_CASE_METHOD(FreshGraph, "an initialized variable holds its value once", "[variable]") {
  Variable v(bind(random_normal_initializer({.seed = 3}), {64, 16}, DType::kFloat),
             {.name = "v", .dtype = DType::kFloat, .expected_shape = TensorShape{64, 16}});
  Session sess;
  sess.run(v.initializer());
  CHECK(internal::retained_initial_value_bytes(v) == 0);
  // The live buffer is the only copy: the variable's handle and this one.
  Tensor live = v.ref();
  Tensor copy = live;
  CHECK_FALSE(live.sole_owner());
  live = Tensor();
  CHECK_FALSE(copy.sole_owner());  // the variable's own handle
  CHECK_FALSE(internal::initial_tensor(v).has_value());

  SECTION("a value read before initialization is consumed by the initializer") {
    Variable w(bind(ones_initializer(), {4}, DType::kFloat),
               {.name = "w", .dtype = DType::kFloat, .expected_shape = TensorShape{4}});
    CHECK(w.initialized_value().to_vector<float>() == std::vector<float>(4, 1.f));
    CHECK(internal::retained_initial_value_bytes(w) == 16);
    sess.run(w.initializer());
    CHECK(internal::retained_initial_value_bytes(w) == 0);
  }
  SECTION("a Tensor is kept as given: no copy on the variable's device") {
    Tensor host = Tensor::from_vector<float>({1, 2, 3});
    Variable t(host, {.name = "t"});
    sess.run(t.initializer());
    REQUIRE(internal::initial_tensor(t).has_value());
    CHECK(internal::initial_tensor(t)->raw_data() == host.raw_data());
    CHECK(t.ref().raw_data() != host.raw_data());  // the value is a copy
    t.assign_add(1.f);
    CHECK(host.to_vector<float>() == std::vector<float>{1, 2, 3});
  }
}

TEST_CASE_METHOD(FreshGraph, "re-running a random initializer draws new values as TensorFlow",
                 "[variable][initializers]") {
  // Expectations from TensorFlow 2.21 (tf.compat.v1 graph mode): the
  // initializer run twice; the second run's Philox counter has advanced.
  Variable v(bind(random_normal_initializer({.seed = 1}), {3, 2}, DType::kFloat),
             {.name = "v", .dtype = DType::kFloat, .expected_shape = TensorShape{3, 2}});
  Variable u(bind(random_uniform_initializer({.seed = 1}), {5}, DType::kFloat),
             {.name = "u", .dtype = DType::kFloat, .expected_shape = TensorShape{5}});
  Variable t(bind(truncated_normal_initializer({.seed = 1}), {3}, DType::kFloat),
             {.name = "t", .dtype = DType::kFloat, .expected_shape = TensorShape{3}});
  Session sess;
  const std::vector<std::vector<float>> tf_v = {
      {-0.8113182187080383f, 1.4845987558364868f, 0.06532937288284302f, -2.442704200744629f,
       0.09924840182065964f, 0.5912243127822876f},
      {-0.6759059429168701f, 0.28665831685066223f, 0.3215886950492859f, 1.2124637365341187f,
       -0.8058571219444275f, -0.1334945410490036f}};
  const std::vector<std::vector<float>> tf_u = {
      {0.2390373945236206f, 0.92039954662323f, 0.05051243305206299f, 0.4957444667816162f,
       0.8355222940444946f},
      {0.9337030649185181f, 0.7188416719436646f, 0.8537777662277222f, 0.779289960861206f,
       0.5249730348587036f}};
  const std::vector<std::vector<float>> tf_t = {
      {-0.8113182187080383f, 1.4845987558364868f, 0.06532937288284302f},
      {0.5517124533653259f, -0.13107551634311676f, -0.044813863933086395f}};
  for (int run = 0; run < 2; ++run) {
    CAPTURE(run);
    sess.run(Op::group({v.initializer(), u.initializer(), t.initializer()}, "init"));
    CHECK_THAT(v.eval(sess).to_vector<float>(), Catch::Matchers::Approx(tf_v[run]).epsilon(1e-6));
    CHECK(u.eval(sess).to_vector<float>() == tf_u[run]);
    CHECK_THAT(t.eval(sess).to_vector<float>(), Catch::Matchers::Approx(tf_t[run]).epsilon(1e-6));
  }
  // A new variable with the same seed starts again from the first values.
  Variable v2(bind(random_normal_initializer({.seed = 1}), {3, 2}, DType::kFloat),
              {.name = "v2", .dtype = DType::kFloat, .expected_shape = TensorShape{3, 2}});
  sess.run(v2.initializer());
  CHECK_THAT(v2.eval(sess).to_vector<float>(), Catch::Matchers::Approx(tf_v[0]).epsilon(1e-6));
}

TEST_CASE_METHOD(FreshGraph, "re-run partitions stay slices of the re-run whole",
                 "[variable][initializers]") {
  const Initializer init = glorot_uniform_initializer({.seed = 9});
  Variable whole(bind(init, {6, 4}, DType::kFloat),
                 {.name = "whole", .dtype = DType::kFloat, .expected_shape = TensorShape{6, 4}});
  PartitionInfo bottom{TensorShape{6, 4}, {4, 0}};
  Variable part(bind(init, {2, 4}, DType::kFloat, bottom),
                {.name = "part", .dtype = DType::kFloat, .expected_shape = TensorShape{2, 4}});
  Session sess;
  for (int run = 0; run < 3; ++run) {
    CAPTURE(run);
    sess.run(Op::group({whole.initializer(), part.initializer()}, "init"));
    std::vector<float> w = whole.eval(sess).to_vector<float>();
    CHECK(part.eval(sess).to_vector<float>() == std::vector<float>(w.begin() + 16, w.end()));
  }
}

TEST_CASE_METHOD(FreshGraph, "constructor arguments and their errors", "[variable]") {
  CHECK_THROWS_AS(Variable(Tensor()), ValueError);
  CHECK_THROWS_AS(Variable(InitialValueFn([] { return Tensor(1.f); }), {}), ValueError);
  CHECK_THROWS_AS(Variable(Tensor(1.f), {.variable_def = VariableDef{}}), ValueError);
  CHECK_THROWS_AS(Variable(VariableOptions{}), ValueError);
  // dtype converts a literal initial value; a typed tensor of another dtype is
  // a ValueError, as TensorFlow's convert_to_tensor(initial_value, dtype).
  Variable f(Tensor({1, 2}), {.dtype = DType::kFloat});
  CHECK(f.dtype() == DType::kFloat);
  CHECK_THROWS_AS(Variable(Tensor({1, 2}).cast(DType::kInt64), {.dtype = DType::kFloat}),
                  ValueError);
  CHECK_THROWS_WITH(Variable(Tensor({1, 2}).cast(DType::kInt64), {.dtype = DType::kFloat}),
                    Catch::Contains("expected dtype float32, got int64 tensor"));
  // A literal that does not convert is a TypeError, as TensorFlow's
  // tf.Variable(1.5, dtype=tf.int32); one out of the dtype's range a
  // ValueError.
  CHECK_THROWS_AS(Variable(Tensor(1.5), {.dtype = DType::kInt32}), TypeError);
  CHECK_THROWS_WITH(
      Variable(Tensor(1.5), {.dtype = DType::kInt32}),
      Catch::Contains("expected dtype int32, got float64 value that does not convert"));
  CHECK_THROWS_AS(Variable(Tensor(int64_t{3000000000}), {.dtype = DType::kInt32}), ValueError);
  // expected_shape must match.
  CHECK_THROWS_AS(Variable(Tensor({1.f, 2.f}), {.expected_shape = TensorShape{3}}), ValueError);
  Variable ok(Tensor({1.f, 2.f}), {.expected_shape = TensorShape{2}});
  CHECK(ok.shape() == TensorShape{2});
  // A callable without expected_shape is evaluated at once to learn the shape.
  int calls = 0;
  Variable eager(
      [&] {
        ++calls;
        return Tensor({1.0, 2.0, 3.0});
      },
      {.dtype = DType::kDouble});
  CHECK(calls == 1);
  CHECK(eager.shape() == TensorShape{3});
  // A callable returning the wrong shape fails at initialization, naming it.
  Variable bad([] { return Tensor({1.f}); },
               {.name = "bad", .dtype = DType::kFloat, .expected_shape = TensorShape{4}});
  CHECK_THROWS_WITH(Session().run(bad.initializer()),
                    Catch::Contains("bad") && Catch::Contains("[4]"));
  CHECK_FALSE(bad.is_initialized());
}

TEST_CASE_METHOD(FreshGraph, "assign checks shape and dtype, validate_shape=false reshapes",
                 "[variable]") {
  Variable v(Tensor({1.f, 2.f}), {.name = "v"});
  // assign initializes an uninitialized variable.
  v.assign(Tensor({5.f, 6.f}));
  CHECK(v.is_initialized());
  CHECK(v.value().to_vector<float>() == std::vector<float>{5.f, 6.f});
  CHECK_THROWS_MATCHES(v.assign(Tensor({1.f, 2.f, 3.f})), ValueError,
                       Catch::Matchers::Message("Assign to \"v\": shapes must match: target "
                                                "shape [2], value shape [3]"));
  // Unlike assign_add/assign_sub, assign does not broadcast a scalar
  // (TensorFlow's Assign requires equal shapes).
  CHECK_THROWS_AS(v.assign(Tensor(7.f)), ValueError);
  CHECK(v.value().to_vector<float>() == std::vector<float>{5.f, 6.f});
  v.assign_add(Tensor(1.f));
  CHECK(v.value().to_vector<float>() == std::vector<float>{6.f, 7.f});
  v.assign_sub(Tensor(1.f));
  CHECK_THROWS_AS(v.assign(Tensor({1, 2}).cast(DType::kInt32)), TypeError);
  CHECK(v.value().to_vector<float>() == std::vector<float>{5.f, 6.f});
  Tensor r = assign(v, Tensor({{1.f, 2.f, 3.f}}), {.validate_shape = false});
  CHECK(v.shape() == TensorShape{1, 3});
  CHECK(r.to_vector<float>() == std::vector<float>{1.f, 2.f, 3.f});
  CHECK(assign_sub(v, 1.f).to_vector<float>() == std::vector<float>{0.f, 1.f, 2.f});
}

TEST_CASE_METHOD(FreshGraph, "value aliases the live buffer; read_value copies", "[variable]") {
  Variable v(Tensor({1.f, 2.f}));
  Session().run(v.initializer());
  Tensor live = v.value();
  Tensor snapshot = v.read_value();
  Tensor r = v.ref();
  v.assign_add(10.f);
  CHECK(live.to_vector<float>() == std::vector<float>{11.f, 12.f});
  CHECK(r.to_vector<float>() == std::vector<float>{11.f, 12.f});
  CHECK(snapshot.to_vector<float>() == std::vector<float>{1.f, 2.f});
}

TEST_CASE_METHOD(FreshGraph, "use_locking serializes concurrent updates",
                 "[variable][concurrency]") {
  Variable counter(Tensor(int64_t{0}), {.name = "counter"});
  Session().run(counter.initializer());
  const int threads = 8, per_thread = 500;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < per_thread; ++i) counter.assign_add(int64_t{1}, {.use_locking = true});
    });
  }
  for (auto& th : pool) th.join();
  CHECK(counter.value().scalar<int64_t>() == threads * per_thread);
  CHECK(counter.version() == 1 + threads * per_thread);
}

namespace {
// Whether `update` waits while another thread holds v's update_mutex().
bool waits_for_update_lock(Variable& v, const std::function<void()>& update) {
  std::unique_lock held(internal::update_mutex(v));
  auto done = std::async(std::launch::async, update);
  const bool waited = done.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout;
  held.unlock();
  done.get();
  return waited;
}
}  // namespace

TEST_CASE_METHOD(FreshGraph, "use_locking defaults are TensorFlow's: tf.assign locks",
                 "[variable][concurrency]") {
  // tf.assign and tf.scatter_update default to use_locking=True; tf.assign_add,
  // tf.assign_sub, the other scatters and the Variable methods to False.
  Variable v(Tensor({1.f, 2.f, 3.f}), {.name = "v"});
  Session().run(v.initializer());
  const Tensor ones({1.f, 1.f, 1.f});
  CHECK(waits_for_update_lock(v, [&] { assign(v, ones); }));
  CHECK_FALSE(waits_for_update_lock(v, [&] { assign(v, ones, {.use_locking = false}); }));
  CHECK_FALSE(waits_for_update_lock(v, [&] { assign_add(v, ones); }));
  CHECK_FALSE(waits_for_update_lock(v, [&] { assign_sub(v, ones); }));
  CHECK_FALSE(waits_for_update_lock(v, [&] { v.assign(ones); }));
  CHECK(waits_for_update_lock(v, [&] { v.assign(ones, {.use_locking = true}); }));
  CHECK(v.value().to_vector<float>() == std::vector<float>{1.f, 1.f, 1.f});
}

TEST_CASE_METHOD(FreshGraph, "count_up_to returns distinct values and stops at the limit",
                 "[variable][concurrency]") {
  Variable step(Tensor(int32_t{0}), {.name = "global_step"});
  Session().run(step.initializer());
  CHECK(step.count_up_to(3).scalar<int32_t>() == 0);
  CHECK(count_up_to(step, 3).scalar<int32_t>() == 1);
  CHECK(step.count_up_to(3).scalar<int32_t>() == 2);
  CHECK_THROWS_AS(step.count_up_to(3), OutOfRangeError);
  CHECK_THROWS_WITH(step.count_up_to(3), Catch::Contains("global_step") && Catch::Contains("3"));
  CHECK(step.value().scalar<int32_t>() == 3);

  Variable c(Tensor(int64_t{0}));
  Session().run(c.initializer());
  const int limit = 4000;
  std::vector<std::vector<int64_t>> seen(4);
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t) {
    pool.emplace_back([&, t] {
      while (true) {
        try {
          seen[t].push_back(c.count_up_to(limit).scalar<int64_t>());
        } catch (const OutOfRangeError&) {
          return;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  std::vector<int64_t> all;
  for (auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  REQUIRE(all.size() == static_cast<size_t>(limit));
  for (int i = 0; i < limit; ++i) REQUIRE(all[i] == i);
  CHECK_THROWS_AS(Variable(1.5f).count_up_to(3), TypeError);
}

TEST_CASE_METHOD(FreshGraph, "caching device copies only after the version changes",
                 "[variable][cache]") {
  Variable v(Tensor({1.f, 2.f}), {.caching_device = "/cpu:0"});
  Session().run(v.initializer());
  Tensor first = v.value();
  CHECK(v.cache_copies() == 1);
  v.value();
  v.value();
  CHECK(v.cache_copies() == 1);  // unchanged variable: no copy
  CHECK(first.to_vector<float>() == std::vector<float>{1.f, 2.f});
  v.assign_add(1.f);
  CHECK(v.value().to_vector<float>() == std::vector<float>{2.f, 3.f});  // never stale
  CHECK(v.cache_copies() == 2);
  v.value();
  CHECK(v.cache_copies() == 2);
  // A cached read is a snapshot: later updates do not show through it.
  Tensor snap = v.value();
  v.assign(Tensor({7.f, 8.f}));
  CHECK(snap.to_vector<float>() == std::vector<float>{2.f, 3.f});
  CHECK(v.value().to_vector<float>() == std::vector<float>{7.f, 8.f});
  CHECK(v.cache_copies() == 3);
  CHECK_THROWS_AS(Variable(1.f, {.caching_device = "/device:GPU:x"}), InvalidArgumentError);
}

TEST_CASE_METHOD(FreshGraph, "device scopes place variables", "[variable][placement]") {
  DeviceScope scope("/device:CPU:0");
  Variable v(Tensor({1.f}));
  CHECK(&v.device() == &DeviceManager::instance().cpu());
  Session().run(v.initializer());
  CHECK(&v.value().device() == &DeviceManager::instance().cpu());
}

TEST_CASE_METHOD(FreshGraph, "VariableDef round trip", "[variable][proto]") {
  NameScope scope("model");
  Variable v(Tensor({1.f, 2.f}), {.trainable = false, .name = "w"});
  VariableDef def = v.to_proto();
  CHECK(def.variable_name == "model/w:0");
  CHECK(def.initializer_name == "model/w/Assign");
  CHECK(def.snapshot_name == "model/w/read:0");
  CHECK(def.initial_value_name == "model/w/initial_value:0");
  CHECK_FALSE(def.trainable);
  VariableDef back = VariableDef::parse(def.serialize());
  CHECK(back.variable_name == def.variable_name);
  CHECK(back.snapshot_name == def.snapshot_name);
  CHECK_FALSE(back.trainable);
  // Wire bytes: field 1 (tag 0x0a) holds the variable name.
  std::string bytes = def.serialize();
  CHECK(static_cast<unsigned char>(bytes[0]) == 0x0a);
  CHECK(bytes.substr(2, 9) == "model/w:0");

  Variable same = Variable::from_proto(back);
  CHECK(same.same_as(v));
  CHECK_THROWS_AS(Variable::from_proto(VariableDef{.variable_name = "nope:0"}), NotFoundError);
  CHECK_THROWS_AS(VariableDef::parse("\xff\xff\xff"), InvalidArgumentError);

  VariableDef sliced = def;
  sliced.variable_name = "emb/part_0:0";
  sliced.save_slice_info = SaveSliceInfo{"emb", {10, 4}, {0, 0}, {5, 4}};
  auto parsed = VariableDef::parse(sliced.serialize());
  REQUIRE(parsed.save_slice_info);
  CHECK(*parsed.save_slice_info == *sliced.save_slice_info);
  // Not in the graph: recreated uninitialized with the given dtype and shape.
  Variable part(VariableOptions{
      .dtype = DType::kFloat, .expected_shape = TensorShape{5, 4}, .variable_def = parsed});
  CHECK(part.name() == "emb/part_0:0");
  CHECK_FALSE(part.is_initialized());
  REQUIRE(part.save_slice_info());
  CHECK(part.save_slice_info()->full_shape == std::vector<int64_t>{10, 4});
  CHECK_THROWS_AS(Variable(VariableOptions{.variable_def = VariableDef{.variable_name = "zz:0"}}),
                  ValueError);
}

TEST_CASE_METHOD(FreshGraph, "slices of a variable read and assign regions", "[variable][slice]") {
  // The reference: A[:2, :2].assign(22. * tf.ones((2, 2))) on [[1,2,3],[4,5,6],[7,8,9]].
  Variable A(Tensor({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}, {7.f, 8.f, 9.f}}), {.name = "A"});
  Session().run(A.initializer());
  auto top_left = A.slice({Slice::range(std::nullopt, 2), Slice::range(std::nullopt, 2)});
  CHECK(top_left.shape() == TensorShape{2, 2});
  Tensor ones = Tensor::filled(DType::kFloat, {2, 2}, Tensor(1.f), A.device());
  Tensor r = top_left.assign(22.f * ones);
  CHECK(r.to_vector<float>() == std::vector<float>{22, 22, 3, 22, 22, 6, 7, 8, 9});
  CHECK(A.value().to_vector<float>() == std::vector<float>{22, 22, 3, 22, 22, 6, 7, 8, 9});
  // Reads: a row (integer index drops the dim), negative indices, steps.
  CHECK(A.slice({Slice::index(-1)}).value().to_vector<float>() == std::vector<float>{7, 8, 9});
  CHECK(A.slice({Slice::all(), Slice::range(std::nullopt, std::nullopt, -2)})
            .value()
            .to_vector<float>() == std::vector<float>{3, 22, 6, 22, 9, 7});
  // A[..., 0] and A[:, tf.newaxis, 2] (the value carries the new dim).
  CHECK(A.slice({Slice::ellipsis(), Slice::index(0)}).value().to_vector<float>() ==
        std::vector<float>{22, 22, 7});
  auto last_column = A.slice({Slice::all(), Slice::newaxis(), Slice::index(2)});
  CHECK(last_column.shape() == TensorShape{3, 1});
  last_column.assign(Tensor({{-3.f}, {-6.f}, {-9.f}}));
  CHECK(A.value().to_vector<float>() == std::vector<float>{22, 22, -3, 22, 22, -6, 7, 8, -9});
  // No broadcasting; negative sizes raise; nothing changes on error.
  auto before = A.value().to_vector<float>();
  CHECK_THROWS_AS(last_column.assign(Tensor({1.f, 2.f, 3.f})), InvalidArgumentError);
  CHECK_THROWS_AS(A.slice({Slice::ellipsis(), Slice::ellipsis()}).assign(Tensor(1.f)), ValueError);
  CHECK_THROWS_AS(top_left.assign(Tensor(5.f)), InvalidArgumentError);
  CHECK_THROWS_AS(A.slice({Slice::range(2, 1)}).assign(Tensor::zeros(DType::kFloat, {0, 3})),
                  ValueError);
  CHECK(A.value().to_vector<float>() == before);
}

TEST_CASE_METHOD(FreshGraph, "operators read a variable's value", "[variable][ops]") {
  Variable w(Tensor({{1.f, 2.f}, {3.f, 4.f}}), {.name = "w"});
  Variable b(Tensor({1.f, 1.f}), {.name = "b"});
  Session().run(global_variables_initializer());
  Tensor y = matmul(w, w) + b;  // [[7,10],[15,22]] + [1,1]
  CHECK(y.to_vector<float>() == std::vector<float>{8, 11, 16, 23});
  Tensor z = -(w * 2.f) / 2.f;
  CHECK(z.to_vector<float>() == std::vector<float>{-1, -2, -3, -4});
  Tensor mask = w > 2.f;
  CHECK(mask.to_vector<bool>() == std::vector<bool>{false, false, true, true});
  CHECK_THROWS_AS(w + Tensor({1, 2}).cast(DType::kInt32), TypeError);
}

namespace {
Tensor strings(std::vector<std::string> values) { return Tensor::from_vector(values); }
}  // namespace

TEST_CASE_METHOD(FreshGraph, "a string variable lives on the CPU under any device scope",
                 "[variable][placement]") {
  // TensorFlow places by kernel availability: strings have no GPU kernels.
  Variable names(strings({"a", "bc"}), {.name = "names"});
  CHECK(names.device().is_cpu());
  CHECK(names.placement() == "/device:CPU:0");
  {
    DeviceScope gpu("/device:GPU:0");
    Variable vocab(strings({"x"}), {.name = "vocab"});
    CHECK(vocab.device().is_cpu());
    Variable deferred(InitialValueFn([] {
                        return strings({"y", "z"});
                      }),
                      {.name = "deferred", .dtype = DType::kString});
    CHECK(deferred.device().is_cpu());
    Session().run(global_variables_initializer());
    CHECK(deferred.eval(Session()).to_vector<std::string>() == std::vector<std::string>{"y", "z"});
  }
  if (testing_on_gpu()) {
    // Strict placement refuses an explicit GPU for a string variable.
    set_soft_placement(false);
    DeviceScope gpu("/device:GPU:0");
    CHECK_THROWS_WITH(Variable(strings({"x"}), {.name = "strict"}),
                      Catch::Contains("\"strict\" (string)") && Catch::Contains("no GPU kernels"));
    set_soft_placement(true);
    // Numeric variables in the same scope stay on the GPU.
    CHECK_FALSE(Variable(Tensor({1.f}), {.name = "w"}).device().is_cpu());
  }
}
