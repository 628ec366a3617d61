// docs/optimizers.md: learning rate decay and moving averages. The blocks
// between the markers are the page's snippets, verbatim
// (tools/check_readme_examples.py); the rest checks what they claim.
#include <varstate/varstate.h>

#include <cmath>
#include <filesystem>
#include <vector>

using namespace varstate;

int main() {
  bool ok = true;
  {
    // docs snippet begins.
Variable step = get_or_create_global_step();
MomentumOptimizer opt(piecewise_constant(step, {10000, 20000}, {0.1, 0.01, 0.001}), 0.9);
AdamOptimizer adam({.learning_rate = cosine_decay(0.001, step, 100000)});
    // docs snippet ends.
    global_variables_initializer().run();
    step.assign(Tensor::from_vector<int64_t>({15000}, {}));
    Variable v(Tensor::from_vector<float>({1.f}, {1}), {.name = "v"});
    v.initializer().run();
    opt.apply_gradients({{Tensor::from_vector<float>({1.f}, {1}), v}});
    ok = ok && v.value().to_vector<float>()[0] == 1.f - 0.01f;  // lr 0.01 past step 10000
    (void)adam;
  }
  reset_default_graph();
  std::filesystem::create_directories("/tmp/varstate_ema_example");
  {
    // docs snippet begins.
Variable w(Tensor::zeros(DType::kFloat, {4, 3}), {.name = "w"});
Variable step = get_or_create_global_step();
GradientDescentOptimizer opt(exponential_decay(0.1, step, 1000, 0.96));
ExponentialMovingAverage ema(0.999, {.num_updates = step});
Op maintain_averages = ema.apply({w});     // creates w/ExponentialMovingAverage
Session sess;
sess.run(global_variables_initializer());  // the average starts at w's value
for (int i = 0; i < 100; ++i) {
  Tensor grad_w = Tensor::filled(DType::kFloat, {4, 3}, 0.5f, w.device());  // the caller's
  opt.apply_gradients({{grad_w, w}}, &step);
  sess.run(maintain_averages);             // avg -= (1 - decay) * (avg - w)
}
Saver().save(sess, "/tmp/varstate_ema_example/model");
// Evaluation: w restored from its average's name.
Saver({.var_list = ema.variables_to_restore()}).restore(sess, "/tmp/varstate_ema_example/model");
    // docs snippet ends.
    // w was trained down to about -5 (100 steps of 0.05); its average lags
    // behind it, and the restore loaded the average into w.
    const float restored = w.value().to_vector<float>()[0];
    const float average = ema.average(w)->value().to_vector<float>()[0];
    ok = ok && ema.average(w)->op_name() == "w/ExponentialMovingAverage" &&
         restored == average && restored < 0.f && restored > -4.9f;
  }
  std::filesystem::remove_all("/tmp/varstate_ema_example");
  return ok ? 0 : 1;
}
