// docs/tour.md "Tensors and devices" (the README's first snippet is part of
// it): tensors placed by a device scope, updated in place. The block between
// the markers is the page's snippet, verbatim (tools/check_readme_examples.py);
// the rest checks what it claims.
#include <varstate/varstate.h>

#include <iostream>
#include <vector>

int main() {
  // Snippet begins (its #include is already done above).
#include <varstate/varstate.h>
using namespace varstate;

DeviceScope scope("/device:GPU:0");            // like `with tf.device(...)`
Device& dev = place({"w", "VariableV2"});       // GPU:0, or CPU:0 without a GPU
Tensor w = Tensor({{1.f, 2.f}, {3.f, 4.f}}).to(dev);
assign_add(w, 1);                                // literal converts to float32
assign_sub(w, Tensor({{1.f, 1.f}, {1.f, 1.f}}));  // value copied to w's device
std::cout << w << "\n";                          // [[1. 2.]\n [3. 4.]]
  // Snippet ends.

  bool ok = w.dtype() == DType::kFloat && &w.device() == &dev &&
            w.to_vector<float>() == std::vector<float>{1.f, 2.f, 3.f, 4.f};
  return ok ? 0 : 1;
}
