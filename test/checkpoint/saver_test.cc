// Saver: round trips, TensorFlow's checkpoints, bookkeeping (max_to_keep,
// state file), sharding, partitioned variables, reshape, SaverDef and
// asynchronous saves.
#include <catch2/catch.hpp>

#include <complex>
#include <cstring>
#include <filesystem>
#include <thread>

#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/tensor_bundle.h"
#include "device_fixture.h"
#include "runtime/variable_access.h"
#include "test_util.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/checkpoint_state.h"
#include "varstate/placement.h"
#include "varstate/replica_device_setter.h"
#include "varstate/saver.h"
#include "varstate/variables.h"

namespace varstate {
namespace {

using testing::FreshSession;
using testing::TempDir;

std::string bytes_of(const Tensor& t) {
  Tensor h = t.to_host();
  if (h.dtype() == DType::kString) {
    std::string out;
    for (int64_t i = 0; i < h.num_elements(); ++i) out += h.data<std::string>()[i] + '\0';
    return out;
  }
  return std::string(static_cast<const char*>(h.raw_data()), h.nbytes());
}

template <typename T>
Tensor random_tensor(std::vector<int64_t> dims, uint64_t seed) {
  TensorShape shape(dims);
  return Tensor::from_vector<T>(
      testing::random_ints<T>(static_cast<size_t>(shape.num_elements()), seed), shape);
}

Tensor iota(int64_t n, float start, std::vector<int64_t> dims) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return Tensor::from_vector<float>(v, TensorShape(std::move(dims)));
}

bool exists(const std::string& p) { return std::filesystem::exists(p); }

// Every save in these tests is read back before it is used: each tensor of
// the checkpoint is read with its checksum verified, as restore reads it.
SaveHandle verified(SaveHandle h) {
  const std::optional<std::string>& path = h.wait();
  CHECK(h.done());
  if (path) {
    std::unique_ptr<CheckpointReader> reader = open_checkpoint(*path);
    for (const TensorInfo& info : reader->list()) {
      CAPTURE(*path, info.name);
      CHECK_NOTHROW(reader->read(info.name));
    }
  }
  return h;
}

}  // namespace

TEST_CASE_METHOD(FreshSession, "save and restore are bit-exact for every dtype", "[saver]") {
  TempDir dir;
  CAPTURE(testing::kSeed);
  std::vector<Variable> vars = {
      Variable(random_tensor<float>({3, 5}, testing::kSeed), {.name = "f32"}),
      Variable(random_tensor<double>({7}, testing::kSeed + 1), {.name = "f64"}),
      Variable(random_tensor<int32_t>({2, 2, 2}, testing::kSeed + 2), {.name = "i32"}),
      Variable(random_tensor<int64_t>({4}, testing::kSeed + 3), {.name = "i64"}),
      Variable(random_tensor<int8_t>({9}, testing::kSeed + 4), {.name = "i8"}),
      Variable(random_tensor<uint8_t>({9}, testing::kSeed + 5), {.name = "u8"}),
      Variable(random_tensor<int16_t>({3}, testing::kSeed + 6), {.name = "i16"}),
      Variable(random_tensor<uint16_t>({3}, testing::kSeed + 7), {.name = "u16"}),
      Variable(random_tensor<half>({5}, testing::kSeed + 8), {.name = "f16"}),
      Variable(random_tensor<bfloat16>({5}, testing::kSeed + 9), {.name = "bf16"}),
      Variable(random_tensor<std::complex<float>>({2}, testing::kSeed + 10), {.name = "c64"}),
      Variable(random_tensor<std::complex<double>>({2}, testing::kSeed + 11), {.name = "c128"}),
      Variable(Tensor::from_vector<bool>({true, false, true}, TensorShape{3}), {.name = "flag"}),
      Variable(Tensor::from_vector<std::string>({"ab", "", "xyz"}, TensorShape{3}),
               {.name = "words"}),
      Variable(Tensor(3.5f), {.name = "scalar"}),
      Variable(Tensor::zeros(DType::kFloat, TensorShape{0, 4}), {.name = "empty"}),
  };
  session.run(global_variables_initializer());
  std::vector<std::string> before;
  for (const auto& v : vars) before.push_back(bytes_of(v.value()));

  Saver saver;  // all global variables
  auto path = verified(saver.save(session, dir / "model", {.global_step = 7})).path();
  REQUIRE(path == dir / "model-7");
  CHECK(exists(dir / "model-7.index"));
  CHECK(exists(dir / "model-7.data-00000-of-00001"));
  CHECK(exists(dir / "model-7.meta"));

  // Overwrite every variable, then restore.
  for (auto& v : vars) internal::set_value(v, Tensor::zeros(v.dtype(), v.shape()));
  saver.restore(session, *path);
  for (size_t i = 0; i < vars.size(); ++i) {
    CAPTURE(vars[i].op_name());
    CHECK(bytes_of(vars[i].value()) == before[i]);
  }

  // Restoring initializes fresh (uninitialized) variables too.
  Graph g2;
  std::vector<Variable> fresh;
  for (const auto& v : vars) {
    fresh.push_back(Variable(VariableOptions{.dtype = v.dtype(),
                                             .expected_shape = v.shape(),
                                             .variable_def = v.to_proto(),
                                             .graph = &g2}));
    CHECK_FALSE(fresh.back().is_initialized());
  }
  Saver(SaverOptions{.var_list = fresh, .graph = &g2}).restore(session, *path);
  for (size_t i = 0; i < vars.size(); ++i) CHECK(bytes_of(fresh[i].value()) == before[i]);
}

