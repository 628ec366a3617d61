// Incremental checkpoints (varstate/checkpoint_chain.h): a chain of a base
// and deltas restores bit for bit what a full save at the same step holds,
// for every dtype, partitioned, sharded and asynchronous; the base policy,
// bad chains (NotFoundError / DataLossError naming the file, nothing
// restored), retention that keeps what kept deltas need, compaction, and a
// failed delta save leaving the previous checkpoint restorable.
#include <catch2/catch.hpp>

#include <filesystem>

#include "checkpoint/checkpoint_chain.h"
#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/fault_injection_file_system.h"
#include "varstate/cast.h"
#include "varstate/checkpoint_chain.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/checkpoint_state.h"
#include "varstate/device_manager.h"
#include "varstate/saver.h"
#include "varstate/scatter.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

namespace varstate {
namespace {

using testing::TempDir;

constexpr int64_t kRows = 4096;  // 16 KiB and more: saved by rows
constexpr int64_t kWidth = 4;

Tensor iota_of(DType dtype, int64_t rows, float scale) {
  std::vector<float> v(static_cast<size_t>(rows * kWidth));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) * scale;
  return cast_tensor(Tensor::from_vector<float>(v, {rows, kWidth}), dtype);
}

// Sets rows `ids` of `var` to a value that depends on `step`.
void touch(Variable& var, const std::vector<int64_t>& ids, int step) {
  const auto n = static_cast<int64_t>(ids.size());
  std::vector<float> v(static_cast<size_t>(n * kWidth), static_cast<float>(step % 7 + 1));
  scatter_update(var, Tensor::from_vector<int64_t>(ids, {n}),
                 cast_tensor(Tensor::from_vector<float>(v, {n, kWidth}), var.dtype()));
}

std::vector<std::byte> bytes_of(const std::string& checkpoint, const std::string& key) {
  return open_checkpoint(checkpoint)->read(key).bytes;
}

bool has_rows(const std::string& checkpoint, const std::string& key) {
  return BundleReader(checkpoint).contains(delta_ids_key(key, std::nullopt));
}

const std::vector<DType> kDtypes = {
    DType::kFloat,  DType::kDouble, DType::kHalf,      DType::kBFloat16,   DType::kInt8,
    DType::kInt16,  DType::kInt32,  DType::kInt64,     DType::kUInt8,      DType::kUInt16,
    DType::kUInt32, DType::kUInt64, DType::kComplex64, DType::kComplex128, DType::kBool};

}  // namespace

TEST_CASE("a chain restores what a full save holds, bit for bit, every dtype",
          "[saver][incremental]") {
  const bool async = GENERATE(false, true);
  const bool sharded = GENERATE(false, true);
  CAPTURE(async, sharded);
  TempDir dir;
  reset_default_graph();
  Session sess;
  std::vector<Variable> vars;
  for (DType dtype : kDtypes) {
    vars.emplace_back(iota_of(dtype, kRows, 1.0f),
                      VariableOptions{.name = std::string("v_") + std::string(dtype_name(dtype))});
  }
  Variable small(Tensor::from_vector<float>({1, 2, 3}), {.name = "small"});
  sess.run(global_variables_initializer());
  Saver saver({.sharded = sharded, .max_to_keep = 0});
  Saver full({.sharded = sharded, .max_to_keep = 0});
  saver
      .save(sess, dir / "inc",
            {.global_step = 0, .write_meta_graph = false, .async = async, .incremental = true})
      .wait();
  std::vector<std::string> deltas;
  for (int step = 1; step <= 3; ++step) {
    for (Variable& v : vars) touch(v, {int64_t{step}, 100 + step, kRows - 1}, step);
    small.assign(Tensor::from_vector<float>({1, 2, static_cast<float>(step)}));
    deltas.push_back(*saver
                          .save(sess, dir / "inc",
                                {.global_step = step,
                                 .write_meta_graph = false,
                                 .async = async,
                                 .incremental = true})
                          .wait());
    full.save(sess, dir / "full", {.global_step = step, .write_meta_graph = false});
    for (const Variable& v : vars) {
      INFO(v.op_name() << " at step " << step);
      CHECK(has_rows(deltas.back(), v.op_name()));
      CHECK(bytes_of(deltas.back(), v.op_name()) ==
            bytes_of(dir / ("full-" + std::to_string(step)), v.op_name()));
    }
    CHECK(bytes_of(deltas.back(), "small") ==
          bytes_of(dir / ("full-" + std::to_string(step)), "small"));
  }
  CHECK(checkpoint_chain(deltas.back()).size() == 4);
  // Restoring an older link of the chain brings back that step's values.
  const Tensor latest = vars[0].value().clone();
  saver.restore(sess, deltas[0]);
  CHECK(vars[0].value().to_vector<float>()[kWidth * 1] == 2.0f);  // step 1's row 1
  CHECK(vars[0].value().to_vector<float>()[kWidth * 2] == static_cast<float>((2 * kWidth) % 97));
  saver.restore(sess, deltas.back());
  CHECK(vars[0].value().to_vector<float>() == latest.to_vector<float>());
}

