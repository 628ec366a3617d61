// docs/tour.md "Variables" and "Checkpoints" (the README shows the start of
// the second): the two snippets run in this order in one program, verbatim
// between the markers (tools/check_readme_examples.py); the rest checks what
// they claim. Writes ckpt/ in the working directory
// (created here, as a TensorFlow program creates its checkpoint directory).
#include <varstate/varstate.h>

#include <filesystem>
#include <vector>

using namespace varstate;

int main() {
  std::filesystem::remove_all("ckpt");
  std::filesystem::create_directory("ckpt");  // the Saver, as TensorFlow's, needs it
  // Snippet "Variables" begins.
Variable w(Tensor({{1.f, 2.f}, {3.f, 4.f}}), {.name = "w"});          // "w:0", uninitialized
Variable step(Tensor(int64_t{0}), {.trainable = false, .name = "global_step"});
Variable v2(w.initialized_value(), {.caching_device = "/cpu:0"});      // depends on w's initial value
Session sess;
sess.run(global_variables_initializer());
w.assign_add(1.f);                 // returns the new value; {.use_locking = true} serializes updaters
step.count_up_to(1000);            // returns the old value; OutOfRangeError at the limit
Tensor host = w.eval(sess);        // copy on the host
auto names = report_uninitialized_variables();   // 1-D string tensor
  // Snippet "Variables" ends; snippet "Checkpoints" begins.
Saver saver({.sharded = true, .max_to_keep = 3});       // one data shard per device
std::string path = *saver.save(sess, "ckpt/model", {.global_step = 1000}).path();  // "ckpt/model-1000"
saver.restore(sess, *latest_checkpoint("ckpt"));
SaveHandle handle = saver.save(sess, "ckpt/model", {.global_step = 2000, .async = true});
handle.wait();                                          // returned after a snapshot; written in background
  // Snippet "Checkpoints" ends.

  const std::vector<float> w_after{2.f, 3.f, 4.f, 5.f};
  int failures = 0;
  auto check = [&](bool ok) { failures += ok ? 0 : 1; };
  check(w.name() == "w:0" && step.name() == "global_step:0");
  check(host.to_vector<float>() == w_after);
  check(step.eval(sess).scalar<int64_t>() == 1);
  check(v2.eval(sess).to_vector<float>() == std::vector<float>{1.f, 2.f, 3.f, 4.f});
  check(names.shape() == TensorShape({0}));
  check(path == "ckpt/model-1000" && latest_checkpoint("ckpt") == "ckpt/model-2000");
  // The checkpoint holds the values at save time: overwrite, then restore.
  w.assign(Tensor({{0.f, 0.f}, {0.f, 0.f}}));
  step.assign(Tensor(int64_t{7}));
  saver.restore(sess, path);
  check(w.eval(sess).to_vector<float>() == w_after);
  check(step.eval(sess).scalar<int64_t>() == 1);
  return failures == 0 ? 0 : 1;
}
