// The initializers the CPU and GPU initializer tests sweep, each with its
// arguments fixed (seeded) and made for a given dtype.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "varstate/initializers.h"

namespace varstate::testing {

struct NamedInitializer {
  std::string name;
  std::function<Initializer(DType)> make;
  bool integers = false;  // also int32 / int64
};

// Every random initializer, seeded.
inline std::vector<NamedInitializer> random_initializers() {
  return {
      {"random_normal",
       [](DType d) {
         return random_normal_initializer({.mean = 1, .stddev = 2, .seed = 3, .dtype = d});
       }},
      {"truncated_normal",
       [](DType d) { return truncated_normal_initializer({.seed = 3, .dtype = d}); }},
      {"random_uniform",
       [](DType d) {
         return random_uniform_initializer({.minval = -4, .maxval = 9, .seed = 3, .dtype = d});
       },
       true},
      {"uniform_unit_scaling",
       [](DType d) {
         return uniform_unit_scaling_initializer({.factor = 1.43, .seed = 3, .dtype = d});
       }},
      {"glorot_uniform",
       [](DType d) { return glorot_uniform_initializer({.seed = 3, .dtype = d}); }},
      {"glorot_normal", [](DType d) { return glorot_normal_initializer({.seed = 3, .dtype = d}); }},
      {"variance_scaling fan_out untruncated",
       [](DType d) {
         return variance_scaling_initializer({.scale = 2,
                                              .mode = "fan_out",
                                              .distribution = "untruncated_normal",
                                              .seed = 3,
                                              .dtype = d});
       }},
  };
}

// The random ones, then constant, zeros and ones.
inline std::vector<NamedInitializer> all_initializers() {
  std::vector<NamedInitializer> all = random_initializers();
  all.push_back({"constant", [](DType d) { return constant_initializer({1, 2, 3}, d); }, true});
  all.push_back({"zeros", [](DType d) { return zeros_initializer(d); }, true});
  all.push_back({"ones", [](DType d) { return ones_initializer(d); }, true});
  return all;
}

}  // namespace varstate::testing
