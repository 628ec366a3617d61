// docs/dynamic-variables.md: the snippet runs verbatim between the markers
// (tools/check_readme_examples.py); the rest checks what it claims. Writes
// ckpt_dyn/ in the working directory.
#include <varstate/varstate.h>

#include <cstdint>
#include <filesystem>
#include <vector>

using namespace varstate;

int main() {
  std::filesystem::remove_all("ckpt_dyn");
  std::filesystem::create_directory("ckpt_dyn");
  // Snippet "Dynamic variables" begins.
DynamicVariable users = [] {
  auto scope = variable_scope("recommender");
  return get_dynamic_variable(
      "users", {.dim = 16,
                .initializer = random_normal_initializer({.stddev = 0.25, .seed = 1}),
                .initial_capacity = 1 << 20});
}();
AdagradOptimizer opt(0.5);
Session sess;
sess.run(global_variables_initializer());

Tensor keys = Tensor::from_vector<int64_t>({-8401937514416383012, 42, 42});
Tensor rows = users.gather(keys);                 // [3, 16]; two new keys get rows
Tensor grads = rows * Tensor(0.1f);
opt.apply_gradients({users.gradient(keys, grads)});
Tensor seen = users.lookup(keys);                 // evaluation: inserts nothing
Saver().save(sess, "ckpt_dyn/model");             // recommender/users-keys, -values
  // Snippet "Dynamic variables" ends.

  int failures = 0;
  auto check = [&](bool ok) { failures += ok ? 0 : 1; };
  check(rows.shape() == TensorShape({3, 16}));
  check(users.size() == 2);
  // Key 42 appears twice: both rows are the same row.
  const std::vector<float> r = rows.to_vector<float>();
  check(std::vector<float>(r.begin() + 16, r.begin() + 32) ==
        std::vector<float>(r.begin() + 32, r.end()));
  // The step moved the rows (and made the accumulator slot of both keys).
  check(seen.to_vector<float>() != r);
  check(opt.get_slot(users.variable(), "accumulator")->shape() == TensorShape({2, 16}));
  auto reader = open_checkpoint("ckpt_dyn/model");
  check(reader->info("recommender/users-keys").shape == std::vector<int64_t>{2});
  check(reader->info("recommender/users-values").shape == std::vector<int64_t>{2, 16});
  check(reader->contains("recommender/users/Adagrad-values"));
  return failures == 0 ? 0 : 1;
}