TEST_CASE("a partitioned chain restores into another partitioning and unpartitioned",
          "[saver][incremental][partitioned]") {
  TempDir dir;
  std::string path;
  std::vector<float> expected;
  {
    reset_default_graph();
    Session sess;
    PartitionedVariable emb =
        get_variable("emb", {.initializer = iota_of(DType::kFloat, kRows, 0.5f),
                             .partitioner = fixed_size_partitioner(3)});
    sess.run(global_variables_initializer());
    Saver saver;
    saver.save(sess, dir / "m", {.global_step = 0, .incremental = true});
    emb.scatter_update(
        Tensor::from_vector<int64_t>({0, 2000, 4095}),
        Tensor::filled(DType::kFloat, {3, kWidth}, Tensor(9.0f), DeviceManager::instance().cpu()));
    path = *saver.save(sess, dir / "m", {.global_step = 1, .incremental = true}).path();
    expected = emb.as_tensor().to_vector<float>();
    BundleReader delta(path);
    CHECK(delta.contains(delta_ids_key("emb", int64_t{0})));
    CHECK_FALSE(delta.contains("emb"));
  }
  for (int parts : {1, 2, 5}) {
    CAPTURE(parts);
    reset_default_graph();
    Session sess;
    PartitionedVariable emb = get_variable(
        "emb", {.shape = TensorShape{kRows, kWidth}, .partitioner = fixed_size_partitioner(parts)});
    Saver saver;
    saver.restore(sess, path);
    CHECK(emb.as_tensor().to_vector<float>() == expected);
  }
}

TEST_CASE("the base policy: every max_deltas_per_base deltas, or a delta too large",
          "[saver][incremental]") {
  TempDir dir;
  reset_default_graph();
  Session sess;
  Variable v(iota_of(DType::kFloat, kRows, 1.0f), {.name = "v"});
  sess.run(global_variables_initializer());
  Saver saver({.max_to_keep = 0, .max_deltas_per_base = 2});
  std::vector<size_t> lengths;
  for (int step = 0; step < 5; ++step) {
    touch(v, {int64_t{step}}, step);
    const std::string p =
        *saver.save(sess, dir / "m", {.global_step = step, .incremental = true}).path();
    lengths.push_back(checkpoint_chain(p).size());
  }
  CHECK(lengths == std::vector<size_t>{1, 2, 3, 1, 2});
  v.assign_add(Tensor(1.0f));  // every row changed: a base
  const std::string p =
      *saver.save(sess, dir / "m", {.global_step = 9, .incremental = true}).path();
  CHECK(checkpoint_chain(p).size() == 1);
  // A plain save stays outside the chain: the next delta extends step 9.
  touch(v, {7}, 1);
  saver.save(sess, dir / "m", {.global_step = 10});
  touch(v, {8}, 1);
  const std::string next =
      *saver.save(sess, dir / "m", {.global_step = 11, .incremental = true}).path();
  CHECK(checkpoint_chain(next).size() == 2);
  CHECK(bytes_of(next, "v") != bytes_of(dir / "m-10", "v"));
  CHECK(BundleReader(next).read(delta_ids_key("v", std::nullopt)).values<int64_t>() ==
        std::vector<int64_t>{7, 8});
}

