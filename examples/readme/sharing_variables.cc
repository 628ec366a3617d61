// docs/tour.md "Sharing variables and sparse updates" (the README shows its
// embedding-table lines): the snippet runs verbatim between the markers
// (tools/check_readme_examples.py) after the setup it assumes (a session, a
// global step, ids and gradients); the rest checks what it claims.
#include <varstate/varstate.h>

#include <cstdint>
#include <vector>

using namespace varstate;

int main() {
  Session sess;
  Variable step(Tensor(int64_t{0}), {.trainable = false, .name = "global_step"});
  const std::vector<int64_t> rows{3, 70'000, 99'999};  // one in part_0, two in part_3
  Tensor ids = Tensor::from_vector(rows);
  std::vector<float> g(rows.size() * 64);
  for (size_t i = 0; i < g.size(); ++i) g[i] = 0.25f * static_cast<float>(i % 9) - 1.f;
  Tensor grads = Tensor::from_vector(g, TensorShape({static_cast<int64_t>(rows.size()), 64}));

  // Snippet begins.
auto conv = [](const std::vector<int64_t>& shape) {     // the guide's conv_relu
  return get_variable("weights", {.shape = TensorShape(shape),       // or {.shape = {5, 5, 32, 32}}
                                  .initializer = random_normal_initializer()});
};
{
  auto model = variable_scope("model");                  // "model/weights:0"
  Variable w1 = conv({5, 5, 32, 32});
  model->reuse_variables();                              // or variable_scope("model", {.reuse = true})
  Variable w2 = conv({5, 5, 32, 32});                    // w2.same_as(w1)
}
PartitionedVariable emb = get_variable("emb", {.shape = {100'000, 64},
                                               .partitioner = fixed_size_partitioner(4)});
sess.run(global_variables_initializer());
emb.scatter_add(ids, grads);                             // rows routed to emb/part_0..3
Tensor looked_up = gather(emb, ids);                     // an embedding lookup, and its gradient:
GradientDescentOptimizer(0.1).apply_gradients(gather_gradients(emb, ids, grads));  // per part
auto scale = make_template("scale", [](const Tensor& x) {
  return x * Variable(get_variable("y", {.shape = {}})).initialized_value();   // {} = scalar
});
DeviceScope ps(replica_device_setter({.cluster = ClusterSpec({{"ps", {"ps0:2222", "ps1:2222"}},
                                                              {"worker", {"worker0:2222"}}})}));
Op train_op = Op::group({assign_add_op(step, 1), scatter_add_op(emb, ids, grads)}, "train");
for (int i = 0; i < 100; ++i) sess.run(train_op);        // built once, runs each time
  // Snippet ends.

  int failures = 0;
  auto check = [&](bool ok) { failures += ok ? 0 : 1; };
  // reuse: one variable under "model", shared by w1 and w2.
  std::vector<Variable> model = get_collection_variables(GraphKeys::GLOBAL_VARIABLES, "model");
  check(model.size() == 1 && model[0].name() == "model/weights:0" &&
        model[0].shape() == TensorShape({5, 5, 32, 32}));
  check(emb.size() == 4 && emb[0].name() == "emb/part_0:0" && emb[3].name() == "emb/part_3:0" &&
        emb[0].shape() == TensorShape({25'000, 64}));
  check(looked_up.shape() == TensorShape({3, 64}));
  check(step.eval(sess).scalar<int64_t>() == 100);
  // One more step: the ids' rows grow by grads, every other row stays.
  std::vector<float> before = emb.as_tensor().to_vector<float>();
  sess.run(train_op);
  std::vector<float> expected = before;
  for (size_t k = 0; k < rows.size(); ++k) {
    for (size_t j = 0; j < 64; ++j) expected[rows[k] * 64 + j] += g[k * 64 + j];
  }
  check(emb.as_tensor().to_vector<float>() == expected);
  check(step.eval(sess).scalar<int64_t>() == 101);
  // The template creates "scale/y" once and reuses it.
  float a = scale(Tensor(2.f)).scalar<float>();
  float b = scale(Tensor(3.f)).scalar<float>();
  std::vector<Variable> ys = get_collection_variables(GraphKeys::GLOBAL_VARIABLES, "scale");
  check(ys.size() == 1 && ys[0].name() == "scale/y:0");
  if (!ys.empty()) {
    float y = ys[0].initialized_value().scalar<float>();
    check(a == 2.f * y && b == 3.f * y);
  }
  return failures == 0 ? 0 : 1;
}
