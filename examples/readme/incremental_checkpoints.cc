// docs/incremental-checkpoints.md: the snippet runs verbatim between the
// markers (tools/check_readme_examples.py); the rest checks what it claims.
// Writes ckpt_incr/ and export_incr/ in the working directory.
#include <varstate/varstate.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

using namespace varstate;

int main() {
  std::filesystem::remove_all("ckpt_incr");
  std::filesystem::remove_all("export_incr");
  std::filesystem::create_directory("ckpt_incr");
  Variable emb = get_variable("emb", {.shape = TensorShape{100000, 64},
                                      .initializer = zeros_initializer()});
  Session sess;
  sess.run(global_variables_initializer());
  const Tensor rows = Tensor::filled(DType::kFloat, {2, 64}, Tensor(1.f),
                                     DeviceManager::instance().cpu());
  // Snippet "Incremental checkpoints" begins.
Saver saver({.max_to_keep = 5, .max_deltas_per_base = 10});
saver.save(sess, "ckpt_incr/model", {.global_step = 0, .incremental = true});  // a base: every row
scatter_update(emb, Tensor::from_vector<int64_t>({3, 7}), rows);               // marks rows 3 and 7
std::string delta =
    *saver.save(sess, "ckpt_incr/model", {.global_step = 1, .incremental = true}).path();
for (const ChainLink& link : checkpoint_chain(delta))  // ckpt_incr/model-0, then the delta
  std::printf("%s%s\n", link.is_delta ? "delta " : "base  ", link.path.c_str());
saver.restore(sess, delta);                                    // base + delta, bit for bit
compact_checkpoint(delta, "export_incr/model");                // one full checkpoint for TensorFlow
  // Snippet "Incremental checkpoints" ends.

  int failures = 0;
  auto check = [&](bool ok) { failures += ok ? 0 : 1; };
  const std::vector<ChainLink> chain = checkpoint_chain(delta);
  check(chain.size() == 2 && chain[1].entries.size() == 1 && chain[1].entries[0].rows == 2);
  // The delta holds two rows and their ids: a few hundred bytes, not 25 MiB.
  check(chain[1].entries[0].bytes == 2 * (64 * 4 + 8));
  auto compacted = open_checkpoint("export_incr/model");
  const std::vector<float> values = compacted->read("emb").values<float>();
  check(values[3 * 64] == 1.f && values[7 * 64 + 63] == 1.f && values[4 * 64] == 0.f);
  return failures == 0 ? 0 : 1;
}
