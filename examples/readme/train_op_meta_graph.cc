// docs/train-op-meta-graph.md: the snippet runs verbatim
// between the markers (tools/check_readme_examples.py) after the setup it
// assumes (a session, a partitioned embedding, a global step, one batch and
// a folder); the rest checks what it claims.
#include <varstate/varstate.h>

#include <any>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

using namespace varstate;

int main() {
  std::random_device rd;
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / ("varstate_readme_" + std::to_string(rd()));
  std::filesystem::create_directories(folder);
  const std::string dir = folder.string();
  Session sess;
  PartitionedVariable emb = get_variable("emb", {.shape = {1'000, 64},
                                                 .initializer = zeros_initializer(),
                                                 .partitioner = fixed_size_partitioner(4)});
  Variable step(Tensor(int64_t{0}), {.trainable = false, .name = "global_step"});
  const std::vector<int64_t> rows{3, 700, 3};
  Tensor batch_ids = Tensor::from_vector(rows);
  std::vector<float> g(rows.size() * 64);
  for (size_t i = 0; i < g.size(); ++i) g[i] = 0.5f * static_cast<float>(i % 7);
  Tensor batch_grads = Tensor::from_vector(g, TensorShape({static_cast<int64_t>(rows.size()), 64}));

  // Snippet begins.
Placeholder ids = placeholder(DType::kInt64, TensorShape{-1}, "ids");
Placeholder grads = placeholder(DType::kFloat, TensorShape{-1, 64}, "grads");
Op train_op = Op::group({scatter_sub_op(emb, ids, grads), count_up_to_op(step, 1'000'000)},
                        "train");
get_default_graph().add_to_collection("train_op", train_op);
sess.run(global_variables_initializer());
sess.run(train_op, {{ids, batch_ids}, {grads, batch_grads}});
Saver saver;
saver.save(sess, dir + "/model");                        // writes model.meta too

// Later, in a fresh program (or in TensorFlow: tf.compat.v1.train.import_meta_graph)
reset_default_graph();
std::optional<Saver> restored = import_meta_graph(dir + "/model.meta");
restored->restore(sess, dir + "/model");
Op step_op = std::any_cast<Op>(get_default_graph().get_collection("train_op")[0]);
sess.run(step_op, {{"ids", batch_ids}, {"grads", batch_grads}});
  // Snippet ends.

  int failures = 0;
  auto check = [&](bool ok) { failures += ok ? 0 : 1; };
  check(step_op.name() == "train");
  check(get_default_graph().find_variable("global_step")->eval(sess).scalar<int64_t>() == 2);
  // Two runs, one before the save and one after the import: each row of the
  // batch lost its gradient twice (row 3 is in the batch twice).
  std::vector<float> want(1'000 * 64, 0.f);
  for (size_t k = 0; k < rows.size(); ++k) {
    for (size_t j = 0; j < 64; ++j) want[rows[k] * 64 + j] -= 2 * g[k * 64 + j];
  }
  std::vector<float> got;
  for (int part = 0; part < 4; ++part) {
    const std::string name = "emb/part_" + std::to_string(part);
    std::vector<float> v = get_default_graph().find_variable(name)->eval(sess).to_vector<float>();
    got.insert(got.end(), v.begin(), v.end());
  }
  check(got == want);
  std::filesystem::remove_all(folder);
  return failures == 0 ? 0 : 1;
}