TEST_CASE_METHOD(FreshSession, "restores TensorFlow's V2 and V1 checkpoints", "[saver][tf]") {
  Variable a(Tensor(0.f), {.name = "a"});
  Variable b(Tensor(0.f), {.name = "b"});
  Variable c(Tensor(0.f), {.name = "c"});
  Saver saver({.var_list = std::vector<Variable>{a, b, c}});
  saver.restore(session, testing::testdata_dir() + "/tensorflow/half_plus_two_v2/variables");
  CHECK(a.value().scalar<float>() == 0.5f);
  CHECK(b.value().scalar<float>() == 2.0f);
  CHECK(c.value().scalar<float>() == 3.0f);

  // V1: keys "Variable" and "Variable_1", restored under other names via a map.
  Variable w(Tensor(0.f), {.name = "w"});
  Variable bias(Tensor(0.f), {.name = "bias"});
  Saver v1({.var_list = std::map<std::string, Variable>{{"Variable", w}, {"Variable_1", bias}}});
  v1.restore(session, testing::testdata_dir() + "/tensorflow/half_plus_two_v1/export");
  CHECK(w.value().scalar<float>() == 0.5f);
  CHECK(bias.value().scalar<float>() == 2.0f);
}

TEST_CASE_METHOD(FreshSession, "save paths, the state file and max_to_keep", "[saver]") {
  TempDir dir;
  Variable v(iota(4, 0, {4}), {.name = "v"});
  session.run(global_variables_initializer());
  Saver saver({.max_to_keep = 2});
  for (int64_t step : {0, 1000, 2000, 3000}) {
    v.assign(iota(4, static_cast<float>(step), {4}));
    auto p = verified(saver.save(session, dir / "my-model", {.global_step = step})).path();
    CHECK(p == dir / ("my-model-" + std::to_string(step)));
  }
  // The two oldest are gone, files and meta graphs both.
  for (const char* gone : {"my-model-0", "my-model-1000"}) {
    CAPTURE(gone);
    CHECK_FALSE(exists(dir / (std::string(gone) + ".index")));
    CHECK_FALSE(exists(dir / (std::string(gone) + ".data-00000-of-00001")));
    CHECK_FALSE(exists(dir / (std::string(gone) + ".meta")));
  }
  for (const char* kept : {"my-model-2000", "my-model-3000"}) {
    CHECK(exists(dir / (std::string(kept) + ".index")));
    CHECK(exists(dir / (std::string(kept) + ".meta")));
  }
  CHECK(saver.last_checkpoints() ==
        std::vector<std::string>{dir / "my-model-2000", dir / "my-model-3000"});
  const std::string text = testing::read_file(dir / "checkpoint");
  CHECK(text == "model_checkpoint_path: \"" + dir / "my-model-3000" + "\"\n" +
                    "all_model_checkpoint_paths: \"" + dir / "my-model-2000" + "\"\n" +
                    "all_model_checkpoint_paths: \"" + dir / "my-model-3000" + "\"\n");
  CHECK(latest_checkpoint(dir.path()) == dir / "my-model-3000");

  // Restore an older one still on disk.
  saver.restore(session, dir / "my-model-2000");
  CHECK(v.value().to_vector<float>() == std::vector<float>{2000, 2001, 2002, 2003});

  // A separate state file name; path components or a collision are errors.
  verified(saver.save(session, dir / "other",
                      {.latest_filename = "other_state", .write_meta_graph = false}));
  CHECK(get_checkpoint_state(dir.path(), "other_state")->model_checkpoint_path == dir / "other");
  CHECK_FALSE(exists(dir / "other.meta"));
  CHECK_THROWS_AS(saver.save(session, dir / "x", {.latest_filename = "a/b"}), ValueError);
  CHECK_THROWS_AS(saver.save(session, dir / "checkpoint"), ValueError);
  CHECK_THROWS_AS(saver.save(session, dir / "no_such_dir/model"), ValueError);
}

