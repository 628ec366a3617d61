// The V1 writer: TensorFlow's own V1 file reproduced byte for byte, every
// V1 dtype and slices read back by the V1 reader, the errors (nothing
// written), and Saver(write_version=V1) saving and restoring, sharded too.
// (That TensorFlow restores these files is checked by test/interop.)
#include <catch2/catch.hpp>

#include <complex>
#include <filesystem>

#include "checkpoint/v1_reader.h"
#include "checkpoint/v1_writer.h"
#include "checkpoint_test_util.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/checkpoint_state.h"
#include "varstate/error.h"
#include "varstate/placement.h"
#include "varstate/saver.h"
#include "varstate/variables.h"

using namespace varstate;
using varstate::testing::read_file;
using varstate::testing::TempDir;

namespace {

const std::string kTfV1 = varstate::testing::testdata_dir() + "/tensorflow/half_plus_two_v1/export";

template <typename T>
TensorData data(std::vector<int64_t> shape, std::vector<T> values, DType dtype = dtype_of<T>) {
  return TensorData::from_values<T>(std::move(shape), values, dtype);
}

}  // namespace

TEST_CASE("V1Writer reproduces TensorFlow's V1 file", "[v1]") {
  TempDir dir;
  V1Writer writer(dir / "export");
  writer.add("Variable", data<float>({}, {0.5f}).view());
  writer.add("Variable_1", data<float>({}, {2.0f}).view());
  writer.finish();
  CHECK(read_file(dir / "export") == read_file(kTfV1));
}