TEST_CASE("bad chains: missing base, changed link, delta of another model; nothing restored",
          "[saver][incremental]") {
  TempDir dir;
  TempDir other;
  reset_default_graph();
  Session sess;
  Variable v(iota_of(DType::kFloat, kRows, 1.0f), {.name = "v"});
  sess.run(global_variables_initializer());
  Saver saver({.max_to_keep = 0});
  saver.save(sess, dir / "m", {.global_step = 0, .incremental = true});
  touch(v, {5}, 1);
  const std::string delta =
      *saver.save(sess, dir / "m", {.global_step = 1, .incremental = true}).path();
  touch(v, {6}, 2);
  const std::vector<float> before = v.value().to_vector<float>();
  namespace fs = std::filesystem;

  SECTION("a missing base") {
    fs::rename(dir / "m-0.index", dir / "moved.index");
    try {
      saver.restore(sess, delta);
      FAIL("restored");
    } catch (const NotFoundError& e) {
      CHECK_THAT(e.what(), Catch::Contains("m-0") && Catch::Contains("missing"));
    }
  }
  SECTION("a changed base") {
    Saver stranger({.var_list = std::vector<Variable>{v}, .max_to_keep = 0});
    v.assign_add(Tensor(1.0f));
    stranger.save(sess, other / "m", {.global_step = 0});
    fs::copy_file(other / "m-0.index", dir / "m-0.index", fs::copy_options::overwrite_existing);
    v.assign_sub(Tensor(1.0f));
    try {
      saver.restore(sess, delta);
      FAIL("restored");
    } catch (const DataLossError& e) {
      CHECK_THAT(e.what(), Catch::Contains("m-0.index") && Catch::Contains("crc32c"));
    }
  }
  SECTION("corrupt delta rows") {
    BundleReader reader(delta);
    const TensorInfo ids = reader.info(delta_ids_key("v", std::nullopt));
    std::string data = testing::read_file(delta + ".data-00000-of-00001");
    data[static_cast<size_t>(ids.offset)] ^= 0x55;
    testing::write_file(delta + ".data-00000-of-00001", data);
    CHECK_THROWS_AS(saver.restore(sess, delta), DataLossError);
  }
  CHECK(v.value().to_vector<float>() == before);
}

TEST_CASE("max_to_keep never deletes a base or delta a kept checkpoint needs",
          "[saver][incremental]") {
  TempDir dir;
  reset_default_graph();
  Session sess;
  Variable v(iota_of(DType::kFloat, kRows, 1.0f), {.name = "v"});
  sess.run(global_variables_initializer());
  Saver saver({.max_to_keep = 2, .max_deltas_per_base = 3});
  for (int step = 0; step < 6; ++step) {
    touch(v, {int64_t{step}}, step);
    saver.save(sess, dir / "m", {.global_step = step, .incremental = true});
    for (const std::string& kept : saver.last_checkpoints()) {
      INFO("step " << step << ", kept " << kept);
      CHECK_NOTHROW(open_checkpoint(kept)->read("v"));
    }
  }
  // Steps 4 and 5 are kept; 4 is the new base (0 + 3 deltas, then a base), so 0..3 are gone.
  for (int step = 0; step < 4; ++step)
    CHECK_FALSE(checkpoint_exists(dir / ("m-" + std::to_string(step))));
  CHECK(checkpoint_chain(dir / "m-5").size() == 2);
}

