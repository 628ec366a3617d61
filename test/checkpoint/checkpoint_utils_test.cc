// list_variables, load_variable and init_from_checkpoint
// (varstate/checkpoint_utils.h): scope and name mappings, partitioned
// variables across partitionings, a directory's latest checkpoint,
// TensorFlow's own checkpoint, and errors that change no initializer. Runs
// on each device (test_checkpoint_on_gpu).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "checkpoint/checkpoint_test_util.h"
#include "device_fixture.h"
#include "test_util.h"
#include "varstate/checkpoint_utils.h"
#include "varstate/dynamic_variable.h"
#include "varstate/error.h"
#include "varstate/initializers.h"
#include "varstate/partitioners.h"
#include "varstate/saver.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

using namespace varstate;
using testing::FreshSession;
using testing::TempDir;

namespace {

std::vector<float> iota(int64_t n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return v;
}

std::vector<float> floats(const Tensor& t) { return t.to_host().to_vector<float>(); }

std::vector<float> concat(const std::vector<Variable>& parts) {
  std::vector<float> out;
  for (const Variable& p : parts) {
    const std::vector<float> v = floats(p.value());
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// A checkpoint of "pre/w" [2,3], "pre/b" [3], "pre/emb" [10,2] in 3 parts
// and "other" [4], with known values; returns its prefix.
std::string make_checkpoint(const Session& session, const TempDir& dir) {
  reset_default_graph();
  {
    VariableScopeGuard pre = variable_scope("pre");
    get_variable("w", {.initializer = Tensor::from_vector<float>(iota(6, 1.f), {2, 3})});
    get_variable("b", {.initializer = Tensor::from_vector<float>(iota(3, 10.f), {3})});
    get_variable("emb", {.initializer = Tensor::from_vector<float>(iota(20, 100.f), {10, 2}),
                         .partitioner = fixed_size_partitioner(3)});
  }
  Variable other(Tensor::from_vector<float>(iota(4, 50.f), {4}), {.name = "other"});
  session.run(global_variables_initializer());
  const std::string prefix = dir / "model";
  Saver().save(session, prefix).wait();
  reset_default_graph();
  return prefix;
}

}  // namespace

TEST_CASE_METHOD(FreshSession, "list_variables and load_variable", "[checkpoint_utils]") {
  TempDir dir;
  const std::string prefix = make_checkpoint(session, dir);
  std::vector<std::string> names;
  for (const auto& [name, shape] : list_variables(prefix)) {
    names.push_back(name + TensorShape(shape).to_string());
  }
  CHECK(names == std::vector<std::string>{"other[4]", "pre/b[3]", "pre/emb[10,2]", "pre/w[2,3]"});
  CHECK(floats(load_variable(prefix, "pre/emb")) == iota(20, 100.f));
  // A directory means its latest checkpoint.
  CHECK(floats(load_variable(dir.path(), "pre/b")) == iota(3, 10.f));
  CHECK_THROWS_AS(load_variable(prefix, "nope"), NotFoundError);
  TempDir empty;
  CHECK_THROWS_WITH(list_variables(empty.path()),
                    Catch::Contains("Couldn't find 'checkpoint' file or checkpoints"));
}

TEST_CASE_METHOD(FreshSession, "init_from_checkpoint maps scopes, names and partitions",
                 "[checkpoint_utils]") {
  TempDir dir;
  const std::string prefix = make_checkpoint(session, dir);
  PartitionedVariable emb = [] {
    VariableScopeGuard enc = variable_scope("enc");
    get_variable("w", {.shape = TensorShape{2, 3}});
    get_variable("b", {.shape = TensorShape{3}, .initializer = zeros_initializer()});
    // Another partitioning than the checkpoint's.
    return PartitionedVariable(get_variable(
        "emb", {.shape = TensorShape{10, 2}, .partitioner = fixed_size_partitioner(2)}));
  }();
  Variable extra = get_variable("extra", {.shape = TensorShape{4}});
  Variable untouched =
      get_variable("untouched", {.shape = TensorShape{2}, .initializer = ones_initializer()});
  init_from_checkpoint(dir.path(),
                       {{"pre/", std::string("enc/")}, {"other", std::string("extra")}});
  session.run(global_variables_initializer());
  std::vector<Variable> vars = global_variables();
  auto var = [&](const std::string& name) {
    for (const Variable& v : vars) {
      if (v.op_name() == name) return v;
    }
    FAIL("no " << name);
    throw;
  };
  CHECK(floats(var("enc/w").value()) == iota(6, 1.f));
  CHECK(floats(var("enc/b").value()) == iota(3, 10.f));
  CHECK(concat(emb.variables()) == iota(20, 100.f));
  CHECK(floats(extra.value()) == iota(4, 50.f));
  CHECK(floats(untouched.value()) == std::vector<float>{1.f, 1.f});
}

TEST_CASE_METHOD(FreshSession, "init_from_checkpoint: root, Variables and TensorFlow's checkpoint",
                 "[checkpoint_utils]") {
  TempDir dir;
  const std::string prefix = make_checkpoint(session, dir);
  {
    VariableScopeGuard pre = variable_scope("pre");
    get_variable("w", {.shape = TensorShape{2, 3}});
  }
  Variable other(Tensor::from_vector<float>({0, 0, 0, 0}, {4}), {.name = "other"});
  // "/" -> "/": every store variable from the tensor of its own name.
  init_from_checkpoint(prefix, {{"/", std::string("/")}, {"other", other}});
  // An initializer Op built before reads the new recipe too.
  session.run(global_variables_initializer());
  std::vector<Variable> vars = global_variables();
  CHECK(floats(vars[0].value()) == iota(6, 1.f));
  CHECK(floats(other.value()) == iota(4, 50.f));

  // TensorFlow's V2 checkpoint (half_plus_two: scalars a, b, c).
  reset_default_graph();
  Variable a(Tensor(0.f), {.name = "x"});
  Variable c = get_variable("c", {.shape = TensorShape{}, .initializer = zeros_initializer()});
  const std::string tf = testing::testdata_dir() + "/tensorflow/half_plus_two_v2/variables";
  init_from_checkpoint(tf, {{"a", a}, {"c", std::string("c")}});
  session.run(global_variables_initializer());
  CHECK(a.value().to_host().scalar<float>() == 0.5f);
  CHECK(c.value().to_host().scalar<float>() == 3.0f);
}

TEST_CASE_METHOD(FreshSession, "init_from_checkpoint's errors change no initializer",
                 "[checkpoint_utils][errors]") {
  TempDir dir;
  const std::string prefix = make_checkpoint(session, dir);
  Variable w = [] {
    VariableScopeGuard enc = variable_scope("enc");
    return Variable(
        get_variable("w", {.shape = TensorShape{2, 3}, .initializer = ones_initializer()}));
  }();
  Variable wide =
      get_variable("wide", {.shape = TensorShape{4}, .initializer = ones_initializer()});
  Variable ints(Tensor::from_vector<int32_t>({0, 0, 0, 0}, {4}), {.name = "ints"});
  // The first entry is fine; each second one fails, so nothing changes.
  CHECK_THROWS_WITH(init_from_checkpoint(prefix, {{"pre/w", std::string("enc/w")},
                                                  {"pre/zzz", std::string("wide")}}),
                    Catch::Contains("Tensor pre/zzz is not found in"));
  CHECK_THROWS_WITH(
      init_from_checkpoint(prefix,
                           {{"pre/w", std::string("enc/w")}, {"pre/b", std::string("wide")}}),
      Catch::Contains("Shape of variable \"wide\" ([4]) doesn't match with shape of tensor pre/b "
                      "([3])"));
  CHECK_THROWS_WITH(
      init_from_checkpoint(prefix, {{"other", ints}, {"pre/w", std::string("enc/w")}}),
      Catch::Contains("dtype of variable \"ints\" (int32) doesn't match with dtype of tensor "
                      "other (float32)"));
  CHECK_THROWS_WITH(
      init_from_checkpoint(prefix, {{"pre/w", std::string("enc/w")}, {"x", std::string("enc/")}}),
      Catch::Contains("Assignment map with scope only name enc should map to scope only x"));
  // A scope whose variables' tensors are missing.
  CHECK_THROWS_WITH(init_from_checkpoint(prefix, {{"nothere/", std::string("enc/")}}),
                    Catch::Contains("Tensor nothere/w (w in nothere/) is not found"));

  session.run(global_variables_initializer());
  CHECK(floats(w.value()) == std::vector<float>(6, 1.f));
  CHECK(floats(wide.value()) == std::vector<float>(4, 1.f));

  // A dynamic variable: named, refused; under a scope, left out.
  DynamicVariable table = get_dynamic_variable("enc/table", {.dim = 2});
  CHECK_THROWS_WITH(init_from_checkpoint(prefix, {{"pre/emb", table.variable()}}),
                    Catch::Contains("\"enc/table\" is a dynamic variable"));
  init_from_checkpoint(prefix, {{"pre/", std::string("enc/")}});  // enc/w only
  session.run(variables_initializer({w}));
  CHECK(floats(w.value()) == iota(6, 1.f));
}