TEST_CASE_METHOD(FreshSession,
                 "max_to_keep=0 keeps everything; keep_checkpoint_every_n_hours preserves",
                 "[saver]") {
  TempDir dir;
  Variable v(Tensor(1.f), {.name = "v"});
  session.run(global_variables_initializer());
  {
    Saver saver({.max_to_keep = 0});
    for (int64_t s = 1; s <= 3; ++s)
      verified(
          saver.save(session, dir / "all", {.global_step = s, .latest_filename = "all_state"}));
    for (int s = 1; s <= 3; ++s) CHECK(exists(dir / ("all-" + std::to_string(s) + ".index")));
    auto state = get_checkpoint_state(dir.path(), "all_state");
    CHECK(state->all_model_checkpoint_paths == std::vector<std::string>{dir / "all-3"});
    CHECK(saver.last_checkpoints().empty());
  }
  // A fake clock: one save per hour, keep 1 recent + one every 2 hours.
  double now = 1e9;
  Saver saver({.max_to_keep = 1, .keep_checkpoint_every_n_hours = 2, .clock = [&] { return now; }});
  for (int64_t s = 1; s <= 6; ++s) {
    now += 3600;
    verified(saver.save(session, dir / "h", {.global_step = s, .write_meta_graph = false}));
  }
  // Start + 2h: the first checkpoint saved after t0+2h (s=3) is kept, then
  // the next after t0+4h (s=5); s=6 is the most recent.
  std::vector<int> present;
  for (int s = 1; s <= 6; ++s) {
    if (exists(dir / ("h-" + std::to_string(s) + ".index"))) present.push_back(s);
  }
  CHECK(present == std::vector<int>{3, 5, 6});
  CHECK(saver.last_checkpoints() == std::vector<std::string>{dir / "h-6"});
}

TEST_CASE_METHOD(FreshSession, "last_checkpoints can be set and recovered", "[saver]") {
  TempDir dir;
  Variable v(Tensor(1.f), {.name = "v"});
  session.run(global_variables_initializer());
  Saver first({.max_to_keep = 3});
  for (int64_t s = 1; s <= 3; ++s) verified(first.save(session, dir / "m", {.global_step = s}));

  Saver second({.max_to_keep = 3});
  second.recover_last_checkpoints({dir / "m-1", dir / "m-2", dir / "missing", dir / "m-3"});
  CHECK(second.last_checkpoints() ==
        std::vector<std::string>{dir / "m-1", dir / "m-2", dir / "m-3"});
  verified(second.save(session, dir / "m", {.global_step = 4}));  // pushes m-1 out
  CHECK_FALSE(exists(dir / "m-1.index"));
  CHECK(exists(dir / "m-2.index"));

  second.set_last_checkpoints_with_time({{dir / "m-3", 5.0}, {dir / "m-4", 6.0}});
  CHECK(second.last_checkpoints() == std::vector<std::string>{dir / "m-3", dir / "m-4"});
  second.set_last_checkpoints({dir / "m-2"});
  CHECK(second.last_checkpoints() == std::vector<std::string>{dir / "m-2"});
}

