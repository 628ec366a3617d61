#include <catch2/catch.hpp>

#include "tensor_util.h"
#include "varstate/dense_update.h"
#include "varstate/error.h"

using namespace varstate;
using namespace varstate::testing;

namespace {

// Naive reference: element-wise loop on host values.
template <typename T>
std::vector<T> reference(int op, std::vector<T> dst, const std::vector<T>& src) {
  for (size_t i = 0; i < dst.size(); ++i) {
    const T& s = src[src.size() == 1 ? 0 : i];
    if (op == 0) {
      dst[i] = s;
    } else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
      float r = op == 1 ? float(dst[i]) + float(s) : float(dst[i]) - float(s);
      dst[i] = T(r);
    } else {
      dst[i] = static_cast<T>(op == 1 ? dst[i] + s : dst[i] - s);
    }
  }
  return dst;
}

void apply(int op, Tensor& t, const Tensor& v) {
  if (op == 0) assign(t, v);
  if (op == 1) assign_add(t, v);
  if (op == 2) assign_sub(t, v);
}

}  // namespace

TEST_CASE("dense updates match a reference loop for every dtype", "[dense_update]") {
  // Sizes: one element, odd, and large enough to use the thread pool.
  for (int64_t n : {int64_t{1}, int64_t{37}, int64_t{300000}}) {
#define VARSTATE_DENSE_CASE(E, T)                                                             \
  for (int op = 0; op < 3; ++op) {                                                            \
    for (bool scalar : {false, true}) {                                                       \
      CAPTURE(#E, n, op, scalar, kSeed);                                                      \
      Tensor target = random_tensor(DType::E, {n}, kSeed + op);                               \
      Tensor value =                                                                          \
          random_tensor(DType::E, scalar ? TensorShape{} : TensorShape{n}, kSeed + 100 + op); \
      auto expected = reference<T>(op, target.to_vector<T>(), value.to_vector<T>());          \
      apply(op, target, value);                                                               \
      Tensor want = Tensor::from_vector<T>(expected, {n});                                    \
      CHECK(compare_tensors(target, want.reshaped({n})).empty());                             \
    }                                                                                         \
  }
    VARSTATE_FOR_EACH_NUMERIC_STORAGE_TYPE(VARSTATE_DENSE_CASE)
#undef VARSTATE_DENSE_CASE
  }
}

TEST_CASE("assign copies bool and string tensors", "[dense_update]") {
  Tensor b({true, false, true});
  assign(b, Tensor({false, false, true}));
  CHECK(b.to_vector<bool>() == std::vector<bool>{false, false, true});
  Tensor s = Tensor::from_vector<std::string>({"a", "b"});
  assign(s, Tensor::from_vector<std::string>({"xyz", "w"}));
  CHECK(s.to_vector<std::string>() == std::vector<std::string>{"xyz", "w"});
  CHECK_THROWS_AS(assign_add(s, Tensor::from_vector<std::string>({"q", "r"})), TypeError);
}

TEST_CASE("assign with validate_shape=false takes the value's shape", "[dense_update]") {
  Tensor t({1.f, 2.f});
  Tensor alias = t;
  assign(t, Tensor({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}), {.validate_shape = false});
  CHECK(t.shape() == TensorShape{2, 3});
  CHECK(t.to_vector<float>()[5] == 6.f);
  CHECK(alias.to_vector<float>() == std::vector<float>{1.f, 2.f});  // old buffer untouched
}

TEST_CASE("literals convert to the target's dtype", "[dense_update]") {
  Tensor t({1.f, 2.f});
  assign_add(t, 1);    // int literal -> float32
  assign_sub(t, 0.5);  // double literal -> float32
  CHECK(t.to_vector<float>() == std::vector<float>{1.5f, 2.5f});
  Tensor i({1, 2});
  CHECK_THROWS_AS(assign_add(i, 0.5), TypeError);
}

TEST_CASE("bad updates raise and leave the target unchanged", "[dense_update]") {
  Tensor t({{1.f, 2.f}, {3.f, 4.f}});
  const auto before = t.to_vector<float>();
  CHECK_THROWS_MATCHES(assign(t, Tensor({1.f, 2.f, 3.f}), {.name = "w:0"}), ValueError,
                       Catch::Matchers::Message("Assign to \"w:0\": shapes must match: target "
                                                "shape [2,2], value shape [3] (or a scalar)"));
  CHECK_THROWS_WITH(
      assign(t, Tensor({1.f, 2.f, 3.f}), {.name = "w:0"}),
      Catch::Contains("\"w:0\"") && Catch::Contains("[2,2]") && Catch::Contains("[3]"));
  CHECK_THROWS_AS(assign_add(t, Tensor({1.0, 2.0, 3.0, 4.0}).cast(DType::kDouble).reshaped({2, 2})),
                  TypeError);
  CHECK_THROWS_WITH(
      assign_sub(t, Tensor({1, 2, 3, 4}).cast(DType::kInt32).reshaped({2, 2}), {.name = "w:0"}),
      Catch::Contains("AssignSub") && Catch::Contains("float32") && Catch::Contains("int32"));
  Tensor empty;
  CHECK_THROWS_AS(assign(t, empty), InvalidArgumentError);
  CHECK_THROWS_AS(assign(empty, t), InvalidArgumentError);
  CHECK(t.to_vector<float>() == before);
}