TEST_CASE("compaction writes one full checkpoint with the chain's values", "[saver][incremental]") {
  TempDir dir;
  reset_default_graph();
  Session sess;
  Variable v(iota_of(DType::kFloat, kRows, 1.0f), {.name = "v"});
  Variable s(Tensor::from_vector<std::string>({"a", "b"}), {.name = "s"});
  sess.run(global_variables_initializer());
  Saver saver;
  saver.save(sess, dir / "m", {.global_step = 0, .incremental = true});
  touch(v, {1, 2}, 3);
  const std::string delta =
      *saver.save(sess, dir / "m", {.global_step = 1, .incremental = true}).path();
  compact_checkpoint(delta, dir / "compact");
  BundleReader out(dir / "compact");
  CHECK_FALSE(out.contains(kChainKey));
  CHECK(out.list().size() == 2);
  CHECK(out.read("v").bytes == bytes_of(delta, "v"));
  CHECK(out.read("s").values<std::string>() == std::vector<std::string>{"a", "b"});
  CHECK(std::filesystem::exists(dir / "compact.meta"));
  CHECK(checkpoint_chain(dir / "compact").size() == 1);
}

TEST_CASE("a failed delta save leaves the latest checkpoint restorable; the next is a base",
          "[saver][incremental][reliability]") {
  const FileOp op = GENERATE(FileOp::kAppend, FileOp::kSync, FileOp::kRename);
  const int nth = GENERATE(1, 2, 3);
  CAPTURE(static_cast<int>(op), nth);
  TempDir dir;
  reset_default_graph();
  Session sess;
  FaultInjectionFileSystem fs(default_file_system());
  Variable v(iota_of(DType::kFloat, kRows, 1.0f), {.name = "v"});
  sess.run(global_variables_initializer());
  Saver saver({.file_system = &fs});
  saver.save(sess, dir / "m", {.global_step = 0, .incremental = true});
  touch(v, {3}, 1);
  const std::string good =
      *saver.save(sess, dir / "m", {.global_step = 1, .incremental = true}).path();
  const std::vector<float> at_good = v.value().to_vector<float>();
  touch(v, {4}, 2);
  fs.fail_nth(op, nth);
  bool failed = false;
  try {
    saver.save(sess, dir / "m", {.global_step = 2, .incremental = true});
  } catch (const UnavailableError&) {
    failed = true;
  }
  fs.clear_faults();
  const std::string latest = *latest_checkpoint(dir.path());
  if (failed) CHECK(latest == good);
  const std::vector<float> now = v.value().to_vector<float>();
  saver.restore(sess, latest);
  CHECK(v.value().to_vector<float>() == (failed ? at_good : now));
  // Whatever happened, the next delta restores the current values.
  touch(v, {5}, 3);
  const std::vector<float> expected = v.value().to_vector<float>();
  const std::string next =
      *saver.save(sess, dir / "m", {.global_step = 3, .incremental = true}).path();
  v.assign(Tensor::zeros(DType::kFloat, {kRows, kWidth}));
  saver.restore(sess, next);
  CHECK(v.value().to_vector<float>() == expected);
}

}  // namespace varstate

namespace varstate {

TEST_CASE("after a restart, retention deletes a recovered chain once nothing kept needs it",
          "[saver][incremental]") {
  TempDir dir;
  reset_default_graph();
  Session sess;
  Variable v(iota_of(DType::kFloat, kRows, 1.0f), {.name = "v"});
  sess.run(global_variables_initializer());
  auto path = [&](int step) { return dir / ("m-" + std::to_string(step)); };
  {
    Saver first({.max_to_keep = 2});
    for (int step = 0; step < 4; ++step) {
      touch(v, {int64_t{step}}, step);
      first.save(sess, dir / "m", {.global_step = step, .incremental = true});
    }
  }
  Saver second({.max_to_keep = 2});
  second.recover_last_checkpoints({path(2), path(3)});
  touch(v, {9}, 4);
  second.save(sess, dir / "m", {.global_step = 4, .incremental = true});
  CHECK(checkpoint_chain(path(4)).size() == 1);                               // a new base
  for (int step = 0; step < 4; ++step) CHECK(checkpoint_exists(path(step)));  // m-3 needs them
  touch(v, {10}, 5);
  second.save(sess, dir / "m", {.global_step = 5, .incremental = true});
  for (int step = 0; step < 4; ++step) CHECK_FALSE(checkpoint_exists(path(step)));
  CHECK(checkpoint_chain(path(5)).size() == 2);
}

}  // namespace varstate