TEST_CASE_METHOD(FreshSession, "a restarted saver trims a longer recovered list to max_to_keep",
                 "[saver]") {
  TempDir dir;
  Variable v(Tensor(1.f), {.name = "v"});
  session.run(global_variables_initializer());
  Saver first({.max_to_keep = 4});
  for (int64_t s = 1; s <= 4; ++s) verified(first.save(session, dir / "m", {.global_step = s}));

  // Restarted with max_to_keep 2: the next save leaves the newest 2.
  Saver second({.max_to_keep = 2});
  second.recover_last_checkpoints(get_checkpoint_state(dir.path())->all_model_checkpoint_paths);
  verified(second.save(session, dir / "m", {.global_step = 5}));
  for (int s = 1; s <= 3; ++s) CHECK_FALSE(exists(dir / ("m-" + std::to_string(s) + ".index")));
  CHECK(second.last_checkpoints() == std::vector<std::string>{dir / "m-4", dir / "m-5"});
  CHECK(get_checkpoint_state(dir.path())->all_model_checkpoint_paths ==
        std::vector<std::string>{dir / "m-4", dir / "m-5"});
}

TEST_CASE_METHOD(FreshSession, "save_relative_paths: a copied folder restores from its own files",
                 "[saver]") {
  TempDir dir;
  Variable v(Tensor(1.f), {.name = "v"});
  session.run(global_variables_initializer());
  Saver saver({.max_to_keep = 2, .save_relative_paths = true});
  std::filesystem::create_directory(dir / "orig");
  for (int64_t s = 1; s <= 2; ++s) {
    v.assign(Tensor(static_cast<float>(s)));
    verified(saver.save(session, dir / "orig/m", {.global_step = s}));
  }
  CHECK(testing::read_file(dir / "orig/checkpoint") ==
        "model_checkpoint_path: \"m-2\"\nall_model_checkpoint_paths: \"m-1\"\n"
        "all_model_checkpoint_paths: \"m-2\"\n");
  std::filesystem::copy(dir / "orig", dir / "copy");
  std::filesystem::remove_all(dir / "orig");
  // Read back joined onto the copy's directory.
  CHECK(latest_checkpoint(dir / "copy") == dir / "copy/m-2");
  CHECK(get_checkpoint_state(dir / "copy")->all_model_checkpoint_paths ==
        std::vector<std::string>{dir / "copy/m-1", dir / "copy/m-2"});
  v.assign(Tensor(0.f));
  saver.restore(session, *latest_checkpoint(dir / "copy"));
  CHECK(v.value().to_host().scalar<float>() == 2.f);
}

TEST_CASE_METHOD(FreshSession, "SaverDef, build and from_proto", "[saver]") {
  Variable v(Tensor(1.f), {.name = "v"});
  Saver saver;
  SaverDef def = saver.as_saver_def();
  CHECK(def.filename_tensor_name == "save/Const:0");
  CHECK(def.save_tensor_name == "save/control_dependency:0");
  CHECK(def.restore_op_name == "save/restore_all");
  CHECK(def.max_to_keep == 5);
  CHECK_FALSE(def.sharded);
  CHECK(def.keep_checkpoint_every_n_hours == 10000.0f);
  CHECK(def.version == CheckpointFormatVersion::kV2);
  // keep_checkpoint_every_n_hours = 10000.0 is "35 00 40 1c 46" on the wire.
  CHECK(testing::to_hex(def.serialize()).find("3500401c46") != std::string::npos);
  CHECK(SaverDef::parse(def.serialize()) == def);
  CHECK(saver.to_proto() == def);

  Saver sharded({.sharded = true, .max_to_keep = 3});
  SaverDef sd = sharded.as_saver_def();
  CHECK(sd.filename_tensor_name == "save_1/Const:0");
  CHECK(sd.save_tensor_name == "save_1/Identity:0");
  CHECK(sd.sharded);
  Saver again = Saver::from_proto(sd);
  CHECK(again.as_saver_def() == sd);

  Saver deferred({.defer_build = true});
  CHECK_FALSE(deferred.is_built());
  CHECK_THROWS_AS(deferred.save(session, "x"), FailedPreconditionError);
  Variable later(Tensor(2.f), {.name = "later"});
  deferred.build();
  CHECK(deferred.items().size() == 2);  // variables created before build() count

  CHECK_THROWS_AS(Saver({.write_version = CheckpointFormatVersion::kLegacy}), InvalidArgumentError);
}