TEST_CASE("V1Writer: every V1 dtype and slices read back", "[v1]") {
  TempDir dir;
  std::vector<TensorData> whole = {
      data<float>({2, 2}, {1.5f, -0.f, 3e38f, -7.f}),
      data<double>({3}, {1e300, -2.5, 0.0}),
      data<int32_t>({2}, {INT32_MIN, INT32_MAX}),
      data<int16_t>({2}, {INT16_MIN, 7}),
      data<int8_t>({3}, {-128, 0, 127}),
      data<uint8_t>({2}, {0, 255}),
      data<uint16_t>({2}, {0, 65535}),
      data<int64_t>({2}, {INT64_MIN, INT64_MAX}),
      data<bool>({3}, {true, false, true}),
      data<half>({2}, {half(1.5f), half(-2.f)}),
      data<std::complex<float>>({1}, {{1.f, -2.f}}),
      data<std::complex<double>>({2}, {{1.0, 2.0}, {-3.0, 4.0}}),
      data<std::string>({3}, {"", "a b", std::string("\0\xff", 2)}),
      data<int8_t>({2}, {-5, 6}, DType::kQInt8),
      data<int32_t>({1}, {-9}, DType::kQInt32),
      data<float>({}, {4.f}),
      data<float>({0, 3}, {}),
  };
  V1Writer writer(dir / "all");
  for (size_t i = 0; i < whole.size(); ++i) writer.add("t" + std::to_string(i), whole[i].view());
  // A [4, 3] tensor as two row slices.
  writer.add_slice("part", {4, 3}, TensorSlice({{0, 1}, {0, -1}}),
                   data<int64_t>({1, 3}, {1, 2, 3}).view());
  writer.add_slice("part", {4, 3}, TensorSlice({{1, 3}, {0, -1}}),
                   data<int64_t>({3, 3}, {4, 5, 6, 7, 8, 9, 10, 11, 12}).view());
  writer.finish();

  V1Reader reader(dir / "all");
  for (size_t i = 0; i < whole.size(); ++i) {
    CAPTURE(i);
    const TensorData got = reader.read("t" + std::to_string(i));
    CHECK(got.dtype == whole[i].dtype);
    CHECK(got.shape == whole[i].shape);
    CHECK(got.bytes == whole[i].bytes);
    CHECK(got.strings == whole[i].strings);
  }
  CHECK(reader.info("part").slices.size() == 2);
  CHECK(reader.read("part").values<int64_t>() ==
        std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
}

TEST_CASE("V1Writer errors name the tensor and write nothing", "[v1][errors]") {
  TempDir dir;
  V1Writer writer(dir / "bad");
  CHECK_THROWS_AS(writer.add("b", data<bfloat16>({1}, {bfloat16(1.f)}).view()), UnimplementedError);
  CHECK_THROWS_WITH(writer.add("u", data<uint32_t>({1}, {1}).view()),
                    Catch::Contains("\"u\"") && Catch::Contains("cannot hold dtype uint32"));
  CHECK_THROWS_AS(writer.add("", data<float>({1}, {1.f}).view()), InvalidArgumentError);
  writer.add("x", data<float>({1}, {1.f}).view());
  CHECK_THROWS_WITH(writer.add("x", data<float>({1}, {1.f}).view()),
                    Catch::Contains("already added"));
  writer.add_slice("p", {4}, TensorSlice({{0, 2}}), data<float>({2}, {1.f, 2.f}).view());
  CHECK_THROWS_WITH(
      writer.add_slice("p", {4}, TensorSlice({{1, 2}}), data<float>({2}, {1.f, 2.f}).view()),
      Catch::Contains("overlaps"));
  CHECK_THROWS_AS(
      writer.add_slice("p", {5}, TensorSlice({{2, 2}}), data<float>({2}, {1.f, 2.f}).view()),
      InvalidArgumentError);
  CHECK_THROWS_AS(
      writer.add_slice("p", {4}, TensorSlice({{2, 2}}), data<float>({3}, {1.f, 2.f, 3.f}).view()),
      InvalidArgumentError);
  CHECK_FALSE(std::filesystem::exists(dir / "bad"));
  writer.finish();
  CHECK_THROWS_AS(writer.finish(), FailedPreconditionError);
  CHECK(V1Reader(dir / "bad").read("x").values<float>() == std::vector<float>{1.f});
}

TEST_CASE("Saver(write_version=V1) saves and restores, sharded too", "[v1][saver]") {
  Graph g;
  auto guard = g.as_default();
  DeviceScope host("/device:CPU:0");  // the shard counts below are the CPU's
  TempDir dir;
  Variable a(Tensor({{1.f, 2.f}, {3.f, 4.f}}), {.name = "a"});
  Variable words(Tensor::from_vector<std::string>({"x", ""}, TensorShape{2}), {.name = "words"});
  Variable p0(Tensor({int64_t{1}, int64_t{2}}),
              {.name = "emb/part_0", .save_slice_info = SaveSliceInfo{"emb", {3}, {0}, {2}}});
  Variable p1(Tensor({int64_t{3}}),
              {.name = "emb/part_1", .save_slice_info = SaveSliceInfo{"emb", {3}, {2}, {1}}});
  std::optional<Variable> remote;
  {
    DeviceScope scope("/job:ps/task:1");
    remote.emplace(Tensor(7.5), VariableOptions{.name = "remote"});
  }
  Session sess;
  sess.run(global_variables_initializer());

  Saver saver({.write_version = CheckpointFormatVersion::kV1});
  CHECK(saver.as_saver_def().version == CheckpointFormatVersion::kV1);
  const std::string path = *saver.save(sess, dir / "model", {.global_step = 3}).path();
  CHECK(path == dir / "model-3");
  CHECK(std::filesystem::is_regular_file(path));
  CHECK_FALSE(std::filesystem::exists(path + ".index"));
  CHECK(dynamic_cast<V1Reader*>(open_checkpoint(path).get()) != nullptr);
  CHECK(*latest_checkpoint(dir.path()) == path);

  Saver sharded({.sharded = true, .write_version = CheckpointFormatVersion::kV1});
  const std::string pattern = *sharded.save(sess, dir / "sharded").path();
  CHECK(pattern == dir / "sharded-?????-of-00002");
  CHECK(std::filesystem::exists(dir / "sharded-00000-of-00002"));
  CHECK(std::filesystem::exists(dir / "sharded-00001-of-00002"));
  CHECK(std::filesystem::exists(dir / "sharded.meta"));

  for (const std::string& ckpt : {path, pattern}) {
    CAPTURE(ckpt);
    a.assign(Tensor({{0.f, 0.f}, {0.f, 0.f}}));
    words.assign(Tensor::from_vector<std::string>({"", ""}, TensorShape{2}));
    p1.assign(Tensor({int64_t{0}}));
    remote->assign(Tensor(0.0));
    saver.restore(sess, ckpt);
    CHECK(a.value().to_vector<float>() == std::vector<float>{1.f, 2.f, 3.f, 4.f});
    CHECK(words.value().to_vector<std::string>() == std::vector<std::string>{"x", ""});
    CHECK(p1.value().to_vector<int64_t>() == std::vector<int64_t>{3});
    CHECK(remote->value().scalar<double>() == 7.5);
  }
  CHECK(open_checkpoint(pattern)->read("emb").values<int64_t>() == std::vector<int64_t>{1, 2, 3});

  // max_to_keep deletes old V1 checkpoints (file and meta graph).
  Saver keep1({.max_to_keep = 1, .write_version = CheckpointFormatVersion::kV1});
  keep1.save(sess, dir / "k", {.global_step = 1});
  keep1.save(sess, dir / "k", {.global_step = 2});
  CHECK_FALSE(std::filesystem::exists(dir / "k-1"));
  CHECK_FALSE(std::filesystem::exists(dir / "k-1.meta"));
  CHECK(std::filesystem::exists(dir / "k-2"));
  Saver keep1_sharded(
      {.sharded = true, .max_to_keep = 1, .write_version = CheckpointFormatVersion::kV1});
  CHECK(*keep1_sharded.save(sess, dir / "ks", {.global_step = 1}).path() ==
        dir / "ks-1-?????-of-00002");
  CHECK(std::filesystem::exists(dir / "ks-1.meta"));
  keep1_sharded.save(sess, dir / "ks", {.global_step = 2});
  CHECK_FALSE(std::filesystem::exists(dir / "ks-1-00000-of-00002"));
  CHECK_FALSE(std::filesystem::exists(dir / "ks-1-00001-of-00002"));
  CHECK_FALSE(std::filesystem::exists(dir / "ks-1.meta"));
  CHECK(std::filesystem::exists(dir / "ks-2-00001-of-00002"));

  // A dtype V1 cannot hold: nothing is written.
  Variable bf(Tensor(1.f).cast(DType::kBFloat16), {.name = "bf"});
  sess.run(bf.initializer());
  Saver with_bf({.write_version = CheckpointFormatVersion::kV1});
  CHECK_THROWS_WITH(with_bf.save(sess, dir / "nope"),
                    Catch::Contains("\"bf\"") && Catch::Contains("bfloat16"));
  CHECK_FALSE(std::filesystem::exists(dir / "nope"));
  CHECK_THROWS_AS(Saver({.write_version = CheckpointFormatVersion::kLegacy}), InvalidArgumentError);
}
