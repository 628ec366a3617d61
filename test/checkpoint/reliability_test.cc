// Reliability contract: a save that succeeds restores even while other
// threads update the variables without their locks; shapes whose byte size
// overflows raise ResourceExhaustedError instead of touching memory; save
// handles of synchronous saves are done; crashed saves leave nothing behind
// that the next save does not remove; out-of-range literals do not convert
// silently; integer edge cases are defined.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <thread>

#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/tensor_bundle.h"
#include "test_util.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/checkpoint_state.h"
#include "varstate/device_manager.h"
#include "varstate/initializers.h"
#include "varstate/math_ops.h"
#include "varstate/placement.h"
#include "varstate/random_ops.h"
#include "varstate/saver.h"
#include "varstate/variables.h"

namespace varstate {
namespace {

using testing::TempDir;

std::vector<std::string> dir_entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

// 1. Data loss: the checksum must describe the bytes written even when the
// variable changes during the save.
TEST_CASE("saves during unlocked assign_add always restore", "[saver][reliability][concurrent]") {
  constexpr int64_t kElements = 1 << 20;  // 4 MiB: a write takes long enough to race
  constexpr int kSaves = 8;
  for (bool async : {false, true}) {
    for (bool sharded : {false, true}) {
      CAPTURE(async, sharded);
      TempDir dir;
      Graph g;
      Session sess;
      Variable big = [&] {
        auto guard = g.as_default();
        return Variable(Tensor::zeros(DType::kFloat, TensorShape{kElements}), {.name = "big"});
      }();
      Variable small = [&] {
        auto guard = g.as_default();
        DeviceScope other("/job:ps/task:1");  // a second shard when sharded
        return Variable(Tensor::zeros(DType::kInt64, TensorShape{16}), {.name = "small"});
      }();
      {
        auto guard = g.as_default();
        sess.run(global_variables_initializer());
      }
      Saver saver({.var_list = std::vector<Variable>{big, small},
                   .sharded = sharded,
                   .max_to_keep = 3,
                   .graph = &g});
      std::atomic<bool> stop{false};
      std::atomic<int64_t> adds{0};
      std::vector<std::thread> updaters;
      for (int t = 0; t < 2; ++t) {
        updaters.emplace_back([&] {
          Variable v = big;
          Variable s = small;
          while (!stop.load()) {
            v.assign_add(Tensor(1.f), {.use_locking = false});
            s.assign_add(Tensor(int64_t{1}), {.use_locking = false});
            adds.fetch_add(1);
          }
        });
      }
      // The saves start once the updaters run (on a loaded machine a new
      // thread may wait longer than the eight saves take).
      while (adds.load() == 0) std::this_thread::yield();
      std::vector<std::string> paths;
      for (int i = 0; i < kSaves; ++i) {
        SaveHandle h = saver.save(sess, dir / "m", {.global_step = i, .async = async});
        paths.push_back(*h.wait());
      }
      stop = true;
      for (auto& t : updaters) t.join();
      const float max_value = static_cast<float>(adds.load());

      // Every checkpoint still on disk restores (checksums verified), and
      // its values are torn at worst: each element counts some of the adds.
      Graph g2;
      Variable big2 = [&] {
        auto guard = g2.as_default();
        return Variable(Tensor::zeros(DType::kFloat, TensorShape{kElements}), {.name = "big"});
      }();
      Variable small2 = [&] {
        auto guard = g2.as_default();
        return Variable(Tensor::zeros(DType::kInt64, TensorShape{16}), {.name = "small"});
      }();
      Saver restorer({.var_list = std::vector<Variable>{big2, small2}, .graph = &g2});
      int restored = 0;
      for (const std::string& p : paths) {
        if (!checkpoint_exists(p)) continue;  // deleted by max_to_keep
        CAPTURE(p);
        REQUIRE_NOTHROW(restorer.restore(sess, p));
        ++restored;
        const std::vector<float> v = big2.value().to_vector<float>();
        CHECK(std::all_of(v.begin(), v.end(),
                          [&](float x) { return x >= 0 && x <= max_value && x == std::floor(x); }));
      }
      CHECK(restored == 3);
      CHECK(adds.load() > 0);
    }
  }
}

// 3. A synchronous save's handle is done.
TEST_CASE("the handle of a synchronous save is done", "[saver][reliability]") {
  TempDir dir;
  Graph g;
  auto guard = g.as_default();
  Session sess;
  Variable v(Tensor::from_vector<float>({1, 2, 3}), {.name = "v"});
  sess.run(global_variables_initializer());
  Saver saver;
  SaveHandle h = saver.save(sess, dir / "m");
  CHECK(h.done());
  CHECK(h.wait() == dir / "m");  // returns at once
  CHECK(SaveHandle().done());
}

// 2. Shapes whose byte size overflows.
TEST_CASE("shapes whose size overflows raise ResourceExhaustedError", "[reliability][shape]") {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<std::pair<TensorShape, DType>> cases = {
      {TensorShape{kMax}, DType::kFloat},
      {TensorShape{int64_t{1} << 62}, DType::kFloat},   // 2^64 bytes: wraps to 0
      {TensorShape{int64_t{1} << 61}, DType::kDouble},  // 2^64 bytes
      {TensorShape{int64_t{1} << 31, int64_t{1} << 31}, DType::kFloat},
      {TensorShape{int64_t{1} << 40}, DType::kFloat},  // 4 TiB: fits size_t, not memory
      {TensorShape{int64_t{1} << 60}, DType::kString},
  };
  for (const auto& [shape, dtype] : cases) {
    CAPTURE(shape.to_string(), dtype_name(dtype));
    auto check_oom = [&](auto&& make) {
      try {
        make();
        FAIL("no exception");
      } catch (const ResourceExhaustedError& e) {
        const std::string msg = e.what();
        CHECK_THAT(msg,
                   Catch::Contains("OOM when allocating tensor with shape " + shape.to_string()));
        CHECK_THAT(msg, Catch::Contains(std::string(dtype_name(dtype))));
      }
    };
    check_oom([&] { Tensor t(dtype, shape); });
    check_oom([&] { Tensor::zeros(dtype, shape); });
    if (dtype != DType::kString) {
      check_oom([&] { Tensor::filled(dtype, shape, Tensor(1), DeviceManager::instance().cpu()); });
      check_oom([&] { zeros_initializer(dtype)(shape); });
    }
    if (dtype == DType::kFloat || dtype == DType::kDouble) {
      check_oom([&] { random_uniform(shape, {.dtype = dtype, .seed = 1}); });
    }
  }
  // Variables with such a shape: creating one fails cleanly; one whose
  // shape is only known (from a VariableDef) stays uninitialized.
  Graph g;
  auto guard = g.as_default();
  Session sess;
  CHECK_THROWS_AS(Variable(bind(zeros_initializer(), TensorShape{kMax}, DType::kFloat),
                           {.name = "huge", .dtype = DType::kFloat}),
                  ResourceExhaustedError);
  CHECK_THROWS_AS(Variable(bind(random_uniform_initializer(),
                                TensorShape{int64_t{1} << 31, int64_t{1} << 31}, DType::kFloat),
                           {.name = "huge2", .dtype = DType::kFloat}),
                  ResourceExhaustedError);
  // With expected_shape the initial value is computed when initialized: that
  // fails, the variable stays uninitialized, and updating it fails cleanly.
  Variable lazy(
      bind(zeros_initializer(), TensorShape{int64_t{1} << 61}, DType::kDouble),
      {.name = "lazy", .dtype = DType::kDouble, .expected_shape = TensorShape{int64_t{1} << 61}});
  CHECK_THROWS_AS(sess.run(lazy.initializer()), ResourceExhaustedError);
  CHECK_FALSE(lazy.is_initialized());
  CHECK_THROWS_AS(lazy.assign_add(Tensor(1.0)), FailedPreconditionError);
  // Element counts beyond int64 are refused by the shape itself.
  CHECK_THROWS_AS(Tensor(DType::kFloat, TensorShape{kMax, 2}), InvalidArgumentError);
}

// 5. Literals out of the dtype's range.
TEST_CASE("integer literals out of range do not convert; float overflow gives inf",
          "[reliability][literal]") {
  Graph g;
  auto guard = g.as_default();
  Session sess;
  Variable i32(Tensor::from_vector<int32_t>({5}), {.name = "i32"});
  Variable u8(Tensor::from_vector<uint8_t>({5}), {.name = "u8"});
  Variable f32(Tensor::from_vector<float>({5}), {.name = "f32"});
  sess.run(global_variables_initializer());
  try {
    i32.assign_add(Tensor(int64_t{3000000000}));
    FAIL("no exception");
  } catch (const ValueError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("3000000000") && Catch::Contains("int32"));
  }
  CHECK_THROWS_AS(i32.assign(Tensor({int64_t{-2147483649}})), ValueError);
  CHECK_THROWS_AS(u8.assign(Tensor({-1})), ValueError);
  CHECK_THROWS_AS(u8.assign_add(Tensor(256)), ValueError);
  CHECK_THROWS_AS(add(i32.value(), Tensor({int64_t{1}, int64_t{1} << 40})), ValueError);
  CHECK(i32.value().to_vector<int32_t>() == std::vector<int32_t>{5});  // unchanged
  CHECK(u8.value().to_vector<uint8_t>() == std::vector<uint8_t>{5});
  // The extremes still fit.
  i32.assign(Tensor({int64_t{-2147483648}}));
  CHECK(i32.value().to_vector<int32_t>() ==
        std::vector<int32_t>{std::numeric_limits<int32_t>::min()});
  u8.assign(Tensor({255}));
  CHECK(u8.value().to_vector<uint8_t>() == std::vector<uint8_t>{255});
  // A finite double beyond float32's range rounds to inf, as in TensorFlow.
  f32.assign_add(Tensor(1e40));
  CHECK(std::isinf(f32.value().to_vector<float>()[0]));
  CHECK(f32.value().to_vector<float>()[0] > 0);
}

// 5. Integer edge cases: defined results, no UB (checked under UBSan).
TEST_CASE("integer MIN floordiv -1, MIN floormod -1, -MIN and overflow wrap",
          "[reliability][integer]") {
  const int32_t i32min = std::numeric_limits<int32_t>::min();
  const int64_t i64min = std::numeric_limits<int64_t>::min();
  const int32_t i32max = std::numeric_limits<int32_t>::max();
  Tensor a32 = Tensor::from_vector<int32_t>({i32min, 7, -7});
  Tensor m1 = Tensor::from_vector<int32_t>({-1, -1, 2});
  CHECK(floordiv(a32, m1).to_vector<int32_t>() == std::vector<int32_t>{i32min, -7, -4});
  CHECK(mod(a32, m1).to_vector<int32_t>() == std::vector<int32_t>{0, 0, 1});
  Tensor a64 = Tensor::from_vector<int64_t>({i64min, i64min + 1});
  Tensor m64 = Tensor::from_vector<int64_t>({-1, -1});
  CHECK(floordiv(a64, m64).to_vector<int64_t>() == std::vector<int64_t>{i64min, -(i64min + 1)});
  CHECK(mod(a64, m64).to_vector<int64_t>() == std::vector<int64_t>{0, 0});
  CHECK(negative(a32).to_vector<int32_t>()[0] == i32min);
  CHECK(abs(a64).to_vector<int64_t>()[0] == i64min);
  CHECK(add(Tensor::from_vector<int32_t>({i32max}), Tensor::from_vector<int32_t>({1}))
            .to_vector<int32_t>() == std::vector<int32_t>{i32min});
  CHECK(multiply(Tensor::from_vector<uint16_t>({65535}), Tensor::from_vector<uint16_t>({65535}))
            .to_vector<uint16_t>() == std::vector<uint16_t>{1});
}

// 4. Leftovers: deletion order, the existence check, stale temporaries.
TEST_CASE("checkpoint_exists needs the data shards; stale temporaries are removed",
          "[saver][reliability][cleanup]") {
  TempDir dir;
  Graph g;
  auto guard = g.as_default();
  Session sess;
  Variable v(Tensor::from_vector<float>({1, 2, 3}), {.name = "v"});
  sess.run(global_variables_initializer());
  Saver saver({.max_to_keep = 1});
  const std::string p1 = *saver.save(sess, dir / "m", {.global_step = 1}).path();
  CHECK(checkpoint_exists(p1));
  // An index without its data shard is no checkpoint.
  std::filesystem::rename(p1 + ".data-00000-of-00001", dir / "moved");
  CHECK_FALSE(checkpoint_exists(p1));
  CHECK_THROWS_WITH(saver.restore(sess, p1), Catch::Contains("m-1.data-00000-of-00001"));
  CHECK_FALSE(latest_checkpoint(dir.path()).has_value());
  std::filesystem::rename(dir / "moved", p1 + ".data-00000-of-00001");
  CHECK(checkpoint_exists(p1));

  // What killed saves leave: a sharded save's temp folder, temp files of a
  // checkpoint, of the state file, and data whose index was deleted. Files
  // of other prefixes and user files stay.
  std::filesystem::create_directories(dir / "m-7_temp_0123456789abcdef0123456789abcdef");
  testing::write_file(dir / "m-7_temp_0123456789abcdef0123456789abcdef/part-00000-of-00002.index",
                      "x");
  testing::write_file(dir / "m-8.index.tempstate123456", "x");
  testing::write_file(dir / "m-8.data-00000-of-00001.tempstate99", "x");
  testing::write_file(dir / "checkpoint.tempstate42", "x");
  testing::write_file(dir / "m-5.data-00000-of-00001", "x");
  testing::write_file(dir / "model-3.index.tempstate5", "x");  // another prefix
  testing::write_file(dir / "m-9.notes", "x");                 // not ours
  testing::write_file(dir / "m-6_temp_notes", "x");            // not a temp name
  saver.save(sess, dir / "m", {.global_step = 2});
  CHECK(dir_entries(dir.path()) ==
        std::vector<std::string>{"checkpoint", "m-2.data-00000-of-00001", "m-2.index", "m-2.meta",
                                 "m-6_temp_notes", "m-9.notes", "model-3.index.tempstate5"});
  // A sharded save's checkpoint restores after the cleanup too.
  saver.restore(sess, dir / "m-2");
}

}  // namespace varstate
