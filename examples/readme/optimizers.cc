// docs/optimizers.md: an optimizer applying dense and sparse gradients,
// its slots, and a checkpoint that carries them. The block between the
// markers is the page's snippet, verbatim (tools/check_readme_examples.py);
// the rest checks what it claims.
#include <varstate/varstate.h>

#include <filesystem>
#include <vector>

int main() {
  std::filesystem::create_directories("/tmp/varstate_optimizer_example");
  // docs snippet begins (its #include is already done above).
#include <varstate/varstate.h>
using namespace varstate;

Variable w(Tensor::zeros(DType::kFloat, {4, 3}), {.name = "w"});
Variable emb(Tensor::zeros(DType::kFloat, {1000, 3}), {.name = "emb"});
Variable step(Tensor::from_vector<int64_t>({0}, {}), {.trainable = false, .name = "global_step"});
Session sess;
sess.run(global_variables_initializer());

AdamOptimizer opt({.learning_rate = 0.01});
Tensor grad_w = Tensor::filled(DType::kFloat, {4, 3}, 0.5f, w.device());  // the caller's gradients
IndexedSlices grad_emb(Tensor({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}), Tensor({7, 7}));  // id 7 twice: summed
opt.apply_gradients({{grad_w, w}, {grad_emb, emb}}, &step);

Variable m = *opt.get_slot(emb, "m");  // "emb/Adam", on emb's device, in GLOBAL_VARIABLES
Saver saver;                           // w, emb, global_step, the slots and beta1/2_power
saver.save(sess, "/tmp/varstate_optimizer_example/model", {.global_step = 1});
  // docs snippet ends.

  const std::vector<float> row7 = m.value().to_vector<float>();
  bool ok = m.op_name() == "emb/Adam" && step.value().to_vector<int64_t>()[0] == 1 &&
            row7[21] > 0.49f && row7[21] < 0.51f &&  // (1 + 4) * (1 - 0.9)
            w.value().to_vector<float>()[0] < 0 &&
            std::filesystem::exists("/tmp/varstate_optimizer_example/model-1.index");
  std::filesystem::remove_all("/tmp/varstate_optimizer_example");
  return ok ? 0 : 1;
}
