// Helpers shared by the training tests (test_optimizers): initialized
// float variables and their values read back on the host.
#pragma once

#include <string>
#include <vector>

#include "varstate/tensor.h"
#include "varstate/tensor_shape.h"
#include "varstate/variables.h"

namespace varstate::testing {

// A float variable `name` of `shape` holding `values`, initialized.
inline Variable make_var(const std::vector<float>& values, const TensorShape& shape,
                         const std::string& name) {
  Variable v(Tensor::from_vector<float>(values, shape), {.name = name});
  v.initializer().run();
  return v;
}

// The variable's current value, as floats on the host.
inline std::vector<float> floats(const Variable& v) { return v.value().to_vector<float>(); }

}  // namespace varstate::testing