TEST_CASE_METHOD(FreshSession, "var_list validation and empty savers", "[saver]") {
  Variable v1(Tensor(1.f), {.name = "v1"});
  Variable v2(Tensor(2.f), {.name = "v2"});
  CHECK_THROWS_AS(Saver({.var_list = std::vector<Variable>{v1, v1}}), ValueError);
  CHECK_THROWS_AS(Saver({.var_list = std::map<std::string, Variable>{{"a", v1}, {"b", v1}}}),
                  ValueError);
  // Another handle to the same variable is the same variable, wherever it
  // comes in the list; the message names it (and, for a map, both keys).
  Variable v1_again = v1;
  CHECK_THROWS_WITH(Saver({.var_list = std::vector<Variable>{v1, v2, v1_again}}),
                    Catch::Contains("\"v1\" appears twice in var_list"));
  CHECK_THROWS_WITH(
      Saver({.var_list = std::map<std::string, Variable>{{"a", v1}, {"b", v2}, {"c", v1_again}}}),
      Catch::Contains("restored with two names: \"a\" and \"c\""));
  Graph other;
  Variable same_name(Tensor(1.f), {.name = "v1", .graph = &other});
  CHECK_THROWS_WITH(Saver({.var_list = std::vector<Variable>{v1, same_name}}),
                    Catch::Contains("At least two variables have the same name: v1"));
  Variable slice(Tensor::from_vector<float>({1, 2}, TensorShape{2}),
                 {.name = "p", .save_slice_info = SaveSliceInfo{"v2", {4}, {0}, {2}}});
  CHECK_THROWS_WITH(Saver({.var_list = std::vector<Variable>{v2, slice}}),
                    Catch::Contains("Mixing slices and non-slices"));

  Graph empty_graph;
  CHECK_THROWS_AS(Saver({.graph = &empty_graph}), ValueError);
  CHECK_THROWS_AS(Saver({.var_list = std::vector<Variable>{}}), ValueError);
  Saver noop({.var_list = std::vector<Variable>{}, .allow_empty = true});
  TempDir dir;
  SaveHandle h = verified(noop.save(session, dir / "nothing"));
  CHECK_FALSE(h.path().has_value());
  CHECK_FALSE(h.wait().has_value());
  CHECK_FALSE(exists(dir / "nothing.index"));
  noop.restore(session, dir / "nothing");  // no-op
}

