#include <catch2/catch.hpp>

#include <filesystem>

#include "checkpoint/fault_injection_file_system.h"
#include "checkpoint/file_system.h"
#include "checkpoint/tensor_bundle.h"
#include "checkpoint_test_util.h"
#include "varstate/checkpoint_state.h"
#include "varstate/error.h"

using namespace varstate;
using varstate::testing::read_file;
using varstate::testing::TempDir;
using varstate::testing::write_file;

namespace {

void save_empty_bundle(const std::string& prefix) {
  BundleWriter w(prefix);
  w.add("x", TensorData::from_values<float>({}, {1}).view());
  w.finish();
}

}  // namespace

TEST_CASE("parses TensorFlow's state file", "[checkpoint_state][tf]") {
  const std::string dir = varstate::testing::testdata_dir() + "/tensorflow/half_plus_two_v1";
  auto state = get_checkpoint_state(dir);
  REQUIRE(state);
  CHECK(state->model_checkpoint_path == "/tmp/bad_half_plus_two/00000123/export");
  CHECK(state->all_model_checkpoint_paths ==
        std::vector<std::string>{"/tmp/bad_half_plus_two/00000123/export"});
  // The absolute path it names does not exist here.
  CHECK_FALSE(latest_checkpoint(dir));
}

TEST_CASE("text format round trip", "[checkpoint_state]") {
  CheckpointState s;
  s.model_checkpoint_path = "model-2";
  s.all_model_checkpoint_paths = {"model-1", "model-2"};
  const std::string text = checkpoint_state_to_text(s);
  CHECK(text ==
        "model_checkpoint_path: \"model-2\"\n"
        "all_model_checkpoint_paths: \"model-1\"\n"
        "all_model_checkpoint_paths: \"model-2\"\n");
  s.all_model_checkpoint_timestamps = {1700000000.5, 1700000100.25};
  s.last_preserved_timestamp = 1600000000;
  CheckpointState back = parse_checkpoint_state(checkpoint_state_to_text(s));
  CHECK(back.all_model_checkpoint_timestamps == s.all_model_checkpoint_timestamps);
  CHECK(back.last_preserved_timestamp == s.last_preserved_timestamp);
  CHECK_THROWS_AS(parse_checkpoint_state("model_checkpoint_path: 3 4"), InvalidArgumentError);
  CHECK_THROWS_AS(parse_checkpoint_state("unknown_field: \"x\""), InvalidArgumentError);
}

TEST_CASE("update, get and latest_checkpoint", "[checkpoint_state]") {
  TempDir dir;
  CHECK_FALSE(get_checkpoint_state(dir.path()));
  CHECK_FALSE(latest_checkpoint(dir.path()));

  save_empty_bundle(dir / "model-1");
  update_checkpoint_state(dir.path(), dir / "model-1");
  auto state = get_checkpoint_state(dir.path());
  REQUIRE(state);
  CHECK(state->model_checkpoint_path == dir / "model-1");
  CHECK(state->all_model_checkpoint_paths == std::vector<std::string>{dir / "model-1"});
  CHECK(latest_checkpoint(dir.path()) == dir / "model-1");

  // A checkpoint whose files are missing is not "latest".
  update_checkpoint_state(dir.path(), dir / "model-2", {dir / "model-1"});
  CHECK(get_checkpoint_state(dir.path())->all_model_checkpoint_paths ==
        std::vector<std::string>{dir / "model-1", dir / "model-2"});
  CHECK_FALSE(latest_checkpoint(dir.path()));
  save_empty_bundle(dir / "model-2");
  CHECK(latest_checkpoint(dir.path()) == dir / "model-2");

  // save_relative_paths stores paths relative to the directory.
  update_checkpoint_state(
      dir.path(), dir / "model-2", {dir / "model-1", dir / "model-2"}, "rel",
      {.all_model_checkpoint_timestamps = {1.0, 2.0}, .save_relative_paths = true});
  CHECK(read_file(dir / "rel").find("model_checkpoint_path: \"model-2\"") != std::string::npos);
  CHECK(get_checkpoint_state(dir.path(), "rel")->model_checkpoint_path == dir / "model-2");
  CHECK(latest_checkpoint(dir.path(), "rel") == dir / "model-2");

  CHECK_THROWS_AS(update_checkpoint_state(dir.path(), dir / "model-3", {}, "",
                                          {.all_model_checkpoint_timestamps = {1.0, 2.0}}),
                  ValueError);
  CHECK_THROWS_WITH(update_checkpoint_state(dir.path(), dir / "checkpoint"),
                    Catch::Contains("conflicts with path used for checkpoint state"));
  CHECK_THROWS_AS(get_checkpoint_state(dir.path(), "a/b"), ValueError);

  write_file(dir / "empty_state", "all_model_checkpoint_paths: \"x\"\n");
  CHECK_THROWS_WITH(get_checkpoint_state(dir.path(), "empty_state"),
                    Catch::Contains("Invalid checkpoint state loaded from"));
  write_file(dir / "garbage", "this is { not a state");
  CHECK_FALSE(get_checkpoint_state(dir.path(), "garbage"));
}

TEST_CASE("relative save_dir stores relative paths; V1 files count", "[checkpoint_state]") {
  TempDir dir;
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  try {
    std::filesystem::create_directory("train");
    write_file("train/model.ckpt-5", "v1 placeholder");
    update_checkpoint_state("train", "train/model.ckpt-5");
    CHECK(
        read_file("train/checkpoint") ==
        "model_checkpoint_path: \"model.ckpt-5\"\nall_model_checkpoint_paths: \"model.ckpt-5\"\n");
    CHECK(get_checkpoint_state("train")->model_checkpoint_path == "train/model.ckpt-5");
    CHECK(latest_checkpoint("train") == "train/model.ckpt-5");
  } catch (...) {
    std::filesystem::current_path(cwd);
    throw;
  }
  std::filesystem::current_path(cwd);
}

TEST_CASE("a failed state update keeps the old state", "[checkpoint_state][fault]") {
  TempDir dir;
  FaultInjectionFileSystem fs(default_file_system());
  update_checkpoint_state(dir.path(), dir / "model-1", {}, "", {.file_system = &fs});
  for (FileOp op : {FileOp::kAppend, FileOp::kSync, FileOp::kRename}) {
    fs.fail_nth(op, 1);
    CHECK_THROWS_AS(
        update_checkpoint_state(dir.path(), dir / "model-2", {}, "", {.file_system = &fs}),
        UnavailableError);
    fs.drop_unsynced_data();
    CHECK(get_checkpoint_state(dir.path(), "", &fs)->model_checkpoint_path == dir / "model-1");
  }
}

TEST_CASE("remove_checkpoint deletes one checkpoint's files and nothing else",
          "[checkpoint_state]") {
  TempDir dir;
  save_empty_bundle(dir / "model-1");
  save_empty_bundle(dir / "model-10");
  write_file(dir / "model-1.meta", "graph");
  REQUIRE(checkpoint_exists(dir / "model-1"));
  remove_checkpoint(dir / "model-1");
  CHECK_FALSE(checkpoint_exists(dir / "model-1"));
  CHECK_FALSE(std::filesystem::exists(dir / "model-1.meta"));
  CHECK(match_files(*default_file_system(), dir / "model-1.*").empty());
  CHECK(checkpoint_exists(dir / "model-10"));  // "model-1" is no prefix of its files
}
