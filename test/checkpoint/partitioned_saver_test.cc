// Saver with get_variable's PartitionedVariables: the parts are saved as
// slices of one full tensor (as TensorFlow does) and restore into another
// partitioning or into an unpartitioned variable.
#include <catch2/catch.hpp>

#include "checkpoint/checkpoint_test_util.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/saver.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

namespace varstate {
namespace {

using testing::TempDir;

std::vector<float> iota(int64_t n, float scale) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<float>(i) * scale;
  return out;
}

TEST_CASE("PartitionedVariable saves as one sliced tensor and restores into other partitionings",
          "[saver][partitioned]") {
  TempDir dir;
  reset_default_graph();
  Session sess;
  const std::vector<float> values = iota(10 * 3, 1.5f);
  std::string path;
  {
    auto scope = variable_scope("model");
    PartitionedVariable emb =
        get_variable("emb", {.initializer = Tensor::from_vector<float>(values, {10, 3}),
                             .partitioner = fixed_size_partitioner(3)});
    sess.run(global_variables_initializer());
    Saver saver;
    path = *saver.save(sess, dir / "ckpt").path();
  }
  auto reader = open_checkpoint(path);
  TensorInfo info = reader->info("model/emb");
  CHECK(info.shape == std::vector<int64_t>{10, 3});
  CHECK(info.slices.size() == 3);
  CHECK(!reader->contains("model/emb/part_0"));
  TensorData full = reader->read("model/emb");
  CHECK(std::vector<float>(reinterpret_cast<const float*>(full.bytes.data()),
                           reinterpret_cast<const float*>(full.bytes.data()) + 30) == values);

  SECTION("into two parts") {
    reset_default_graph();
    auto scope = variable_scope("model");
    PartitionedVariable emb = get_variable("emb", {.shape = TensorShape{10, 3},
                                                   .initializer = zeros_initializer(),
                                                   .partitioner = fixed_size_partitioner(2)});
    Saver saver;
    saver.restore(sess, path);
    CHECK(emb[0].shape() == TensorShape{5, 3});
    CHECK(emb.eval(sess).to_vector<float>() == values);
  }
  SECTION("into an unpartitioned variable") {
    reset_default_graph();
    auto scope = variable_scope("model");
    Variable emb = get_variable("emb", {.shape = TensorShape{10, 3}});
    Saver saver;
    saver.restore(sess, path);
    CHECK(emb.eval(sess).to_vector<float>() == values);
  }
  SECTION("into columns") {
    reset_default_graph();
    auto scope = variable_scope("model");
    PartitionedVariable emb = get_variable(
        "emb", {.shape = TensorShape{10, 3}, .partitioner = fixed_size_partitioner(2, 1)});
    Saver saver;
    saver.restore(sess, path);
    CHECK(emb.eval(sess).to_vector<float>() == values);
  }
}

}  // namespace
}  // namespace varstate