TEST_CASE_METHOD(FreshSession, "a map var_list saves under its keys; global_step may be a variable",
                 "[saver]") {
  TempDir dir;
  Variable w(iota(6, 1, {2, 3}), {.name = "layer/w"});
  Variable step(Tensor(int64_t{42}), {.trainable = false, .name = "global_step"});
  session.run(global_variables_initializer());
  Saver saver({.var_list = std::map<std::string, Variable>{{"weights", w}}});
  auto path = *verified(saver.save(session, dir / "m", {.global_step = step})).path();
  CHECK(path == dir / "m-42");
  auto reader = open_checkpoint(path);
  REQUIRE(reader->list().size() == 1);
  CHECK(reader->list()[0].name == "weights");
  CHECK(reader->read("weights").values<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE_METHOD(FreshSession, "sharded save: one data shard per device, restored in parallel",
                 "[saver][sharded]") {
  TempDir dir;
  std::vector<Variable> vars;
  {
    DeviceScope ps(replica_device_setter(3));
    for (int i = 0; i < 7; ++i) {
      vars.emplace_back(iota(5 + i, static_cast<float>(100 * i), {5 + i}),
                        VariableOptions{.name = "v" + std::to_string(i)});
    }
  }
  CHECK(vars[0].placement() == "/job:ps/task:0" + std::string(testing::test_device_name()));
  CHECK(vars[1].placement() == "/job:ps/task:1" + std::string(testing::test_device_name()));
  session.run(global_variables_initializer());
  Saver saver({.sharded = true});
  auto path = *verified(saver.save(session, dir / "sharded", {.global_step = 1})).path();
  CHECK(path == dir / "sharded-1");
  for (int s = 0; s < 3; ++s)
    CHECK(exists(dir / ("sharded-1.data-0000" + std::to_string(s) + "-of-00003")));
  // No temporary directory is left behind.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    entries += e.is_directory() ? 100 : 1;
  CHECK(entries == 6);  // index, 3 shards, meta, checkpoint
  // Shard i holds task i's variables.
  auto reader = open_checkpoint(path);
  for (const TensorInfo& info : reader->list()) {
    int i = std::stoi(info.name.substr(1));
    CHECK(info.shard == i % 3);
  }
  for (auto& v : vars) internal::set_value(v, Tensor::zeros(DType::kFloat, v.shape()));
  saver.restore(session, path);
  for (int i = 0; i < 7; ++i)
    CHECK(bytes_of(vars[static_cast<size_t>(i)].value()) ==
          bytes_of(iota(5 + i, static_cast<float>(100 * i), {5 + i})));
  // Sequential restore gives the same.
  for (auto& v : vars) internal::set_value(v, Tensor::zeros(DType::kFloat, v.shape()));
  Saver sequential({.restore_sequentially = true});
  sequential.restore(session, path);
  for (int i = 0; i < 7; ++i)
    CHECK(bytes_of(vars[static_cast<size_t>(i)].value()) ==
          bytes_of(iota(5 + i, static_cast<float>(100 * i), {5 + i})));
}

namespace {

// Partitions of a [10, 3] float tensor holding 0..29 along dimension 0.
std::vector<Variable> make_partitions(Graph& g, const std::string& name,
                                      const std::vector<int64_t>& rows, bool initialize) {
  std::vector<Variable> parts;
  int64_t offset = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    Tensor value = initialize ? iota(rows[i] * 3, static_cast<float>(offset * 3), {rows[i], 3})
                              : Tensor::zeros(DType::kFloat, TensorShape{rows[i], 3});
    parts.emplace_back(value, VariableOptions{.name = name + "/part_" + std::to_string(i),
                                              .graph = &g,
                                              .save_slice_info = SaveSliceInfo{
                                                  name, {10, 3}, {offset, 0}, {rows[i], 3}}});
    offset += rows[i];
  }
  return parts;
}

std::vector<float> concat_values(const std::vector<Variable>& parts) {
  std::vector<float> out;
  for (const auto& p : parts) {
    auto v = p.value().to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace

TEST_CASE("partitioned variables restore into any partitioning", "[saver][partitioned]") {
  TempDir dir;
  Session sess;
  std::vector<float> expected(30);
  for (int i = 0; i < 30; ++i) expected[static_cast<size_t>(i)] = static_cast<float>(i);

  Graph g3;
  auto three = make_partitions(g3, "emb", {4, 3, 3}, true);
  for (auto& p : three) sess.run(p.initializer());
  const std::string path =
      *verified(Saver({.var_list = three, .graph = &g3}).save(sess, dir / "p3")).path();
  auto reader = open_checkpoint(path);
  REQUIRE(reader->list().size() == 1);
  CHECK(reader->list()[0].name == "emb");
  CHECK(reader->list()[0].slices.size() == 3);

  SECTION("into two partitions") {
    Graph g2;
    auto two = make_partitions(g2, "emb", {5, 5}, false);
    Saver({.var_list = two, .graph = &g2}).restore(sess, path);
    CHECK(concat_values(two) == expected);
  }
  SECTION("into one unpartitioned variable") {
    Graph g1;
    Variable whole(Tensor::zeros(DType::kFloat, TensorShape{10, 3}), {.name = "emb", .graph = &g1});
    Saver({.var_list = std::vector<Variable>{whole}, .graph = &g1}).restore(sess, path);
    CHECK(whole.value().to_vector<float>() == expected);

    // And back: the unpartitioned save restores into three partitions.
    const std::string whole_path =
        *verified(Saver({.var_list = std::vector<Variable>{whole}, .graph = &g1})
                      .save(sess, dir / "whole"))
             .path();
    Graph g4;
    auto parts = make_partitions(g4, "emb", {2, 7, 1}, false);
    Saver({.var_list = parts, .graph = &g4}).restore(sess, whole_path);
    CHECK(concat_values(parts) == expected);
  }
  SECTION("sharded partitions") {
    Graph gs;
    std::vector<Variable> parts;
    {
      DeviceScope ps(replica_device_setter(3));
      parts = make_partitions(gs, "emb", {4, 3, 3}, true);
    }
    for (auto& p : parts) sess.run(p.initializer());
    const std::string sp =
        *verified(Saver({.var_list = parts, .sharded = true, .graph = &gs}).save(sess, dir / "ps"))
             .path();
    CHECK(open_checkpoint(sp)->list()[0].slices.size() == 3);
    Graph g1;
    Variable whole(Tensor::zeros(DType::kFloat, TensorShape{10, 3}), {.name = "emb", .graph = &g1});
    Saver({.var_list = std::vector<Variable>{whole}, .graph = &g1}).restore(sess, sp);
    CHECK(whole.value().to_vector<float>() == expected);
  }
}

TEST_CASE_METHOD(FreshSession, "reshape restores into a different shape with as many elements",
                 "[saver]") {
  TempDir dir;
  Variable v(iota(6, 0, {2, 3}), {.name = "v"});
  session.run(global_variables_initializer());
  const std::string path = *verified(Saver().save(session, dir / "m")).path();

  Graph g2;
  Variable r(Tensor::zeros(DType::kFloat, TensorShape{3, 2}), {.name = "v", .graph = &g2});
  Variable bad(Tensor::zeros(DType::kFloat, TensorShape{4, 2}), {.name = "v", .graph = &g2});
  CHECK_THROWS_WITH(
      Saver({.var_list = std::vector<Variable>{r}, .graph = &g2}).restore(session, path),
      Catch::Contains("\"v\"") && Catch::Contains("[3,2]") && Catch::Contains("[2,3]"));
  Saver({.var_list = std::vector<Variable>{r}, .reshape = true, .graph = &g2})
      .restore(session, path);
  CHECK(r.shape() == TensorShape{3, 2});
  CHECK(r.value().to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
  CHECK_THROWS_AS(
      Saver(
          {.var_list = std::map<std::string, Variable>{{"v", bad}}, .reshape = true, .graph = &g2})
          .restore(session, path),
      InvalidArgumentError);
}

TEST_CASE_METHOD(FreshSession, "asynchronous save writes the snapshot taken when save() returned",
                 "[saver][async]") {
  TempDir dir;
  const int64_t n = 1 << 20;
  Variable a(Tensor::zeros(DType::kFloat, TensorShape{n}), {.name = "a"});
  Variable b(iota(8, 0, {8}), {.name = "b"});
  session.run(global_variables_initializer());
  Saver saver;
  SaveHandle h = saver.save(session, dir / "async", {.global_step = 1, .async = true});
  CHECK(h.path() == dir / "async-1");
  // Updates after save() returned must not reach the checkpoint.
  for (int i = 0; i < 5; ++i) {
    a.assign_add(Tensor(1.f), {.use_locking = true});
    b.assign_add(Tensor(100.f), {.use_locking = true});
  }
  CHECK(h.wait() == dir / "async-1");
  CHECK(h.done());
  verified(h);
  CHECK(latest_checkpoint(dir.path()) == dir / "async-1");
  auto reader = open_checkpoint(dir / "async-1");
  auto av = reader->read("a").values<float>();
  CHECK(std::all_of(av.begin(), av.end(), [](float x) { return x == 0.f; }));
  CHECK(reader->read("b").values<float>() == iota(8, 0, {8}).to_vector<float>());

  // A second save waits for the first; both end up in the state file.
  SaveHandle h2 = saver.save(session, dir / "async", {.global_step = 2, .async = true});
  SaveHandle h3 = saver.save(session, dir / "async", {.global_step = 3, .async = true});
  h3.wait();
  CHECK(h2.done());
  verified(h2);
  verified(h3);
  CHECK(saver.last_checkpoints() ==
        std::vector<std::string>{dir / "async-1", dir / "async-2", dir / "async-3"});
  Saver restorer;
  restorer.restore(session, dir / "async-3");
  CHECK(b.value().to_vector<float>()[0] == 500.f);
}

}  // namespace varstate
