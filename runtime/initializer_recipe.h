// Initializer recipes (not API). An Initializer is a recipe: its kind and
// parameters, kept so that a Variable holds the recipe of its initial value
// (TensorFlow keeps the initializer op, not its output), re-runs it as
// TensorFlow re-runs the op, and a meta graph exports it as ops.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/random_ops_internal.h"
#include "varstate/initializers.h"

namespace varstate::internal {

enum class InitializerKind {
  kCustom,  // Initializer(dtype, fn): no op form
  kZeros,
  kOnes,
  kConstant,
  kRandomUniform,
  kRandomNormal,
  kTruncatedNormal,
  kUniformUnitScaling,
  kVarianceScaling,
};

struct InitializerRecipe {
  InitializerKind kind = InitializerKind::kCustom;
  DType dtype = DType::kFloat;
  // kConstant: the value (host). kRandomUniform: minval, maxval (a, b);
  // kRandomNormal, kTruncatedNormal: mean, stddev (a, b). Host tensors.
  Tensor value;
  Tensor a;
  Tensor b;
  bool has_maxval = true;
  // kVarianceScaling: scale, mode and (lower-case) distribution;
  // kUniformUnitScaling: the factor in `scale`.
  double scale = 1.0;
  std::string mode;
  std::string distribution;
  std::optional<int64_t> op_seed;
  // A fixed pair (the seed attrs of an imported graph's random op); when
  // set, op_seed and the graph seed are not consulted.
  std::optional<SeedPair> seeds;
  Initializer::Fn custom;
};

bool is_random(InitializerKind kind);

// The recipe of `init` (never null for a non-empty Initializer).
const std::shared_ptr<const InitializerRecipe>& recipe_of(const Initializer& init);
Initializer make_initializer(std::shared_ptr<const InitializerRecipe> recipe);

// The random op a random recipe runs for a variable of `full_shape`: its
// distribution and (a, b) as host scalars of `dtype`, the op's scale and
// shift arithmetic with the fans already applied.
struct RandomOpForm {
  RandomDistribution distribution;
  const char* op_type;  // "RandomUniform", "RandomUniformInt", ...
  Tensor a;
  Tensor b;
};
RandomOpForm random_op_form(const InitializerRecipe& recipe, const TensorShape& full_shape,
                            DType dtype);

// The tensor run `run` (0 = the first) of the recipe's op gives, with the
// op's resolved `seeds` (ignored by non-random recipes). Arguments are
// validated by the caller (Initializer::operator()).
Tensor run_recipe(const InitializerRecipe& recipe, const TensorShape& shape, DType dtype,
                  const PartitionInfo* partition_info, SeedPair seeds, int64_t run);

// An initializer bound to a variable's shape, dtype and partition: the
// variable's initial value op. The seed pair is resolved by the first run
// (or seeds()), once, as TensorFlow fixes a random op's seeds when it is
// created; each run() is a new run of that op. Thread-safe.
class BoundInitializer {
 public:
  BoundInitializer(Initializer init, TensorShape shape, DType dtype,
                   std::optional<PartitionInfo> partition_info);
  Tensor run();
  SeedPair seeds();
  const InitializerRecipe& recipe() const { return *recipe_of(init_); }
  const TensorShape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  const std::optional<PartitionInfo>& partition_info() const { return partition_info_; }

 private:
  SeedPair seeds_locked();
  const Initializer init_;
  const TensorShape shape_;
  const DType dtype_;
  const std::optional<PartitionInfo> partition_info_;
  std::mutex mu_;
  std::optional<SeedPair> seeds_;
  int64_t runs_ = 0;
};

// What bind() returns: a callable over a shared BoundInitializer.
struct BoundInitializerFn {
  std::shared_ptr<BoundInitializer> bound;
  Tensor operator()() const { return bound->run(); }
};

// The BoundInitializer behind `fn` when bind() made it, else null.
std::shared_ptr<BoundInitializer> bound_initializer(const InitialValueFn& fn);

}  // namespace varstate::internal
